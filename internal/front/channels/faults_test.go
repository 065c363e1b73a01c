package channels_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/config"
)

// otherTimers are the fake clock's timers that are not the poll loop's
// back-off: the outbox's look for other processes' rows (3s), typing (10s),
// the watchdog (poll timeout 5s + 15s), a send's deadline (30s). The rigs
// use a jitter of 0.3: back-offs are 0.65 × 1s, 2s, 4s … 60s.
var otherTimers = []time.Duration{3 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second}

// faultRig is a rig on a fake clock.
func faultRig(t *testing.T) (*rig, *fakeClock) {
	clk := newFakeClock()
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}, clock: clk, jitter: 0.3})
	return r, clk
}

// backoff waits (real time) for a back-off timer of the poll loop, and
// returns its duration.
func (r *rig) backoff(clk *fakeClock) time.Duration {
	r.t.Helper()
	var d time.Duration
	eventually(r.t, "a back-off", func() bool {
		for _, p := range clk.pending() {
			if !slices.Contains(otherTimers, p) {
				d = p
				return true
			}
		}
		return false
	})
	return d
}

func TestOutageOfMinutes(t *testing.T) {
	r, clk := faultRig(t)
	r.bot.clk = clk
	r.bot.message(42, "before")
	r.waitTexts(42, "echo: before")
	r.bot.setDown(true)
	r.advanceUntil(clk, "a poll during the outage", func() bool { return len(r.bot.downPolls()) > 0 })
	start := r.bot.downPolls()[0]
	for i := range 3 {
		r.bot.message(42, fmt.Sprintf("during %d", i))
	}
	// Five minutes of outage, a simulated second at a time.
	for clk.Now().Sub(start) < 5*time.Minute {
		clk.Advance(time.Second)
		time.Sleep(2 * time.Millisecond)
	}
	s := r.status()
	if s["state"] != "backing_off" || !strings.Contains(fmt.Sprint(s["error"]), "unavailable") || s["lag_ms"].(float64) < 60_000 {
		t.Errorf("status during the outage = %+v", s)
	}
	hits := r.bot.downPolls()
	for i := 1; i < len(hits); i++ {
		if gap := hits[i].Sub(hits[i-1]); gap > time.Minute+time.Second {
			t.Errorf("%v between two polls: the back-off passed its ceiling", gap)
		}
	}
	if n := len(hits); n < 8 || n > 30 {
		t.Errorf("%d polls in a five-minute outage: want back-off (no hammering) and no giving up", n)
	}
	if r.agent.count() != 1 {
		t.Fatalf("turns during the outage")
	}
	r.bot.setDown(false)
	up := clk.Now()
	r.advanceUntil(clk, "the messages sent during the outage", func() bool {
		return slices.Equal(r.bot.texts(42), []string{"echo: before", "echo: during 0", "echo: during 1", "echo: during 2"})
	})
	if took := clk.Now().Sub(up); took > time.Minute+time.Second {
		t.Errorf("answered %v after the outage ended", took)
	}
	eventually(t, "the status to recover", func() bool {
		s := r.status()
		return s["state"] == "polling" && s["error"] == "" && s["lag_ms"] == float64(0)
	})
	if r.agent.count() != 4 {
		t.Errorf("%d turns, want 4 (none lost, none twice)", r.agent.count())
	}
}

func TestRateLimitedPoll(t *testing.T) {
	r, clk := faultRig(t)
	r.bot.inject("getUpdates", fault{status: 429, retryAfter: 7, desc: "Too Many Requests: retry after 7"})
	r.bot.message(42, "hi")
	if d := r.backoff(clk); d != 7*time.Second {
		t.Fatalf("waited %v after a 429 with retry_after 7", d)
	}
	polls := r.bot.callCount("getUpdates")
	clk.Advance(6900 * time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	if n := r.bot.callCount("getUpdates"); n != polls {
		t.Fatalf("polled again %d times before retry_after passed", n-polls)
	}
	clk.Advance(100 * time.Millisecond)
	r.waitTexts(42, "echo: hi")
}

func TestRateLimitedSend(t *testing.T) {
	r, clk := faultRig(t)
	r.bot.inject("sendMessage", fault{status: 429, retryAfter: 5, desc: "Too Many Requests: retry after 5"})
	r.bot.message(42, "hi")
	eventually(t, "the 429", func() bool { return r.bot.callCount("sendMessage") == 1 })
	clk.Advance(4900 * time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	if n := r.bot.callCount("sendMessage"); n != 1 {
		t.Fatalf("sent again before retry_after passed (%d calls)", n)
	}
	r.advanceUntil(clk, "the answer", func() bool { return slices.Equal(r.bot.texts(42), []string{"echo: hi"}) })
}

func TestConflictAnd5xx(t *testing.T) {
	r, clk := faultRig(t)
	r.bot.inject("getUpdates",
		fault{status: 409, desc: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"},
		fault{status: 409, desc: "Conflict: terminated by other getUpdates request"},
		fault{status: 502, desc: "Bad Gateway"},
		fault{status: 500, desc: "Internal Server Error"})
	r.bot.inject("sendMessage", fault{status: 502, desc: "Bad Gateway"}, fault{status: 503, desc: "Service Unavailable"})
	r.bot.message(42, "hi")
	d1 := r.backoff(clk)
	clk.Advance(d1)
	if s := r.status(); !strings.Contains(fmt.Sprint(s["error"]), "conflict") {
		t.Errorf("status after a 409 = %+v", s)
	}
	r.advanceUntil(clk, "the answer", func() bool { return slices.Equal(r.bot.texts(42), []string{"echo: hi"}) })
	if n := r.agent.count(); n != 1 {
		t.Errorf("%d turns", n)
	}
	r.noToken()
}

func TestStalledPoll(t *testing.T) {
	// The stall is the first poll's, and the clock moves only once the
	// fake holds it: the watchdog's timer starts before the request is
	// made, and cutting a poll still on its way would leave the stall to
	// the next one.
	clk := newFakeClock()
	bot := newFakeBot(t)
	bot.inject("getUpdates", fault{stall: true})
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}, clock: clk, jitter: 0.3, bot: bot})
	eventually(t, "the stalled poll's watchdog", func() bool {
		return bot.callCount("getUpdates") == 1 && slices.Contains(clk.pending(), 20*time.Second)
	})
	r.bot.message(42, "are you there?")
	clk.Advance(20 * time.Second)
	eventually(t, "the watchdog's restart", func() bool { return r.status()["restarts"] == float64(1) })
	if !strings.Contains(r.logs.String(), "the watchdog restarted a stalled poll") {
		t.Error("the restart is not logged")
	}
	if s := r.status(); !strings.Contains(fmt.Sprint(s["error"]), "stalled") {
		t.Errorf("status = %+v", s)
	}
	clk.Advance(r.backoff(clk))
	r.waitTexts(42, "echo: are you there?")
}

func TestDroppedConnection(t *testing.T) {
	r, clk := faultRig(t)
	r.bot.message(42, "one")
	r.waitTexts(42, "echo: one")
	r.bot.inject("getUpdates", fault{drop: true})
	r.bot.inject("sendMessage", fault{drop: true})
	r.bot.message(42, "two")
	clk.Advance(r.backoff(clk))
	r.advanceUntil(clk, "the answers", func() bool { return slices.Equal(r.bot.texts(42), []string{"echo: one", "echo: two"}) })
	if n := r.agent.count(); n != 2 {
		t.Errorf("%d turns, want 2", n)
	}
}
