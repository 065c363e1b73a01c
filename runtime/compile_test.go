package runtime_test

import (
	"io/fs"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/buddy-run/buddy/runtime"
)

// TestCompileFillsTheCache: Compile leaves a new process's first Load with
// nothing to compile (its code is found in both caches), and refuses what
// Load would refuse.
func TestCompileFillsTheCache(t *testing.T) {
	ctx := t.Context()
	wasm := readFixture(t, "pdkplugin.wasm")
	m := runtime.DefaultManifest("pdk")
	m.Entrypoint = "greet"
	dir := t.TempDir()
	rt := newRuntime(t, runtime.Options{CacheDir: dir})
	if err := rt.Compile(ctx, wasm, m); err != nil {
		t.Fatal(err)
	}
	// files maps every cache file to its modification time: a compile
	// writes its file anew.
	files := func() map[string]time.Time {
		out := map[string]time.Time{}
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					out[path] = fi.ModTime()
				}
			}
			return nil
		})
		return out
	}
	before := files()
	if len(before) < 2 {
		t.Fatalf("%d files in the cache after Compile, want the instrumented module and its native code", len(before))
	}
	// A new runtime on the same directory (a new process) loads from the
	// caches and writes nothing new.
	rt2 := newRuntime(t, runtime.Options{CacheDir: dir})
	mod, err := rt2.Load(ctx, wasm, runtime.Spec{Manifest: m})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := mod.Call(ctx, []byte("cache")); err != nil || string(res.Output) != "Hello, cache!" {
		t.Fatalf("call: %v %q", err, outputOf(res))
	}
	if after := files(); !maps.Equal(after, before) {
		t.Errorf("Load after Compile wrote to the cache (it compiled): %v, then %v", before, after)
	}
	for _, bad := range []string{"notwasm.wasm", "truncated.wasm", "bigmem.wasm"} {
		if err := rt.Compile(ctx, readFixture(t, bad), runtime.DefaultManifest("x")); err == nil {
			t.Errorf("Compile(%s) accepted it", bad)
		}
	}
}
