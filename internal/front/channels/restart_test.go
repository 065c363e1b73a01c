package channels_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/store"
)

func TestRestartWithUnacknowledgedUpdates(t *testing.T) {
	bot := newFakeBot(t)
	for i := range 3 {
		bot.message(42, fmt.Sprintf("m%d", i))
	}
	// The first poll gets the three updates; the next one (which would
	// acknowledge them) hangs until the process stops.
	bot.inject("getUpdates", fault{}, fault{stall: true})
	stuck := newEchoAgent()
	stuck.gate = make(chan struct{}) // the first turn never ends by itself
	r1 := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}, bot: bot, agent: stuck})
	eventually(t, "the first turn to start", func() bool { return stuck.count() == 1 })
	if n := bot.pending(); n != 3 {
		t.Fatalf("the fake Bot API holds %d unacknowledged updates, want 3", n)
	}
	states := r1.inboxStates()
	if states[store.InboxRunning] != 1 || states[store.InboxNew] != 2 {
		t.Fatalf("inbox before the stop: %v", states)
	}
	r1.shutdown()
	bot.release()

	// The next start: the stored cursor acknowledges the updates (none is
	// delivered again), and the inbox is replayed: each message answered
	// once, in order.
	r2 := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}, bot: bot, dbPath: r1.db})
	r2.waitTexts(42, "echo: m0", "echo: m1", "echo: m2")
	if n := bot.pending(); n != 0 {
		t.Errorf("%d updates still unacknowledged", n)
	}
	conv, _, _ := r2.st.ChannelChat(t.Context(), "telegram", "42")
	if got := r2.agent.turns[conv]; !slices.Equal(got, []string{"m0", "m1", "m2"}) {
		t.Errorf("the restarted agent ran %q", got)
	}
	eventually(t, "the inbox to be done", func() bool { return r2.inboxStates()[store.InboxDone] == 3 })
	r2.noToken()
}

func TestRestartMidAnswer(t *testing.T) {
	// A turn cut by a stop after its answer began: the next start says the
	// answer was cut, and answers the message again; nothing is sent twice.
	bot := newFakeBot(t)
	a := newEchoAgent()
	a.gate, a.early = make(chan struct{}), "Let me think"
	r1 := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}, bot: bot, agent: a})
	bot.message(42, "long question")
	r1.waitTexts(42, "Let me think")
	r1.shutdown()
	r2 := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}, bot: bot, dbPath: r1.db})
	r2.waitTexts(42, "Let me think\n\n[cut short: buddy stopped while answering]", "echo: long question")
	if n := bot.callCount("sendMessage"); n != 2 {
		t.Errorf("%d messages sent, want 2", n)
	}
	if r2.agent.count() != 1 {
		t.Errorf("the message was answered %d times after the restart", r2.agent.count())
	}
}
