package channels

import (
	"context"
	"time"
)

// Clock is the time a channel waits by: back-off, retry_after, the
// watchdog, the edit rate, the send rate, pairing codes' expiry. Tests
// give a fake one, so that an outage of minutes takes no minutes.
type Clock interface {
	Now() time.Time
	// Timer returns a channel that receives once d has passed, and a
	// function that stops it (reporting whether it was still running).
	Timer(d time.Duration) (<-chan time.Time, func() bool)
}

// realClock is the system's clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Timer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// sleep waits d on c, or until ctx ends (its error).
func sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	ch, stop := c.Timer(d)
	defer stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// withDeadline is context.WithTimeout on c: ctx is canceled (with cause)
// once d has passed on c.
func withDeadline(ctx context.Context, c Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	ch, stop := c.Timer(d)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			cancel(cause)
		case <-done:
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		stop()
		close(done)
		cancel(context.Canceled)
	}
}
