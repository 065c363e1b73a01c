package agent_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
)

// capMeter refuses a request that would take the turn past cap tokens, and
// keeps what it was asked.
type capMeter struct {
	cap     int64
	mu      sync.Mutex
	planned []agent.Planned
	open    int
}

func (m *capMeter) Reserve(_ context.Context, p agent.Planned) (func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.planned = append(m.planned, p)
	if p.TurnTokens+p.Tokens() > m.cap {
		return nil, errs.Wrap(errs.ErrFuelExhausted, fmt.Sprintf("tokens_per_turn is %d", m.cap), agent.ErrOverBudget)
	}
	m.open++
	return func() { m.mu.Lock(); m.open--; m.mu.Unlock() }, nil
}

// TestMeterRefusesBeforeTheRequest: the meter is asked before every
// request with the prompt's estimate, the answer's reserve and what the
// turn spent; a refusal ends the turn without a request, and every
// reservation is released.
func TestMeterRefusesBeforeTheRequest(t *testing.T) {
	e := newEnv(t, envOpts{})
	s := &script{steps: []step{call("read_file", `{"path":"a"}`), say("done")}}
	m := &capMeter{cap: 1 << 40}
	a := e.agent(s.provider(), func(o *agent.Options) { o.Meter = m; o.Window = 8192; o.Reserve = 1000 })
	if out := a.Turn(t.Context(), e.conv, "hello", &recSink{}); out.Reason != agent.ReasonFinal {
		t.Fatalf("turn: %+v", out)
	}
	if len(m.planned) != 2 || m.planned[0].AnswerTokens != 1000 || m.planned[0].PromptTokens <= 0 ||
		m.planned[0].TurnTokens != 0 || m.planned[1].TurnTokens <= 0 || m.open != 0 {
		t.Fatalf("planned = %+v, open %d", m.planned, m.open)
	}

	// A cap the first request already passes: no request at all.
	s2 := &script{}
	m2 := &capMeter{cap: 500}
	a2 := e.agent(s2.provider(), func(o *agent.Options) { o.Meter = m2; o.Window = 8192; o.Reserve = 1000 })
	out := a2.Turn(t.Context(), e.conv, "hello again", &recSink{})
	if out.Reason != agent.ReasonError || !errors.Is(out.Err, agent.ErrOverBudget) || errs.KindOf(out.Err) != errs.KindFuelExhausted {
		t.Fatalf("turn over budget: %+v", out)
	}
	if n := len(s2.requests()); n != 0 {
		t.Fatalf("%d requests made over budget", n)
	}
}

// TestLeanTurnsSeeNoHistory: a lean turn sends only its own message.
func TestLeanTurnsSeeNoHistory(t *testing.T) {
	e := newEnv(t, envOpts{})
	s := &script{steps: []step{say("one"), say("two")}}
	a := e.agent(s.provider(), func(o *agent.Options) { o.Lean = true })
	a.Turn(t.Context(), e.conv, "first", &recSink{})
	a.Turn(t.Context(), e.conv, "second", &recSink{})
	reqs := s.requests()
	if len(reqs) != 2 || len(reqs[1].Messages) != 1 || reqs[1].Messages[0].Text != "second" {
		t.Fatalf("requests = %+v", reqs)
	}
	if msgs, _ := e.st.Messages(t.Context(), e.conv); len(msgs) != 4 {
		t.Fatalf("stored %d messages, want 4", len(msgs))
	}
}
