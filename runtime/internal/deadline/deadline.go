// Package deadline gives calls a context with a deadline, like
// context.WithTimeout, without a runtime timer per call.
//
// context.WithTimeout arms a timer for every call. When that timer is the
// earliest the process has — on an idle server it is the only one — adding it
// wakes the thread sleeping in Go's network poller: a system call and a
// cross-CPU wake-up, ~10 µs on the caller's clock on the reference machine,
// half of an idle echo call. A Watch instead keeps the deadlines of all its
// running calls in one heap under one timer, armed at the earliest of them
// and, while calls keep coming, at least once per tick, so that a new call's
// deadline (seconds away) is almost never the earliest and registering it
// wakes nobody. The timer is not re-armed after an idle period without a
// call: an idle process is not woken.
//
// A call's context is done at its deadline (Err: context.DeadlineExceeded),
// when its parent is done (the parent's error), or when it is canceled
// (context.Canceled), whichever comes first. Its children — context.WithCancel,
// WithTimeout, AfterFunc — attach to it without a goroutine of their own, as
// to a context of package context (it implements AfterFunc).
package deadline

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a Watch's tick and idle period.
const (
	DefaultTick = time.Second
	DefaultIdle = 30 * time.Second
)

// Watch fires the deadlines of its calls. The zero value is ready, with the
// default tick and idle period; Stop it when done.
type Watch struct {
	// Tick is the longest the timer waits while calls keep coming (0:
	// DefaultTick): a call whose timeout is shorter than what is left of a
	// tick re-arms the timer itself, and pays the wake-up.
	Tick time.Duration
	// Idle is how long after the last call the timer keeps ticking (0:
	// DefaultIdle).
	Idle time.Duration

	mu      sync.Mutex
	calls   callHeap // by deadline
	timer   *time.Timer
	armed   time.Time // when the timer fires; zero: not armed
	lastAdd time.Time
	stopped bool
}

// WithTimeout returns a context of parent that is done at now+d (or at the
// parent's earlier deadline), and its cancel function, which releases it and
// must be called when the call ends. now is the caller's reading of the
// clock (a call has one already).
func (w *Watch) WithTimeout(parent context.Context, now time.Time, d time.Duration) (context.Context, context.CancelFunc) {
	c := &callContext{parent: parent, deadline: now.Add(d), done: make(chan struct{}), index: -1}
	if pd, ok := parent.Deadline(); ok && pd.Before(c.deadline) {
		c.deadline = pd
	}
	if parent.Done() != nil {
		if err := parent.Err(); err != nil {
			c.cancel(err)
			return c, func() {}
		}
		stop := context.AfterFunc(parent, func() { c.cancel(parent.Err()) })
		c.mu.Lock()
		if c.err.Load() == nil {
			c.stopParent = stop
			stop = nil
		}
		c.mu.Unlock()
		if stop != nil { // the parent was done already: c is too
			stop()
		}
	}
	if !c.deadline.After(now) {
		c.cancel(context.DeadlineExceeded)
	} else {
		w.add(c, now)
	}
	return c, func() {
		w.remove(c)
		c.cancel(context.Canceled)
	}
}

// Stop stops the timer; calls still running are no longer timed out.
func (w *Watch) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.armed = time.Time{}
}

// Armed reports when the timer will fire next (zero: it is not armed).
func (w *Watch) Armed() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.armed
}

// Len is the number of calls being watched.
func (w *Watch) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.calls)
}

func (w *Watch) add(c *callContext, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	heap.Push(&w.calls, c)
	w.lastAdd = now
	if !w.stopped && (w.armed.IsZero() || c.deadline.Before(w.armed)) {
		at := c.deadline
		if tick := now.Add(or(w.Tick, DefaultTick)); tick.Before(at) {
			at = tick // and tick from then on
		}
		w.arm(at, now)
	}
}

func (w *Watch) remove(c *callContext) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c.index >= 0 {
		heap.Remove(&w.calls, c.index)
	}
}

// arm sets the timer to fire at at. w.mu is held.
func (w *Watch) arm(at, now time.Time) {
	w.armed = at
	if w.timer == nil {
		w.timer = time.AfterFunc(at.Sub(now), w.fire)
		return
	}
	w.timer.Reset(at.Sub(now))
}

// fire ends the calls whose deadline has come and re-arms the timer: at
// the next deadline, or sooner at the next tick while calls keep coming.
func (w *Watch) fire() {
	now := time.Now()
	var due []*callContext
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	for len(w.calls) > 0 && !w.calls[0].deadline.After(now) {
		due = append(due, heap.Pop(&w.calls).(*callContext))
	}
	var next time.Time
	if len(w.calls) > 0 {
		next = w.calls[0].deadline
	}
	if now.Sub(w.lastAdd) < or(w.Idle, DefaultIdle) {
		if tick := now.Add(or(w.Tick, DefaultTick)); next.IsZero() || tick.Before(next) {
			next = tick
		}
	}
	w.armed = time.Time{}
	if !next.IsZero() {
		w.arm(next, now)
	}
	w.mu.Unlock()
	for _, c := range due {
		c.cancel(context.DeadlineExceeded)
	}
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// callContext is one call's context.
type callContext struct {
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	index    int // in Watch.calls; -1 when not there (Watch.mu)

	err        atomic.Pointer[error] // set once, under mu
	mu         sync.Mutex
	afters     map[*afterFunc]struct{}
	stopParent func() bool
}

type afterFunc struct{ f func() }

func (c *callContext) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *callContext) Done() <-chan struct{}       { return c.done }
func (c *callContext) Value(key any) any           { return c.parent.Value(key) }
func (c *callContext) String() string              { return "deadline.callContext" }

func (c *callContext) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// AfterFunc runs f in its own goroutine once c is done, as context.AfterFunc;
// stop detaches f, and reports whether it did so before f was started.
// Package context's WithCancel, WithTimeout and AfterFunc use it to attach
// to c without a goroutine waiting on Done.
func (c *callContext) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	c.mu.Lock()
	if c.err.Load() != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	if c.afters == nil {
		c.afters = map[*afterFunc]struct{}{}
	}
	c.afters[a] = struct{}{}
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.afters[a]; ok {
			delete(c.afters, a)
			return true
		}
		return false
	}
}

// cancel makes c done with err, once.
func (c *callContext) cancel(err error) {
	c.mu.Lock()
	if c.err.Load() != nil {
		c.mu.Unlock()
		return
	}
	c.err.Store(&err)
	close(c.done)
	afters := c.afters
	c.afters = nil
	stop := c.stopParent
	c.mu.Unlock()
	for a := range afters {
		go a.f()
	}
	if stop != nil {
		stop()
	}
}

// callHeap is a min-heap of calls by deadline (container/heap).
type callHeap []*callContext

func (h callHeap) Len() int           { return len(h) }
func (h callHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h callHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *callHeap) Push(x any) {
	c := x.(*callContext)
	c.index = len(*h)
	*h = append(*h, c)
}
func (h *callHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	c.index = -1
	*h = old[:len(old)-1]
	return c
}
