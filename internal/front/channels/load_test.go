package channels_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/store"
)

// TestThousandMessages: 1,000 messages from 50 chats, in a shuffled order,
// through faults (a dropped poll, a 5xx on a send, a 429): every chat gets
// every answer once, in the order it wrote.
func TestThousandMessages(t *testing.T) {
	const chats, each = 50, 20
	if testing.Short() {
		t.Skip("-short")
	}
	var allow []int64
	for c := range chats {
		allow = append(allow, int64(1000+c))
	}
	bot := newFakeBot(t)
	// Edits at most once a second, as on Telegram: each answer is one
	// send and, when its last words came later, one edit.
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: allow, bot: bot, edit: time.Second})
	bot.inject("getUpdates", fault{}, fault{drop: true}, fault{}, fault{status: 502, desc: "Bad Gateway"})
	bot.inject("sendMessage", fault{}, fault{}, fault{status: 500, desc: "Internal Server Error"}, fault{}, fault{status: 429, retryAfter: 1, desc: "Too Many Requests: retry after 1"})
	// Each chat's messages in order, the chats interleaved at random.
	next := make([]int, chats)
	rng := rand.New(rand.NewPCG(1, 2))
	for sent := 0; sent < chats*each; {
		c := rng.IntN(chats)
		if next[c] == each {
			continue
		}
		bot.message(int64(1000+c), fmt.Sprintf("c%d m%d", c, next[c]))
		next[c]++
		sent++
	}
	start := time.Now()
	// Counts, looked at every 50 ms: reading the whole inbox as often
	// would cost the test more than the channel's work under -race.
	deadline := start.Add(waitFor)
	for {
		in, _, _ := r.st.InboxBacklog(t.Context(), "telegram")
		out, _ := r.st.OutboxBacklog(t.Context(), "telegram")
		if r.agent.count() >= chats*each && bot.pending() == 0 && in == 0 && out == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d turns, %d updates unacknowledged, inbox %d, outbox %d", waitFor, r.agent.count(), bot.pending(), in, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("1,000 messages from 50 chats answered in %v", time.Since(start).Round(time.Millisecond))
	if s := r.inboxStates(); s[store.InboxDone] != chats*each {
		t.Errorf("inbox: %v", s)
	}
	for c := range chats {
		var want []string
		for m := range each {
			want = append(want, fmt.Sprintf("echo: c%d m%d", c, m))
		}
		if got := bot.texts(int64(1000 + c)); !slices.Equal(got, want) {
			t.Fatalf("chat %d shows %q", c, got)
		}
	}
	if n := r.agent.count(); n != chats*each {
		t.Errorf("%d turns, want %d", n, chats*each)
	}
	if n := bot.pending(); n != 0 {
		t.Errorf("%d updates unacknowledged", n)
	}
	r.noToken()
}
