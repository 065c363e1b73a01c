// Package approval is the gate between a request to run a skill and the
// skill: read-only skills run at once, mutating and network skills wait for
// the user's answer unless their policy says otherwise (docs/CONFIG.md,
// "Approval").
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
	"sync/atomic"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// The gate is the Invoker front ends hold.
var (
	_ catalog.Invoker = (*Gate)(nil)
	_ catalog.Skills  = (*Gate)(nil)
)

// Request is what the user is asked to approve: one prepared call
// (catalog.Prepared), shown with the facts of that handle.
type Request struct {
	Conversation string // "" for one-shot use (the CLI)
	// Scope is what the conversation's taint and SKILL.md bindings are kept
	// under (catalog.Call.StateScope).
	Scope  string
	CallID string // the front end's id of the call, if any
	Skill  string // skill name
	// Type is "" for a WebAssembly skill, else the SKILL.md skill's type.
	Type       string
	Permission catalog.Permission
	Policy     catalog.Policy
	// Version and ModuleSHA256 are the skill's version and the sha256 of
	// the module that runs if the user approves ("" for a SKILL.md skill,
	// whose ModuleSHA256 is that of its text).
	Version      string
	ModuleSHA256 string
	Arguments    json.RawMessage // exactly what will be passed to the skill
	// ArgumentsHash is catalog.ArgumentsHash(Arguments), computed once by
	// the gate (an approval is bound to it).
	ArgumentsHash string
	// Touches says in plain words what the skill may touch (from its grant).
	Touches []string
	// Grant is the skill's effective grant, structured.
	Grant catalog.Grant
	// Targets are what this call would touch, resolved now by the host
	// functions' own resolvers: shown first, approved as is.
	Targets []catalog.Target
	// Reason, when not "", says why the user is asked although the policy
	// would not ask (a network call after a private read, targets changed,
	// the skill changed while the question was open).
	Reason string
	// Expires is when an unanswered question counts as a denial (zero: no
	// limit of the gate's own).
	Expires time.Time

	fingerprint string // of the prepared skill: what a "once" approval covers
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
	Info          catalog.Info // the skill as prepared; zero when it was not found
	Asked         bool         // the user was asked
	Result        *catalog.Result
	Targets       []catalog.Target // resolved before the call (the last resolution shown)
	Reason        string           // why the user was asked beyond the policy, if so
	Err           error            // nil on success; errs.ErrDenied when refused
	// StateErr, when not nil, is why what the call taught the gate (a
	// private read, a "once" approval) could not be stored: it holds in
	// memory until the process ends.
	StateErr error
	Started  time.Time
	Duration time.Duration
}

// Settings are the gate's [approval] settings, read at every call so that a
// reload (SIGHUP) applies to the next one.
type Settings struct {
	// Timeout bounds the wait for an answer: no answer in time is a denial.
	// 0 means no limit of the gate's own.
	Timeout time.Duration
	// AllowAfterPrivateRead lets a network skill run under its policy in a
	// conversation that has read private data. By default (false) such a
	// call is asked, whatever the policy ([approval] after_private_read).
	AllowAfterPrivateRead bool
}

// Options configure a Gate.
type Options struct {
	// Asker asks the user; nil denies every call that needs approval.
	Asker Asker
	// Settings returns the current [approval] settings; nil = the zero
	// Settings (no timeout, the taint rule on).
	Settings func() Settings
	// Record, if set, is told the outcome of every Invoke (the audit log).
	// It runs on the caller's goroutine before Invoke returns.
	Record func(ctx context.Context, o Outcome)
	// Guard, if set, may refuse a call that was prepared, once its targets
	// are resolved (req.Targets) and before anyone is asked (a SKILL.md
	// skill's declared permissions binding the conversation:
	// internal/skillmd.Sessions). A refusal should wrap
	// errs.ErrForbidden and name why; it is recorded like any other.
	Guard func(ctx context.Context, req Request) error
	// State, if set, keeps what the gate learns of a conversation (its
	// private reads, its "once" approvals) across restarts: restored on the
	// conversation's first use, stored before the call returns.
	State catalog.StateStore
}

// Gate decides whether a call may run, and runs it.
type Gate struct {
	cat  catalog.Catalog
	opts Options

	mu    sync.Mutex
	memos map[string]*memo          // conversation or scope → what the gate knows of it
	asked map[onceKey]chan struct{} // a "once" question in flight, closed when answered
}

// onceKey is a (conversation, skill) pair.
type onceKey struct{ conversation, skill string }

// New returns a gate in front of cat. cmd/buddy builds the one gate of a
// process in one place (wire.go); a test there keeps it so.
func New(cat catalog.Catalog, opts Options) *Gate {
	return &Gate{cat: cat, opts: opts, memos: map[string]*memo{}, asked: map[onceKey]chan struct{}{}}
}

// NewGate returns a gate with no catalog that asks through a: only Approve
// may be used on it.
func NewGate(a Asker) *Gate { return New(nil, Options{Asker: a}) }

// settings returns the current settings.
func (g *Gate) settings() Settings {
	if g.opts.Settings == nil {
		return Settings{}
	}
	return g.opts.Settings()
}

// List implements catalog.Lister.
func (g *Gate) List(ctx context.Context) ([]catalog.Info, error) { return g.cat.List(ctx) }

// Lookup implements catalog.Lister.
func (g *Gate) Lookup(ctx context.Context, name string) (catalog.Info, error) {
	return g.cat.Lookup(ctx, name)
}

