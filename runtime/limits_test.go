package runtime_test

import (
	"bytes"
	"context"
	"errors"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/runtime"
)

// Hostile modules, generated: some are megabytes.

func uleb(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func section(b []byte, id byte, content []byte) []byte {
	b = append(b, id)
	b = uleb(b, uint64(len(content)))
	return append(b, content...)
}

func vector(n int, item []byte) []byte {
	b := uleb(nil, uint64(n))
	for i := 0; i < n; i++ {
		b = append(b, item...)
	}
	return b
}

var header = []byte("\x00asm\x01\x00\x00\x00")

// module builds the sections in order: types+function (run), then tables,
// memory, globals, export, then code.
func module(tables []byte, memory []byte, globals []byte, code []byte) []byte {
	b := section(bytes.Clone(header), 1, []byte{1, 0x60, 0, 1, 0x7f})
	b = section(b, 3, []byte{1, 0})
	if tables != nil {
		b = section(b, 4, tables)
	}
	if memory != nil {
		b = section(b, 5, memory)
	}
	if globals != nil {
		b = section(b, 6, globals)
	}
	b = section(b, 7, []byte{1, 3, 'r', 'u', 'n', 0, 0})
	body := append([]byte{0}, code...)
	body = append(body, 0x41, 0, 0x0b) // i32.const 0, end
	fn := uleb(nil, uint64(len(body)))
	return section(b, 10, append([]byte{1}, append(fn, body...)...))
}

func nestedLoops(n int) []byte {
	var code []byte
	for i := 0; i < n; i++ {
		code = append(code, 0x03, 0x40, 0x41, 0, 0x0d) // loop, i32.const 0, br_if i
		code = uleb(code, uint64(i))
	}
	return append(code, bytes.Repeat([]byte{0x0b}, n)...)
}

func hostileModules() map[string]struct {
	wasm []byte
	kind errs.Kind
} {
	brTable := []byte{0x02, 0x40, 0x41, 0, 0x0e}
	brTable = uleb(brTable, 200_000)
	brTable = append(brTable, make([]byte, 200_001)...)
	brTable = append(brTable, 0x0b)
	type c = struct {
		wasm []byte
		kind errs.Kind
	}
	return map[string]c{
		"1,000 tables of 2^27 entries": {module(vector(1000, uleb([]byte{0x70, 0}, 1<<27)), nil, nil, nil), errs.KindMemoryLimit},
		"1,000 tables of 1 entry":      {module(vector(1000, []byte{0x70, 0, 1}), nil, nil, nil), errs.KindTooLarge},
		"10^6 globals (5 MB)":          {module(nil, nil, vector(1_000_000, []byte{0x7e, 0, 0x42, 0x80, 0x80, 0x80, 0, 0x0b}), nil), errs.KindTooLarge},
		"8,000 nested blocks":          {module(nil, nil, nil, append(bytes.Repeat([]byte{0x02, 0x40}, 8000), bytes.Repeat([]byte{0x0b}, 8000)...)), errs.KindTooLarge},
		"br_table of 200,000 targets":  {module(nil, nil, nil, brTable), errs.KindTooLarge},
		"module of 40 MiB":             {module(nil, nil, nil, bytes.Repeat([]byte{0x01}, 40<<20)), errs.KindTooLarge},
		// Within the instrumenter's caps but over memory_mb (16 MiB): 15
		// MiB of memory and 1 Mi table entries (8 MiB).
		"memory and tables over memory_mb": {module([]byte{1, 0x70, 0, 0x80, 0x80, 0x40}, []byte{1, 0, 240, 1}, nil, nil), errs.KindMemoryLimit},
	}
}

// TestHostileModulesAreRefusedBeforeCompiling: Load and Inspect (skill
// install) refuse each module with its kind, quickly and without allocating
// anything like what compiling it would.
func TestHostileModulesAreRefusedBeforeCompiling(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	for name, c := range hostileModules() {
		t.Run(name, func(t *testing.T) {
			m := manifest("run", nil)
			var before, after goruntime.MemStats
			goruntime.GC()
			goruntime.ReadMemStats(&before)
			start := time.Now()
			_, err := rt.Load(t.Context(), c.wasm, runtime.Spec{Manifest: m})
			elapsed := time.Since(start)
			goruntime.ReadMemStats(&after)
			if got := errs.KindOf(err); got != c.kind {
				t.Fatalf("Load: kind %s (%v), want %s", got, err, c.kind)
			}
			if d := after.TotalAlloc - before.TotalAlloc; d > 32<<20 {
				t.Errorf("Load allocated %d MiB before refusing a %d-byte module", d>>20, len(c.wasm))
			}
			if elapsed > 5*time.Second {
				t.Errorf("Load took %v to refuse", elapsed)
			}
			if _, err := runtime.Inspect(t.Context(), c.wasm, m); errs.KindOf(err) != c.kind {
				t.Errorf("Inspect: kind %s (%v), want %s", errs.KindOf(err), err, c.kind)
			}
		})
	}
}

// TestTablesCountAgainstMemory: the same tables pass with a memory_mb that
// holds them and the memory.
func TestTablesCountAgainstMemory(t *testing.T) {
	wasm := module([]byte{1, 0x70, 0, 0x80, 0x80, 0x40}, []byte{1, 0, 240, 1}, nil, nil)
	m := manifest("run", func(r *runtime.Resources) { r.MemoryMB = 24 })
	if _, err := runtime.Inspect(t.Context(), wasm, m); err != nil {
		t.Fatalf("15 MiB + 8 MiB under 24 MiB: %v", err)
	}
}

// TestLoadIsCancellable: a module within every cap that takes seconds to
// compile; Load returns promptly once its ctx is canceled, and Close then
// does not wait for the whole compile.
func TestLoadIsCancellable(t *testing.T) {
	rt, err := runtime.New(context.Background(), runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 4 functions of 900 nested loops with branches: seconds of compile
	// once metered.
	fn := append([]byte{0}, nestedLoops(900)...)
	fn = append(fn, 0x41, 0, 0x0b)
	body := uleb(nil, uint64(len(fn)))
	body = append(body, fn...)
	const n = 4
	b := section(bytes.Clone(header), 1, []byte{1, 0x60, 0, 1, 0x7f})
	b = section(b, 3, vector(n, []byte{0}))
	b = section(b, 7, []byte{1, 3, 'r', 'u', 'n', 0, 0})
	wasm := section(b, 10, vector(n, body))

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err = rt.Load(ctx, wasm, runtime.Spec{Manifest: manifest("run", nil)})
	returned := time.Since(start)
	if !errors.Is(err, runtime.ErrCanceled) || errs.KindOf(err) != errs.KindCanceled {
		t.Fatalf("Load: %v (kind %s), want canceled", err, errs.KindOf(err))
	}
	if returned > time.Second {
		t.Errorf("Load returned %v after start, 20 ms after which it was canceled", returned)
	}
	closeStart := time.Now()
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("Load returned after %v; Close took %v", returned, time.Since(closeStart))

	// Already canceled: nothing starts.
	rt2 := newRuntime(t, runtime.Options{})
	done, cancel2 := context.WithCancel(t.Context())
	cancel2()
	if _, err := rt2.Load(done, wasm, runtime.Spec{Manifest: manifest("run", nil)}); errs.KindOf(err) != errs.KindCanceled {
		t.Errorf("Load with a canceled ctx: %v", err)
	}
}
