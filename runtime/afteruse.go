package runtime

import (
	"context"

	"github.com/buddy-run/buddy/internal/base/later"
)

// AfterUse returns a context under which a call leaves its clean-up — closing
// the instance it ran in (zeroing its memory), releasing its slot, preparing
// the next instances — to done, which the caller runs once it has used the
// answer. Without it a call hands that work to a new goroutine as it returns,
// and making that goroutine runnable wakes a sleeping thread on the caller's
// clock (a futex wake and an inter-processor interrupt: 2–10 µs on the
// reference machine, more the longer the other CPU has slept). A caller that
// has something to do with the answer first — the server sending it — runs
// done afterwards: no thread is woken, and the next instance is prepared on
// the CPU (and in the caches) of the next call.
//
// done must be called, or the calls' slots stay held (Options.MaxConcurrent)
// and Module.Close waits for them; it may be called more than once and from
// any goroutine. A call made under ctx after done has run cleans up in the
// background, as without AfterUse; a call made while an earlier one's clean-up
// is still pending runs that first, so that one context never holds more than
// one call's slot. Calls that run on a worker goroutine (a module linked with
// Options.ExtraHostFunctions) clean up there, as always. (Front ends, which
// must not reach the runtime, use internal/base/later directly: this is it.)
func AfterUse(ctx context.Context) (_ context.Context, done func()) {
	return later.With(ctx)
}
