package deadline

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// wait waits for ctx to be done, failing the test after a generous bound.
func wait(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context is not done 10 s later")
	}
}

type key struct{}

// TestEnds: every way a call's context ends, and what it says then.
func TestEnds(t *testing.T) {
	tests := []struct {
		name    string
		parent  func(t *testing.T) (context.Context, func()) // func: what ends the parent, or nil
		timeout time.Duration
		end     func(cancel context.CancelFunc, endParent func())
		want    error
		minAge  time.Duration // the context cannot be done sooner
	}{
		{"deadline", bg, 30 * time.Millisecond, nil, context.DeadlineExceeded, 30 * time.Millisecond},
		{"canceled", bg, time.Hour, func(c context.CancelFunc, _ func()) { c() }, context.Canceled, 0},
		{"parent canceled", withCancel, time.Hour, func(_ context.CancelFunc, p func()) { p() }, context.Canceled, 0},
		{"parent's earlier deadline", withTimeout(30 * time.Millisecond), time.Hour, nil, context.DeadlineExceeded, 30 * time.Millisecond},
		{"parent done already", doneParent, time.Hour, nil, context.Canceled, 0},
		{"zero timeout", bg, 0, nil, context.DeadlineExceeded, 0},
		{"negative timeout", bg, -time.Second, nil, context.DeadlineExceeded, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &Watch{}
			defer w.Stop()
			parent, endParent := tt.parent(t)
			start := time.Now()
			ctx, cancel := w.WithTimeout(parent, start, tt.timeout)
			if ctx.Err() != nil && tt.minAge > 0 {
				t.Fatalf("done at once: %v", ctx.Err())
			}
			if tt.end != nil {
				tt.end(cancel, endParent)
			}
			wait(t, ctx)
			if age := time.Since(start); age < tt.minAge {
				t.Errorf("done after %v, before its deadline (%v)", age, tt.minAge)
			}
			if !errors.Is(ctx.Err(), tt.want) {
				t.Errorf("Err = %v, want %v", ctx.Err(), tt.want)
			}
			cancel() // after the end: changes nothing
			if !errors.Is(ctx.Err(), tt.want) {
				t.Errorf("Err after cancel = %v, want %v", ctx.Err(), tt.want)
			}
			if n := w.Len(); n != 0 {
				t.Errorf("%d calls still watched", n)
			}
		})
	}
}

func bg(*testing.T) (context.Context, func()) { return context.Background(), nil }

func withCancel(t *testing.T) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), key{}, "v"))
	return ctx, cancel
}

func withTimeout(d time.Duration) func(*testing.T) (context.Context, func()) {
	return func(t *testing.T) (context.Context, func()) {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		t.Cleanup(cancel)
		return ctx, nil
	}
}

func doneParent(t *testing.T) (context.Context, func()) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx, nil
}

// TestDeadlineAndValue: Deadline is the earlier of the call's and the
// parent's; values come from the parent.
func TestDeadlineAndValue(t *testing.T) {
	w := &Watch{}
	defer w.Stop()
	now := time.Now()
	parent, cancelParent := context.WithDeadline(context.WithValue(t.Context(), key{}, "v"), now.Add(time.Minute))
	defer cancelParent()
	for _, tt := range []struct {
		timeout time.Duration
		want    time.Time
	}{
		{time.Second, now.Add(time.Second)},
		{time.Hour, now.Add(time.Minute)},
	} {
		ctx, cancel := w.WithTimeout(parent, now, tt.timeout)
		if d, ok := ctx.Deadline(); !ok || !d.Equal(tt.want) {
			t.Errorf("timeout %v: Deadline = %v, %v; want %v", tt.timeout, d, ok, tt.want)
		}
		if v := ctx.Value(key{}); v != "v" {
			t.Errorf("Value = %v", v)
		}
		cancel()
	}
}

