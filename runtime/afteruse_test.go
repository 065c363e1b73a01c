package runtime

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAfterUse: under AfterUse a call's clean-up (closing its instance,
// releasing its slot, preparing the next) waits for done, for answers and
// errors alike; a second call under the same context runs the pending one
// first (with one slot it does not wait for itself); done may run twice and
// from another goroutine; after it, calls clean up in the background again.
func TestAfterUse(t *testing.T) {
	ctx := t.Context()
	rt, mod := loadEcho(t, Options{Prepared: 2, MaxConcurrent: 1})
	input := []byte(`{"path":"a.txt"}`)
	for _, fn := range []string{"run", "fail"} {
		t.Run(fn, func(t *testing.T) {
			waitReady(mod)
			mod.calls.Wait()
			cctx, done := AfterUse(ctx)
			defer done()
			res, err := mod.CallExport(cctx, fn, input)
			switch fn {
			case "run":
				if err != nil || !bytes.Equal(res.Output, input) {
					t.Fatalf("run: %v", err)
				}
			case "fail":
				var se *SkillError
				if !errors.As(err, &se) {
					t.Fatalf("fail: %v, want a SkillError", err)
				}
			}
			// Nothing cleans up behind the caller's back: the slot stays
			// held and the used instance is not replaced.
			time.Sleep(20 * time.Millisecond)
			if n := len(rt.sem); n != 1 {
				t.Fatalf("%d slots held before done, want 1", n)
			}
			if n := mod.ready.len(); n != 1 {
				t.Fatalf("%d prepared instances before done, want 1 (2 less the one used)", n)
			}
			// A second call under the same context: the pending clean-up
			// runs first, so it gets the only slot.
			cctx2, cancel := context.WithTimeout(cctx, 3*time.Second)
			defer cancel()
			if _, err := mod.Call(cctx2, input); err != nil {
				t.Fatalf("second call under the context: %v", err)
			}
			if n := len(rt.sem); n != 1 {
				t.Fatalf("%d slots held after the second call, want 1 (its own)", n)
			}
			ran := make(chan struct{})
			go func() { done(); close(ran) }()
			<-ran
			done() // again: nothing left to do
			if n := len(rt.sem); n != 0 {
				t.Fatalf("%d slots held after done, want 0", n)
			}
			waitReady(mod)
			if n := mod.ready.len(); n != 2 {
				t.Fatalf("%d prepared instances after done, want 2", n)
			}
			// After done, a call under the context cleans up by itself.
			if _, err := mod.Call(cctx, input); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for len(rt.sem) != 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if n := len(rt.sem); n != 0 {
				t.Fatalf("%d slots still held by a call made after done", n)
			}
		})
	}
}

// TestAfterUseClose: Module.Close waits for a clean-up the caller has not
// run yet, and finishes once it has.
func TestAfterUseClose(t *testing.T) {
	ctx := t.Context()
	_, mod := loadEcho(t, Options{Prepared: 1})
	cctx, done := AfterUse(ctx)
	if _, err := mod.Call(cctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- mod.Close(ctx) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a clean-up was pending", err)
	case <-time.After(20 * time.Millisecond):
	}
	done()
	if err := <-closed; err != nil {
		t.Fatalf("Close after done: %v", err)
	}
}

// loadEcho loads testdata/echo.wasm in a new Runtime with opts.
func loadEcho(t *testing.T, opts Options) (*Runtime, *Module) {
	t.Helper()
	rt, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	wasm, err := os.ReadFile(filepath.Join("testdata", "echo.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := rt.Load(t.Context(), wasm, Spec{})
	if err != nil {
		t.Fatal(err)
	}
	return rt, mod
}
