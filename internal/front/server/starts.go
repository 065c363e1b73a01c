package server

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Admission of new calls (docs/RATIONALE.md, "Under a burst, finish before
// starting"). A call is starting from the moment the server takes it until
// its question is on the wire, or until it ends: the gate checks it, resolves
// what it would touch and stores the approval request. Only a few calls may
// be starting at once; the others wait their turn, first come first served.
// Without the bound, a thousand invokes arriving together start a thousand
// calls at once, and the calls users have already approved (their decision,
// their skill, their audit row and tool result) wait behind all of them for
// the CPU and the database. With it, approved calls finish in milliseconds
// and the queueing happens before a question is asked, where nobody is
// waiting on an answer yet.
//
// A slot is also given back after startLease, so that a call that blocks while
// starting (a DNS lookup of what it would touch, a "once" question another
// call asked, a trusted skill that runs long) never holds up the calls
// behind it for longer than that.

// startLease is the longest a call holds its starting slot.
const startLease = 50 * time.Millisecond

// starts bounds the calls starting at once.
type starts struct {
	slots chan struct{}
	lease time.Duration
}

// newStarts allows n calls to start at once (n < 1: one per CPU, at least 2).
func newStarts(n int, lease time.Duration) *starts {
	if n < 1 {
		n = max(runtime.GOMAXPROCS(0), 2)
	}
	return &starts{slots: make(chan struct{}, n), lease: lease}
}

// acquire waits for a starting slot and returns the function that gives it
// back (safe to call more than once; it is called by itself after the lease).
// A ctx that ends while waiting returns at once with a no-op: the call then
// fails on its own canceled context.
func (l *starts) acquire(ctx context.Context) (release func()) {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return func() {}
	}
	var once sync.Once
	free := func() { once.Do(func() { <-l.slots }) }
	timer := time.AfterFunc(l.lease, free)
	return func() {
		timer.Stop()
		free()
	}
}

type startedKey struct{}

// withStarted carries a call's release of its starting slot to the code
// that knows when it has started (the server's asker).
func withStarted(ctx context.Context, release func()) context.Context {
	return context.WithValue(ctx, startedKey{}, release)
}

// started gives back the starting slot of ctx's call, if it holds one.
func started(ctx context.Context) {
	if release, ok := ctx.Value(startedKey{}).(func()); ok {
		release()
	}
}
