package runtime

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestConcurrentLoadsOfOneModule: loads of the same module at once (a
// reload's new skills while the old ones warm up; two registries) each get a
// module that calls. wazero's engine, shared by every skill's runtime through
// the cache, publishes a freshly compiled module to the others before it has
// set its listener trampolines; an instance made from it in between panicked
// (and -race reports the write). compileOne makes them take turns.
func TestConcurrentLoadsOfOneModule(t *testing.T) {
	for _, name := range []string{"echo.wasm", "skillkit_noop.wasm"} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			rt, err := New(ctx, Options{Prepared: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rt.Close(ctx) })
			wasm, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			input := []byte(`{"path":"a"}`)
			var wg sync.WaitGroup
			for range 6 {
				wg.Go(func() {
					mod, err := rt.Load(ctx, wasm, Spec{})
					if err != nil {
						t.Error(err)
						return
					}
					defer mod.Close(ctx)
					res, err := mod.Call(ctx, input)
					if err != nil || !bytes.Equal(res.Output, input) {
						t.Errorf("call: %v", err)
					}
				})
			}
			wg.Wait()
		})
	}
}
