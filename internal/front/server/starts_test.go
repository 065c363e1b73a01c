package server

import (
	"context"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/store"
)

// acquired reports whether an acquire on l gets a slot within d.
func acquired(ctx context.Context, l *starts, d time.Duration) (func(), bool) {
	got := make(chan func(), 1)
	ctx, cancel := context.WithCancel(ctx)
	go func() { got <- l.acquire(ctx) }()
	select {
	case r := <-got:
		cancel()
		return r, true
	case <-time.After(d):
		cancel() // the acquire gives up with a no-op
		<-got
		return nil, false
	}
}

// TestStartsBound: n calls may be starting at once; the next waits for a
// release (explicit, or through started on the call's context), and a
// release counts once however often it is called.
func TestStartsBound(t *testing.T) {
	ctx := t.Context()
	l := newStarts(2, time.Hour)
	r1 := l.acquire(ctx)
	r2 := l.acquire(ctx)
	if _, ok := acquired(ctx, l, 30*time.Millisecond); ok {
		t.Fatal("a third call started while two were starting (limit 2)")
	}
	r1()
	r1() // twice: still one slot
	r3, ok := acquired(ctx, l, 5*time.Second)
	if !ok {
		t.Fatal("no call started after a release")
	}
	if _, ok := acquired(ctx, l, 30*time.Millisecond); ok {
		t.Fatal("a release called twice freed two slots")
	}
	started(withStarted(ctx, r2)) // the question is out
	if _, ok := acquired(ctx, l, 5*time.Second); !ok {
		t.Fatal("started did not give the slot back")
	}
	started(ctx) // no slot in ctx: nothing happens
	r3()
}

// TestStartsLease: a call that holds its slot past the lease stops counting,
// so a blocked start never holds up the calls behind it for long.
func TestStartsLease(t *testing.T) {
	ctx := t.Context()
	l := newStarts(1, 20*time.Millisecond)
	hold := l.acquire(ctx)
	defer hold()
	start := time.Now()
	if _, ok := acquired(ctx, l, 5*time.Second); !ok {
		t.Fatal("the next call did not start after the first one's lease")
	}
	if waited := time.Since(start); waited < 15*time.Millisecond {
		t.Errorf("the next call started after %s, before the 20ms lease ran out", waited)
	}
}

// TestStartsCanceled: a call canceled while it waits returns at once, with a
// release that frees nothing.
func TestStartsCanceled(t *testing.T) {
	l := newStarts(1, time.Hour)
	held := l.acquire(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan func())
	go func() { done <- l.acquire(ctx) }()
	cancel()
	select {
	case r := <-done:
		r()
	case <-time.After(5 * time.Second):
		t.Fatal("a canceled acquire did not return")
	}
	if _, ok := acquired(t.Context(), l, 30*time.Millisecond); ok {
		t.Fatal("the canceled acquire's release freed the held slot")
	}
	held()
	if newStarts(0, time.Hour).slots == nil || cap(newStarts(0, time.Hour).slots) < 2 {
		t.Error("the default bound is under 2")
	}
}

// The server keeps the store's transactions short while a decision is to
// come (hub.go, ask): the real store must keep offering it.
var _ finisher = (*store.Store)(nil)
