// Package approval is the gate between a request to run a skill and the
// runtime: read-only skills run at once, mutating and network skills wait for
// the user's answer unless their policy says otherwise (MISSION §4).
//
//	g := approval.NewGate(asker)                  // asker: a terminal prompt, a WebSocket, ...
//	err := g.Check(ctx, approval.Request{
//		Conversation: convID, Skill: "write_file", Permission: "mutating",
//		Policy: "once", Arguments: args,
//	})
//	if errors.Is(err, errs.ErrDenied) { /* tell the LLM: err.Error() */ }
//
// Policies: "always" asks on every call, "once" asks on the first call of a
// skill in a conversation, "trust" never asks. The gate is middleware: skills
// never see it.
package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/buddy-run/buddy/internal/errs"
)

// Request is what the user is asked to approve.
type Request struct {
	Conversation string          // "" for one-shot use (the CLI)
	Skill        string          // skill name
	Permission   string          // read_only | mutating | network
	Policy       string          // always | once | trust
	Arguments    json.RawMessage // exactly what will be passed to the skill
}

// Asker asks the user. It returns true to approve; an error (a timeout, no one
// to ask) counts as a denial and its text is shown.
type Asker interface {
	Ask(ctx context.Context, req Request) (bool, error)
}

// AskerFunc adapts a function to Asker.
type AskerFunc func(ctx context.Context, req Request) (bool, error)

// Ask calls f.
func (f AskerFunc) Ask(ctx context.Context, req Request) (bool, error) { return f(ctx, req) }

// Gate decides whether a call may run.
type Gate struct {
	asker Asker
	mu    sync.Mutex
	once  map[onceKey]bool          // approved under "once"
	asked map[onceKey]chan struct{} // a "once" question in flight, closed when answered
}

// onceKey is a (conversation, skill) pair.
type onceKey struct{ conversation, skill string }

// NewGate returns a gate asking through a.
func NewGate(a Asker) *Gate {
	return &Gate{asker: a, once: map[onceKey]bool{}, asked: map[onceKey]chan struct{}{}}
}

// Check returns nil if the call may run, or an error wrapping errs.ErrDenied
// whose message is fit to hand the LLM ("User denied execution of write_file").
// A canceled ctx gives errs.ErrCanceled.
//
// Under "once", calls of the same skill in the same conversation that arrive
// while the first question is open wait for its answer instead of asking
// again; if it is a denial, the next of them asks.
func (g *Gate) Check(ctx context.Context, req Request) error {
	switch req.Policy {
	case "trust":
		return nil
	case "always":
		return g.ask(ctx, req)
	case "once":
	default:
		return errs.New(errs.ErrInternal, fmt.Sprintf("unknown approval policy %q for %s", req.Policy, req.Skill))
	}
	key := onceKey{req.Conversation, req.Skill}
	for {
		g.mu.Lock()
		if g.once[key] {
			g.mu.Unlock()
			return nil
		}
		if wait, busy := g.asked[key]; busy {
			g.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return g.gaveUp(ctx, req, ctx.Err())
			}
		}
		answered := make(chan struct{})
		g.asked[key] = answered
		g.mu.Unlock()

		err := g.ask(ctx, req)

		g.mu.Lock()
		if err == nil {
			g.once[key] = true
		}
		delete(g.asked, key)
		close(answered)
		g.mu.Unlock()
		return err
	}
}

// ask asks the user once.
func (g *Gate) ask(ctx context.Context, req Request) error {
	if g.asker == nil {
		// No one to ask is a denial, never a panic.
		return denied(req, errors.New("no one to ask for approval"))
	}
	approved, err := g.asker.Ask(ctx, req)
	if err != nil || !approved {
		if ctx.Err() != nil || err != nil {
			return g.gaveUp(ctx, req, err)
		}
		return denied(req, nil)
	}
	return nil
}

// gaveUp turns a question that got no answer into an error: a canceled ctx
// (a closed conversation, Ctrl-C) is a cancellation, anything else (a timeout,
// no one to ask) a denial that keeps its cause.
func (g *Gate) gaveUp(ctx context.Context, req Request, cause error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return errs.Wrap(errs.ErrCanceled, "approval of "+req.Skill+" canceled", cause)
	}
	if cause == nil {
		cause = ctx.Err()
	}
	return denied(req, cause)
}

func denied(req Request, cause error) error {
	return errs.Wrap(errs.ErrDenied, fmt.Sprintf("User denied execution of %s", req.Skill), cause)
}