// Invoke prepares c (one lookup, one validation), asks the user about that
// prepared call when its policy says so, and runs exactly it (Prepare, then
// Gated.Run). If the skill changes while the question is open (an upgrade,
// a removal, new grants or policy after a reload), the answer does not
// apply: the call is prepared and decided afresh, asked again with the
// reason. A refusal is an error wrapping errs.ErrDenied whose text is fit to
// hand the LLM ("User denied execution of write_file"). Every outcome,
// a call that could not be prepared included, is recorded.
func (g *Gate) Invoke(ctx context.Context, c catalog.Call) (*catalog.Result, error) {
	x, err := g.Prepare(ctx, c)
	if err != nil {
		if g.opts.Record != nil {
			o := Outcome{Call: c, Started: time.Now(), ArgumentsHash: c.ArgumentsHash, Err: err}
			if o.ArgumentsHash == "" {
				o.ArgumentsHash = catalog.ArgumentsHash(c.Arguments)
			}
			if info, lerr := g.cat.Lookup(ctx, c.Skill); lerr == nil {
				o.Info = info // the audit row names the skill that refused
			}
			g.opts.Record(context.WithoutCancel(ctx), o)
		}
		return nil, err
	}
	return x.Run(ctx)
}

// Gated is a call the gate has prepared: the skill looked up and its
// arguments validated once. Run asks the user when the policy says so and
// runs it; a front end that must know whether a call can be attempted
// before it announces it (the WebSocket server) prepares first.
type Gated struct {
	g    *Gate
	c    catalog.Call
	p    catalog.Prepared
	o    Outcome
	used atomic.Bool
}

// Prepare prepares c through the gate's catalog without asking or running
// anything; nothing is recorded when it fails (Invoke records). The caller
// must Run or Release the result.
func (g *Gate) Prepare(ctx context.Context, c catalog.Call) (*Gated, error) {
	if c.ArgumentsHash == "" {
		c.ArgumentsHash = catalog.ArgumentsHash(c.Arguments)
	}
	started := time.Now()
	p, err := g.cat.Prepare(ctx, c)
	if err != nil {
		return nil, err
	}
	return &Gated{g: g, c: c, p: p, o: Outcome{Call: c, Started: started, ArgumentsHash: c.ArgumentsHash, Info: p.Info()}}, nil
}

// Info is the skill as prepared.
func (x *Gated) Info() catalog.Info { return x.o.Info }

// Release frees a prepared call that will not run (idempotent; Run
// releases it too).
func (x *Gated) Release() {
	if !x.used.Swap(true) {
		x.p.Release()
	}
}

// Run asks about the prepared call when its policy says so and runs it
// (Invoke). It runs at most once.
func (x *Gated) Run(ctx context.Context) (*catalog.Result, error) {
	if x.used.Swap(true) {
		return nil, catalog.ErrAlreadyRun
	}
	g, c, o := x.g, x.c, &x.o
	defer func() {
		if g.opts.Record != nil {
			o.Duration = time.Since(o.Started)
			g.opts.Record(context.WithoutCancel(ctx), *o)
		}
	}()
	p, err := g.decide(ctx, c, x.p, o)
	if err != nil {
		if p != nil {
			p.Release()
		}
		o.Err = err
		return nil, err
	}
	res, err := p.Run(ctx)
	o.Result, o.Err = res, err
	o.StateErr = g.noteRead(ctx, c, o.Info, o.Targets, res, err)
	return res, err
}

// EndConversation forgets a conversation: its "once" approvals, its private
// reads and what is stored of them. A conversation that is deleted, or an
// MCP session that ends, asks again if it comes back.
func (g *Gate) EndConversation(id string) {
	g.mu.Lock()
	delete(g.memos, id)
	g.mu.Unlock()
	if g.opts.State != nil && id != "" {
		_ = g.opts.State.DeleteConversationState(context.Background(), id)
	}
}

// Approve returns nil if the call may run, or an error wrapping errs.ErrDenied
// whose message is fit to hand the LLM ("User denied execution of write_file").
// A canceled ctx gives errs.ErrCanceled.
//
// Under "once", calls of the same skill in the same conversation that arrive
// while the first question is open wait for its answer instead of asking
// again; if it is a denial, the next of them asks. A "once" approval covers
// the skill as it was prepared (its module, grants and policy): a changed
// skill is asked about again.
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
	m, err := g.memo(ctx, req.Conversation)
	if err != nil {
		return err
	}
	key := onceKey{req.Conversation, req.Skill}
	for {
		g.mu.Lock()
		if fp, ok := m.once[req.Skill]; ok && fp == req.fingerprint {
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
			m.once[req.Skill] = req.fingerprint
		}
		delete(g.asked, key)
		close(answered)
		g.mu.Unlock()
		if err == nil && g.opts.State != nil && req.Conversation != "" {
			// Kept for the conversation's life, across restarts
			// (docs/RATIONALE.md, "Approval state").
			if serr := g.opts.State.SaveConversationState(context.WithoutCancel(ctx), req.Conversation,
				catalog.StateItem{Kind: catalog.StateOnce, Key: req.Skill, Value: req.fingerprint}); serr != nil {
				return nil // approved; remembered in memory until the process ends
			}
		}
		return err
	}
}

// ask asks the user once.
func (g *Gate) ask(ctx context.Context, req Request) error {
	if g.opts.Asker == nil {
		// No one to ask is a denial, never a panic.
		return denied(req, errors.New("no one to ask for approval"))
	}
	if t := g.settings().Timeout; t > 0 {
		var cancel context.CancelFunc
		req.Expires = time.Now().Add(t)
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

// Fixed returns Options.Settings that never change (tests, one-shot use).
func Fixed(s Settings) func() Settings { return func() Settings { return s } }
