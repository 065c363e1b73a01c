// Package approval is the gate between a request to run a skill and the
// skill: read-only skills run at once, mutating and network skills wait for
// the user's answer unless their policy says otherwise (MISSION §4).
//
// The Gate wraps the catalog of skills and is itself a catalog.Invoker: it is
// the only Invoker a front end (the WebSocket server, MCP, the CLI) holds, so
// no front end can run a skill without the gate.
//
//	g := approval.New(reg, approval.Options{Asker: asker, Timeout: time.Minute})
//	res, err := g.Invoke(ctx, catalog.Call{Conversation: id, Skill: "write_file", Arguments: args})
//	if errors.Is(err, errs.ErrDenied) { /* tell the LLM: err.Error() */ }
//	g.EndConversation(id) // forget its "once" approvals
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
	"time"

	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/errs"
)

// The gate is the Invoker front ends hold.
var (
	_ catalog.Invoker = (*Gate)(nil)
	_ catalog.Catalog = (*Gate)(nil)
)

// Request is what the user is asked to approve.
type Request struct {
	Conversation string // "" for one-shot use (the CLI)
	CallID       string // the front end's id of the call, if any
	Skill        string // skill name
	Permission   catalog.Permission
	Policy       catalog.Policy
	Arguments    json.RawMessage // exactly what will be passed to the skill
	// ArgumentsHash is catalog.ArgumentsHash(Arguments), computed once by
	// the gate (an approval is bound to it).
	ArgumentsHash string
	// Touches says in plain words what the skill may touch (from its grant).
	Touches []string
	// Targets are what this call would touch, resolved now by the host
	// functions' own resolvers (catalog.Resolver): shown first, approved as is.
	Targets []catalog.Target
	// Reason, when not "", says why the user is asked although the policy
	// would not ask (a network call after a private read, targets changed).
	Reason string
	// Expires is when an unanswered question counts as a denial (zero: no
	// limit of the gate's own).
	Expires time.Time
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

// Outcome is what became of one call through the gate, for the audit log.
type Outcome struct {
	Call catalog.Call
	// ArgumentsHash is catalog.ArgumentsHash(Call.Arguments), computed once
	// per call (for the question and the audit rows alike).
	ArgumentsHash string
	Info          catalog.Info // zero when the skill was not found
	Asked         bool         // the user was asked
	Result        *catalog.Result
	Targets       []catalog.Target // resolved before the call (the last resolution shown)
	Reason        string           // why the user was asked beyond the policy, if so
	Err           error            // nil on success; errs.ErrDenied when refused
	Started       time.Time
	Duration      time.Duration
}

// Options configure a Gate.
type Options struct {
	// Asker asks the user; nil denies every call that needs approval.
	Asker Asker
	// Timeout bounds the wait for an answer: no answer in time is a denial.
	// 0 means no limit of the gate's own.
	Timeout time.Duration
	// Record, if set, is told the outcome of every Invoke (the audit log).
	// It runs on the caller's goroutine before Invoke returns.
	Record func(ctx context.Context, o Outcome)
	// Guard, if set, may refuse a call that passed Check, once its targets
	// are resolved (req.Targets) and before anyone is asked (a SKILL.md
	// skill's declared permissions binding the conversation:
	// internal/instructions.Sessions). A refusal should wrap
	// errs.ErrForbidden and name why; it is recorded like any other.
	Guard func(ctx context.Context, req Request) error
	// AllowAfterPrivateRead lets a network skill run under its policy in a
	// conversation that has read private data. By default (false) such a
	// call is asked, whatever the policy ([approval] after_private_read).
	AllowAfterPrivateRead bool
}

// Gate decides whether a call may run, and runs it.
type Gate struct {
	cat  catalog.Catalog
	opts Options

	mu    sync.Mutex
	once  map[string]map[string]bool // conversation → skill → approved under "once"
	asked map[onceKey]chan struct{}  // a "once" question in flight, closed when answered
	read  map[string][]string        // conversation → private data it has read
}

// onceKey is a (conversation, skill) pair.
type onceKey struct{ conversation, skill string }

// New returns a gate in front of cat.
func New(cat catalog.Catalog, opts Options) *Gate {
	return &Gate{cat: cat, opts: opts, once: map[string]map[string]bool{}, asked: map[onceKey]chan struct{}{}, read: map[string][]string{}}
}

// NewGate returns a gate with no catalog that asks through a: only Approve
// may be used on it.
func NewGate(a Asker) *Gate { return New(nil, Options{Asker: a}) }

// List implements catalog.Catalog.
func (g *Gate) List(ctx context.Context) ([]catalog.Info, error) { return g.cat.List(ctx) }

// Lookup implements catalog.Catalog.
func (g *Gate) Lookup(ctx context.Context, name string) (catalog.Info, error) {
	return g.cat.Lookup(ctx, name)
}

// Check implements catalog.Catalog: whether c could run, without asking.
func (g *Gate) Check(ctx context.Context, c catalog.Call) (catalog.Info, error) {
	return g.cat.Check(ctx, c)
}

// Invoke checks c, asks the user when the skill's policy says so, and runs it.
// A refusal is an error wrapping errs.ErrDenied whose text is fit to hand the
// LLM ("User denied execution of write_file").
func (g *Gate) Invoke(ctx context.Context, c catalog.Call) (*catalog.Result, error) {
	if c.ArgumentsHash == "" {
		c.ArgumentsHash = catalog.ArgumentsHash(c.Arguments)
	}
	o := Outcome{Call: c, Started: time.Now(), ArgumentsHash: c.ArgumentsHash}
	defer func() {
		if g.opts.Record != nil {
			o.Duration = time.Since(o.Started)
			g.opts.Record(context.WithoutCancel(ctx), o)
		}
	}()
	info, err := g.cat.Check(ctx, c)
	o.Info = info
	if err != nil {
		o.Err = err
		return nil, err
	}
	req := Request{
		Conversation: c.Conversation, CallID: c.ID, Skill: info.Name, Permission: info.Permission,
		Policy: info.Policy, Arguments: c.Arguments, ArgumentsHash: o.ArgumentsHash, Touches: info.Touches,
	}
	if c.Conversation == "" && req.Policy == catalog.Once {
		// A one-shot call is its own conversation: "once" asks every time.
		req.Policy = catalog.Always
	}
	if err := g.approveTargets(ctx, c, info, &req, &o); err != nil {
		o.Err = err
		return nil, err
	}
	res, err := g.cat.Invoke(ctx, c)
	o.Result, o.Err = res, err
	g.noteRead(c, info, req.Targets, res, err)
	return res, err
}

// EndConversation forgets a conversation's "once" approvals: a conversation
// that is deleted, or a server that ends it, asks again if it comes back.
func (g *Gate) EndConversation(id string) {
	g.mu.Lock()
	delete(g.once, id)
	delete(g.read, id)
	g.mu.Unlock()
}

// Approve returns nil if the call may run, or an error wrapping errs.ErrDenied
// whose message is fit to hand the LLM ("User denied execution of write_file").
// A canceled ctx gives errs.ErrCanceled.
//
// Under "once", calls of the same skill in the same conversation that arrive
// while the first question is open wait for its answer instead of asking
// again; if it is a denial, the next of them asks.
func (g *Gate) Approve(ctx context.Context, req Request) error {
	switch req.Policy {
	case catalog.Trust:
		return nil
	case catalog.Always:
		return g.ask(ctx, req)
	case catalog.Once:
	default:
		return errs.New(errs.ErrInternal, fmt.Sprintf("unknown approval policy %q for %s", req.Policy, req.Skill))
	}
	key := onceKey{req.Conversation, req.Skill}
	for {
		g.mu.Lock()
		if g.once[req.Conversation][req.Skill] {
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
			if g.once[req.Conversation] == nil {
				g.once[req.Conversation] = map[string]bool{}
			}
			g.once[req.Conversation][req.Skill] = true
		}
		delete(g.asked, key)
		close(answered)
		g.mu.Unlock()
		return err
	}
}

// ask asks the user once.
func (g *Gate) ask(ctx context.Context, req Request) error {
	if g.opts.Asker == nil {
		// No one to ask is a denial, never a panic.
		return denied(req, errors.New("no one to ask for approval"))
	}
	if g.opts.Timeout > 0 {
		var cancel context.CancelFunc
		req.Expires = time.Now().Add(g.opts.Timeout)
		ctx, cancel = context.WithDeadline(ctx, req.Expires)
		defer cancel()
	}
	approved, err := g.opts.Asker.Ask(ctx, req)
	if approved && err == nil && ctx.Err() != nil {
		// An answer that came after the question expired is no answer.
		return g.gaveUp(ctx, req, ctx.Err())
	}
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
