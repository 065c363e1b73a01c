package channels_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/testkit/cputime"
)

// BenchmarkAdapter is the Telegram adapter's cost per message, each call in
// a fresh sandbox as the host makes it: "in" parses a getUpdates answer
// holding one text message, "out" renders the answer's sendMessage (the
// model's Markdown in Telegram's HTML) and parses the Bot API's reply;
// "message" is both, what one message and its answer cost in the adapter.
func BenchmarkAdapter(b *testing.B) {
	a, err := adapter()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	update := `{"ok":true,"result":[{"update_id":100000001,"message":{"message_id":42,"from":{"id":42,"is_bot":false,"first_name":"Ada","username":"ada"},` +
		`"chat":{"id":42,"first_name":"Ada","username":"ada","type":"private"},"date":1795770000,"text":"What is on my calendar tomorrow, and can you remind me to call Bob at 3?"}}]}`
	parseIn, _ := json.Marshal(map[string]any{"action": "poll", "status": 200, "body": update, "limit": 100,
		"headers": map[string]string{"Content-Type": "application/json"}})
	renderIn, _ := json.Marshal(map[string]any{"action": "message", "chat": "42",
		"text": "Tomorrow you have **two** things:\n\n- 10:00 *stand-up* with the team\n- 14:00 dentist (`Dr. Lee`)\n\nI'll remind you to call Bob at 3 pm. <3"})
	sent := `{"ok":true,"result":{"message_id":43,"from":{"id":1,"is_bot":true,"first_name":"buddy"},"chat":{"id":42,"type":"private"},"date":1795770001,"text":"Tomorrow you have two things"}}`
	sentIn, _ := json.Marshal(map[string]any{"action": "message", "status": 200, "body": sent})
	in := func() {
		out, err := a.Parse(ctx, parseIn)
		if err != nil || !strings.Contains(string(out), `"update_id":"100000001"`) {
			b.Fatalf("parse: %s %v", out, err)
		}
	}
	send := func() {
		out, err := a.Render(ctx, renderIn)
		if err != nil || !strings.Contains(string(out), "sendMessage") {
			b.Fatalf("render: %s %v", out, err)
		}
		out, err = a.Parse(ctx, sentIn)
		if err != nil || !strings.Contains(string(out), `"message_id":"43"`) {
			b.Fatalf("parse: %s %v", out, err)
		}
	}
	in()
	send()
	b.Run("in", func(b *testing.B) {
		for b.Loop() {
			in()
		}
	})
	b.Run("out", func(b *testing.B) {
		for b.Loop() {
			send()
		}
	})
	b.Run("message", func(b *testing.B) {
		for b.Loop() {
			in()
			send()
		}
	})
}

// BenchmarkPollIdle is the process's CPU time per second while a channel
// waits for updates: the host long-polls a fake Bot API that holds each
// poll for its whole timeout (BUDDY_BENCH_POLL_TIMEOUT, default 1s: a poll
// a second, 25 times the default's), with buddy serve's page and the store
// open, and nothing arrives. Each op is an idle window (BUDDY_BENCH_IDLE,
// default 3s); cpu-ns/s is user+system time of the whole process over the
// window, polls/s the long polls it made.
func BenchmarkPollIdle(b *testing.B) {
	window, timeout := envDuration(b, "BUDDY_BENCH_IDLE", 3*time.Second), envDuration(b, "BUDDY_BENCH_POLL_TIMEOUT", time.Second)
	bot := newFakeBot(b)
	bot.hold = timeout
	r := newRig(b, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}, bot: bot, pollTimeout: timeout})
	// Settled: a message handled, its answer sent, the poll waiting.
	bot.message(42, "hi")
	r.waitTexts(42, "echo: hi")
	eventually(b, "the outbox done", func() bool { n, _ := r.st.OutboxBacklog(b.Context(), "telegram"); return n == 0 })
	time.Sleep(500 * time.Millisecond)
	if _, ok := cputime.Process(); !ok {
		b.Skip("no process CPU time on this system")
	}
	cpuTime := func() time.Duration { d, _ := cputime.Process(); return d }
	var cpu time.Duration
	var polls int
	var wall time.Duration
	for b.Loop() {
		p0, c0, t0 := bot.callCount("getUpdates"), cpuTime(), time.Now()
		time.Sleep(window)
		cpu += cpuTime() - c0
		wall += time.Since(t0)
		polls += bot.callCount("getUpdates") - p0
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/wall.Seconds(), "cpu-ns/s")
	b.ReportMetric(float64(polls)/wall.Seconds(), "polls/s")
	b.ReportMetric(0, "ns/op")
	if r.agent.count() != 1 {
		b.Fatalf("%d turns while idle", r.agent.count())
	}
}

// envDuration is the duration an environment variable sets, else def.
func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return d
}
