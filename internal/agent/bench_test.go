package agent_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/store"
)

// BenchmarkTurnLongConversation: a turn on a conversation of 2,000 messages
// (1,000 user messages and answers of ~200 bytes), against an instant
// provider with a window large enough to take all of it (no compaction: the
// most the agent ever builds). build-µs is the server's own time from the
// turn's start to the request handed to the provider (the p50); ns/op the
// whole turn, its two durable writes included. "cold" is a new agent every
// turn (the conversation read whole from SQLite, as every turn did before
// the history was kept), "warm" the same agent turn after turn (only the
// rows appended since the last turn are read).
func BenchmarkTurnLongConversation(b *testing.B) {
	for _, mode := range []string{"cold", "warm"} {
		b.Run(mode, func(b *testing.B) {
			ctx := b.Context()
			st, err := store.Open(ctx, filepath.Join(b.TempDir(), "buddy.db"), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close(context.Background())
			conv := "c_bench"
			if err := st.CreateConversation(ctx, store.Conversation{ID: conv}); err != nil {
				b.Fatal(err)
			}
			for i := range 1000 {
				for _, m := range []store.Message{
					{Conversation: conv, Role: store.RoleUser, Text: fmt.Sprintf("message %d: %s", i, words(200, "w"))},
					{Conversation: conv, Role: store.RoleAssistant, Text: fmt.Sprintf("answer %d: %s", i, words(200, "a"))},
				} {
					if _, err := st.AppendMessage(ctx, m); err != nil {
						b.Fatal(err)
					}
				}
			}
			gate := approval.New(newCatalog(), approval.Options{})
			var start time.Time
			var builds []time.Duration
			p := agent.ProviderFunc(func(_ context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
				builds = append(builds, time.Since(start))
				if len(req.Messages) < 2000 {
					return nil, fmt.Errorf("only %d messages sent", len(req.Messages))
				}
				onText("OK")
				return &agent.Response{Text: "OK", StopReason: "stop", Usage: agent.Usage{PromptTokens: 1, Reported: true}}, nil
			})
			opts := agent.Options{Provider: p, Skills: gate, History: st, Window: 1 << 22}
			a := agent.New(opts)
			a.Turn(ctx, conv, "warm up", &recSink{})
			builds = builds[:0]
			for b.Loop() {
				if mode == "cold" {
					a = agent.New(opts)
				}
				start = time.Now()
				if out := a.Turn(ctx, conv, "hi", &recSink{}); out.Reason != agent.ReasonFinal {
					b.Fatalf("%+v", out)
				}
			}
			slices.Sort(builds)
			b.ReportMetric(float64(builds[len(builds)/2].Microseconds()), "build-µs")
		})
	}
}
