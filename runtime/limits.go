package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero/experimental"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/runtime/internal/fuel"
)

// limitError gives a refusal of fuel.Inspect over one of its limits its kind:
// memory_limit for table entries, too_large for sizes and counts. It returns
// nil for any other error.
func limitError(err error) error {
	switch {
	case errors.Is(err, fuel.ErrMemoryLimit):
		return &MemoryError{Detail: "module refused: " + err.Error()}
	case errors.Is(err, fuel.ErrTooLarge):
		return errs.Wrap(ErrTooLarge, "module refused", err)
	}
	return nil
}

// checkMemory refuses a module whose initial linear memory and tables
// together are over memory_mb: wazero allocates fuel.TableEntryBytes per
// table entry in every instance, outside the linear memory's cap.
func checkMemory(fi *fuel.Info, m *Manifest) error {
	capBytes := uint64(m.Resources.MemoryMB) << 20
	mem := fi.MemoryMin << 16
	tables := fi.TableEntries * fuel.TableEntryBytes
	if fi.MemoryMin > uint64(m.Resources.MaxPages()) || mem+tables > capBytes {
		return &MemoryError{Detail: fmt.Sprintf("module needs %d pages (%d MiB) of memory and %d table entries (%d KiB) at start",
			fi.MemoryMin, fi.MemoryMin/16, fi.TableEntries, tables>>10), CapMB: m.Resources.MemoryMB}
	}
	return nil
}

// ctxErr is the error of a Load or Inspect that ctx ended.
func ctxErr(ctx context.Context) error {
	err := context.Cause(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return errs.Wrap(ErrTimeout, "loading the module", err)
	}
	return errs.Wrap(ErrCanceled, "loading the module", err)
}

// cancellable runs work, which may compile for seconds, and returns its
// result, or ctxErr as soon as ctx ends. wazero's compiler checks ctx only
// between functions and its decoder and validator never do, so an abandoned
// work goes on in the background until it returns; cleanup then releases
// what it made. work must itself keep whatever it compiles against alive
// (Load holds Runtime.life until it returns, so Close waits for it).
func cancellable[T any](ctx context.Context, work func() (T, error), cleanup func(T)) (T, error) {
	var zero T
	if ctx.Err() != nil {
		return zero, ctxErr(ctx)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result) // unbuffered: a send succeeds only if the caller still waits
	abandoned := make(chan struct{})
	go func() {
		v, err := work()
		select {
		case done <- result{v, err}:
		case <-abandoned:
			if err == nil {
				cleanup(v)
			}
		}
	}()
	select {
	case res := <-done:
		return res.v, res.err
	case <-ctx.Done():
		close(abandoned)
		return zero, ctxErr(ctx)
	}
}

// compileContext makes wazero's compiler watch ctx: it checks ctx between
// functions only when it compiles with more than one worker (wazero v1.12.0
// internal/engine/wazevo/engine.go), so an abandoned Load stops at the end of
// the function being compiled rather than at the end of the module.
func compileContext(ctx context.Context) context.Context {
	return experimental.WithCompilationWorkers(ctx, 2)
}