// TestChildren: contexts derived from a call's context end with it, with its
// error, and attach through AfterFunc (no goroutine waiting on Done).
func TestChildren(t *testing.T) {
	w := &Watch{}
	defer w.Stop()
	ctx, cancel := w.WithTimeout(context.Background(), time.Now(), 50*time.Millisecond)
	defer cancel()
	c := ctx.(*callContext)

	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	long, cancelLong := context.WithTimeout(ctx, time.Hour)
	defer cancelLong()
	value := context.WithValue(ctx, key{}, "v")
	ran := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ran) })
	stopped := false
	stop := context.AfterFunc(ctx, func() { stopped = true })
	c.mu.Lock()
	attached := len(c.afters)
	c.mu.Unlock()
	if attached != 4 {
		t.Errorf("%d children attached through AfterFunc, want 4 (WithCancel, WithTimeout, two AfterFunc)", attached)
	}
	if !stop() {
		t.Error("stop before the end: false")
	}
	for _, d := range []context.Context{child, long, value} {
		wait(t, d)
		if !errors.Is(d.Err(), context.DeadlineExceeded) {
			t.Errorf("child Err = %v", d.Err())
		}
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("AfterFunc did not run")
	}
	if stopped {
		t.Error("a stopped AfterFunc ran")
	}
	if stop() {
		t.Error("stop after the end: true")
	}
	// AfterFunc on a context already done runs at once.
	again := make(chan struct{})
	if context.AfterFunc(ctx, func() { close(again) })() {
		t.Error("stop of an AfterFunc on a done context: true")
	}
	<-again
}

// TestRearm: the timer is armed by the first call and re-armed only by a
// deadline earlier than it is armed for.
func TestRearm(t *testing.T) {
	w := &Watch{Tick: time.Hour, Idle: time.Hour}
	defer w.Stop()
	now := time.Now()
	_, c1 := w.WithTimeout(context.Background(), now, 10*time.Minute)
	defer c1()
	if got := w.Armed(); !got.Equal(now.Add(10 * time.Minute)) {
		t.Fatalf("armed for %v after the first call, want its deadline", got)
	}
	_, c2 := w.WithTimeout(context.Background(), now, 20*time.Minute)
	defer c2()
	if got := w.Armed(); !got.Equal(now.Add(10 * time.Minute)) {
		t.Errorf("a later deadline re-armed the timer: %v", got)
	}
	_, c3 := w.WithTimeout(context.Background(), now, 5*time.Minute)
	defer c3()
	if got := w.Armed(); !got.Equal(now.Add(5 * time.Minute)) {
		t.Errorf("an earlier deadline did not re-arm the timer: %v", got)
	}
	if w.Len() != 3 {
		t.Errorf("Len = %d", w.Len())
	}
}

// TestTickThenIdle: while calls come, the timer ticks; after Idle without a
// call it is no longer armed.
func TestTickThenIdle(t *testing.T) {
	w := &Watch{Tick: 5 * time.Millisecond, Idle: 50 * time.Millisecond}
	defer w.Stop()
	_, cancel := w.WithTimeout(context.Background(), time.Now(), time.Hour)
	first := w.Armed()
	cancel()
	end := time.Now().Add(10 * time.Second)
	ticked := false
	for time.Now().Before(end) {
		a := w.Armed()
		if !a.IsZero() && !a.Equal(first) {
			ticked = true
		}
		if a.IsZero() {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !ticked {
		t.Error("the timer never ticked")
	}
	if !w.Armed().IsZero() {
		t.Errorf("still armed (%v) after the idle period", w.Armed())
	}
	// A new call arms it again, and still ends at its deadline.
	ctx, cancel := w.WithTimeout(context.Background(), time.Now(), 20*time.Millisecond)
	defer cancel()
	wait(t, ctx)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v", ctx.Err())
	}
}

// TestMany: concurrent calls with mixed timeouts, some canceled early; each
// ends at or after its own deadline, with the right error.
func TestMany(t *testing.T) {
	w := &Watch{Tick: 10 * time.Millisecond}
	defer w.Stop()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			d := time.Duration(1+r.IntN(60)) * time.Millisecond
			start := time.Now()
			ctx, cancel := w.WithTimeout(context.Background(), start, d)
			defer cancel()
			if i%5 == 0 {
				cancel()
				if !errors.Is(ctx.Err(), context.Canceled) {
					t.Errorf("call %d: Err after cancel = %v", i, ctx.Err())
				}
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Errorf("call %d (%v) not done 10 s later", i, d)
				return
			}
			if age := time.Since(start); age < d {
				t.Errorf("call %d done after %v, before its %v", i, age, d)
			}
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Errorf("call %d: Err = %v", i, ctx.Err())
			}
		}()
	}
	wg.Wait()
	if n := w.Len(); n != 0 {
		t.Errorf("%d calls still watched", n)
	}
}

// TestStop: a stopped watch times nothing out.
func TestStop(t *testing.T) {
	w := &Watch{}
	ctx, cancel := w.WithTimeout(context.Background(), time.Now(), 10*time.Millisecond)
	defer cancel()
	w.Stop()
	time.Sleep(50 * time.Millisecond)
	if ctx.Err() != nil {
		t.Errorf("Err = %v after Stop", ctx.Err())
	}
	if !w.Armed().IsZero() {
		t.Error("armed after Stop")
	}
}
