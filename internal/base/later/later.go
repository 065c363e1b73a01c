// Package later carries, in a context, the clean-ups a callee leaves for its
// caller to run once it has used the answer, instead of starting a goroutine
// for them on its way back (runtime.AfterUse: the skills' sandboxes). It lets
// a front end ask for that without reaching the runtime: the gate stays the
// only way to a skill.
package later

import (
	"context"
	"sync"
)

// Cleanups holds the clean-ups left under one context.
type Cleanups struct {
	mu      sync.Mutex
	pending []func()
	closed  bool // Done has run: later callees clean up themselves
}

type key struct{}

// With returns a context whose callees leave their clean-ups to done. done
// runs them, on the caller's goroutine; it may run more than once and from any
// goroutine, and after it a callee cleans up by itself again.
func With(ctx context.Context) (_ context.Context, done func()) {
	c := &Cleanups{}
	return context.WithValue(ctx, key{}, c), c.Done
}

// From returns the context's Cleanups, or nil.
func From(ctx context.Context) *Cleanups {
	c, _ := ctx.Value(key{}).(*Cleanups)
	return c
}

// Add keeps fn for Done; false once Done has run (fn is then the callee's).
func (c *Cleanups) Add(fn func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.pending = append(c.pending, fn)
	return true
}

// RunPending runs the clean-ups left so far; later ones are still kept.
func (c *Cleanups) RunPending() { c.run(false) }

// Done runs the clean-ups left so far; later ones are refused.
func (c *Cleanups) Done() { c.run(true) }

func (c *Cleanups) run(last bool) {
	c.mu.Lock()
	fns := c.pending
	c.pending = nil
	c.closed = c.closed || last
	c.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}
