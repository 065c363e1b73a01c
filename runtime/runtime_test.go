package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/runtime"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newRuntime(t testing.TB, opts runtime.Options) *runtime.Runtime {
	t.Helper()
	rt, err := runtime.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

// manifest returns the defaults with changes applied.
func manifest(entry string, change func(*runtime.Resources)) *runtime.Manifest {
	m := runtime.DefaultManifest("test")
	if entry != "" {
		m.Entrypoint = entry
	}
	if change != nil {
		change(&m.Resources)
	}
	return m
}

func load(t testing.TB, rt *runtime.Runtime, file string, m *runtime.Manifest, host *hostfns.Set) *runtime.Module {
	t.Helper()
	mod, err := rt.Load(context.Background(), readFixture(t, file), runtime.Spec{Name: strings.TrimSuffix(file, ".wasm"), Manifest: m, Host: host})
	if err != nil {
		t.Fatalf("Load(%s): %v", file, err)
	}
	return mod
}

func TestEcho(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	mod := load(t, rt, "echo.wasm", nil, nil)
	for _, in := range []string{"", "a", "hello, world", strings.Repeat("x", 100_000)} {
		res, err := mod.Call(t.Context(), []byte(in))
		if err != nil {
			t.Fatalf("Call(%d bytes): %v", len(in), err)
		}
		if string(res.Output) != in {
			t.Errorf("output %q, want %q", trunc(res.Output), trunc([]byte(in)))
		}
		if res.Fuel == 0 {
			t.Error("fuel used = 0")
		}
	}
}

func trunc(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// Every call gets a fresh instance: a guest that increments a global sees 1
// every time, sequentially and concurrently, with and without prepared
// instances.
func TestFreshInstancePerCall(t *testing.T) {
	for _, prepared := range []int{-1, 4} {
		t.Run(fmt.Sprintf("prepared=%d", prepared), func(t *testing.T) {
			rt := newRuntime(t, runtime.Options{Prepared: prepared})
			mod := load(t, rt, "counter.wasm", nil, nil)
			for i := 0; i < 20; i++ {
				res, err := mod.Call(t.Context(), nil)
				if err != nil {
					t.Fatal(err)
				}
				if string(res.Output) != "1" {
					t.Fatalf("call %d: output %q, want 1 (state leaked between calls)", i, res.Output)
				}
			}
			var wg sync.WaitGroup
			errc := make(chan error, 100)
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 12; i++ {
						res, err := mod.Call(t.Context(), nil)
						if err != nil {
							errc <- err
							return
						}
						if string(res.Output) != "1" {
							errc <- fmt.Errorf("output %q, want 1", res.Output)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Error(err)
			}
		})
	}
}

// No memory survives a call: after a call that dirties its own memory and its
// kernel's, a fresh call sees only zeros — sequentially and concurrently, with
// and without prepared instances.
func TestNoMemorySurvivesACall(t *testing.T) {
	for _, prepared := range []int{-1, 3} {
		t.Run(fmt.Sprintf("prepared=%d", prepared), func(t *testing.T) {
			rt := newRuntime(t, runtime.Options{Prepared: prepared})
			mod := load(t, rt, "leak.wasm", manifest("clean", nil), nil)
			var wg sync.WaitGroup
			errc := make(chan error, 64)
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 25; i++ {
						if _, err := mod.CallExport(t.Context(), "dirty", nil); err != nil {
							errc <- fmt.Errorf("dirty: %w", err)
							return
						}
						res, err := mod.CallExport(t.Context(), "clean", nil)
						if err != nil || string(res.Output) != "clean" {
							errc <- fmt.Errorf("clean after dirty: %v (memory leaked between calls?)", err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Error(err)
			}
		})
	}
}

func TestConcurrentCallsKeepTheirInputs(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	mod := load(t, rt, "echo.wasm", nil, nil)
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				in := fmt.Sprintf("goroutine %d call %d %s", g, i, strings.Repeat("y", g*100))
				res, err := mod.Call(t.Context(), []byte(in))
				if err != nil {
					errc <- err
					return
				}
				if string(res.Output) != in {
					errc <- fmt.Errorf("got %q want %q", trunc(res.Output), trunc([]byte(in)))
				}
			}
		}(g)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// sleepFunctions is a test host function that blocks: one variant honours the
// context (as buddy's own do), one ignores it (the watchdog must still answer
// at the deadline).
func sleepFunction(honourCtx bool) hostfns.Func {
	return hostfns.Func{Namespace: "buddy:test", Name: "sleep", Params: []api.ValueType{api.ValueTypeI64}, Fn: func(ctx context.Context, _ hostfns.Kernel, stack []uint64) {
		d := time.Duration(stack[0]) * time.Millisecond
		if !honourCtx {
			time.Sleep(min(d, 2*time.Second))
			return
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			panic(ctx.Err())
		}
	}}
}

// TestLimits: each hostile fixture ends with its typed error.
func TestLimits(t *testing.T) {
	type tc struct {
		file, entry string
		res         func(*runtime.Resources)
		want        error  // sentinel
		wantMsg     string // substring of the error, optional
		extra       []hostfns.Func
		maxDur      time.Duration // generous: the deadline itself is 300ms
	}
	fuel := func(f uint64) func(*runtime.Resources) { return func(r *runtime.Resources) { r.Fuel = f } }
	deadline := func(d time.Duration) func(*runtime.Resources) {
		return func(r *runtime.Resources) { r.Fuel = runtime.MaxFuel; r.Timeout = d }
	}
	cases := []tc{
		{file: "spin.wasm", res: fuel(10_000_000), want: runtime.ErrFuelExhausted, wantMsg: "of 10000000 fuel"},
		{file: "spin.wasm", res: deadline(300 * time.Millisecond), want: runtime.ErrTimeout, maxDur: 5 * time.Second},
		{file: "calltree.wasm", res: fuel(10_000_000), want: runtime.ErrFuelExhausted},
		// Loop-free code still meets its deadline (WithCloseOnContextDone would not).
		{file: "calltree.wasm", res: deadline(300 * time.Millisecond), want: runtime.ErrTimeout, maxDur: 5 * time.Second},
		{file: "wide.wasm", res: fuel(10_000), want: runtime.ErrFuelExhausted},
		{file: "recurse.wasm", res: fuel(100_000), want: runtime.ErrFuelExhausted},
		// With fuel to spare, wazero's stack cap ends it first: a trap, never a
		// crash. (Growing the stack to its cap takes seconds under -race on a
		// loaded machine: the deadline is far enough not to win that race.)
		{file: "recurse.wasm", entry: "run", res: deadline(time.Minute), want: runtime.ErrTrap, wantMsg: "stack overflow"},
		{file: "grow.wasm", want: runtime.ErrMemoryLimit, wantMsg: "MiB"},
		{file: "fill.wasm", want: runtime.ErrFuelExhausted},
		{file: "fill.wasm", entry: "fill_oob_small", want: runtime.ErrTrap, wantMsg: "out of bounds"},
		{file: "output_huge.wasm", want: runtime.ErrTooLarge},
		{file: "output_huge.wasm", entry: "bogus", want: runtime.ErrTooLarge},
		{file: "output_huge.wasm", entry: "bogus_small", want: runtime.ErrTrap, wantMsg: "outside kernel memory"},
		{file: "alloc_spam.wasm", res: fuel(100_000_000), want: runtime.ErrFuelExhausted},
		{file: "alloc_spam.wasm", res: deadline(300 * time.Millisecond), want: runtime.ErrTimeout, maxDur: 5 * time.Second},
		{file: "kernel_corrupt.wasm", want: runtime.ErrTrap, wantMsg: "outside every block", maxDur: 5 * time.Second},
		{file: "kernel_corrupt.wasm", entry: "root", want: runtime.ErrTrap, wantMsg: "outside every block", maxDur: 5 * time.Second},
		{file: "oob_kernel.wasm", entry: "store_u64_alias", want: runtime.ErrTrap, wantMsg: "outside every block"},
		// A start section runs at the start of each call, metered: one that
		// never ends is stopped like any loop (plain go-sdk hangs in NewPlugin).
		{file: "start_forever.wasm", res: fuel(10_000_000), want: runtime.ErrFuelExhausted},
		{file: "start_forever.wasm", res: deadline(300 * time.Millisecond), want: runtime.ErrTimeout, maxDur: 5 * time.Second},
		{file: "trap.wasm", want: runtime.ErrTrap, wantMsg: "unreachable"},
		{file: "trap.wasm", entry: "div0", want: runtime.ErrTrap, wantMsg: "divide by zero"},
		{file: "trap.wasm", entry: "oob_load", want: runtime.ErrTrap, wantMsg: "out of bounds memory access"},
		{file: "sleep.wasm", res: deadline(300 * time.Millisecond), want: runtime.ErrTimeout,
			extra: []hostfns.Func{sleepFunction(true)}, maxDur: 5 * time.Second},
		{file: "sleep.wasm", res: deadline(300 * time.Millisecond), want: runtime.ErrTimeout,
			extra: []hostfns.Func{sleepFunction(false)}, maxDur: 1500 * time.Millisecond},
		{file: "echo.wasm", entry: "fail", want: runtime.ErrInvalidInput, wantMsg: "bad thing"},
		{file: "echo.wasm", entry: "fail_plain", want: runtime.ErrSkill, wantMsg: "something broke"},
		{file: "pdkplugin.wasm", entry: "fail", want: runtime.ErrNotFound, wantMsg: "no such greeting"},
	}
	for _, c := range cases {
		name := strings.TrimSuffix(c.file, ".wasm")
		if c.entry != "" {
			name += "/" + c.entry
		}
		if c.extra != nil {
			name += "/hostfn"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rt := newRuntime(t, runtime.Options{ExtraHostFunctions: c.extra})
			mod := load(t, rt, c.file, manifest(c.entry, c.res), nil)
			start := time.Now()
			_, err := mod.Call(t.Context(), []byte("x"))
			took := time.Since(start)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v (%T), want %v", err, err, c.want)
			}
			if c.wantMsg != "" && !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("err = %q, want it to mention %q", err, c.wantMsg)
			}
			if c.maxDur > 0 && took > c.maxDur {
				t.Errorf("took %s, want under %s", took, c.maxDur)
			}
			// The kind is stable for the CLI.
			if k := errs.KindOf(err); k == errs.KindInternal {
				t.Errorf("kind of %v is internal", err)
			}
		})
	}
}

func TestFuelErrorCarriesUsage(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	mod := load(t, rt, "spin.wasm", manifest("", func(r *runtime.Resources) { r.Fuel = 5_000_000 }), nil)
	_, err := mod.Call(t.Context(), nil)
	var fe *runtime.FuelError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want *FuelError", err)
	}
	if fe.Budget != 5_000_000 || fe.Used <= fe.Budget {
		t.Errorf("FuelError = %+v, want used > budget = 5000000", fe)
	}
}

// Fuel is deterministic: the same input uses the same fuel on every call and
// with any refuel chunk; the exhaustion point does not depend on the chunk.
func TestFuelDeterminism(t *testing.T) {
	var first map[string]uint64
	for _, chunk := range []int64{7777, 1_000_000, 1 << 40} {
		rt := newRuntime(t, runtime.Options{FuelChunk: chunk})
		mod := load(t, rt, "fuel_loop.wasm", nil, nil)
		got := map[string]uint64{}
		for _, in := range []string{"0", "10", "5000"} {
			var prev uint64
			for i := 0; i < 3; i++ {
				res, err := mod.Call(t.Context(), []byte(in))
				if err != nil {
					t.Fatal(err)
				}
				if i > 0 && res.Fuel != prev {
					t.Fatalf("chunk %d input %d bytes: fuel %d then %d", chunk, len(in), prev, res.Fuel)
				}
				prev = res.Fuel
			}
			got[in] = prev
		}
		if got["0"] >= got["10"] || got["10"] >= got["5000"] {
			t.Errorf("fuel does not grow with the work: %v", got)
		}
		// Exhaustion point.
		sp := load(t, rt, "spin.wasm", manifest("", func(r *runtime.Resources) { r.Fuel = 123_456 }), nil)
		_, err := sp.Call(t.Context(), nil)
		var fe *runtime.FuelError
		if !errors.As(err, &fe) {
			t.Fatalf("spin: %v", err)
		}
		got["exhausted"] = fe.Used
		if first == nil {
			first = got
			continue
		}
		for k, v := range got {
			if first[k] != v {
				t.Errorf("chunk %d: input %q used %d, with the first chunk %d", chunk, k, v, first[k])
			}
		}
	}
}

// TestLoadRefusals: modules that must not load, each with its kind and a
// message naming the problem.
func TestLoadRefusals(t *testing.T) {
	cases := []struct {
		file    string
		want    error
		wantMsg string
	}{
		{"undeclared.wasm", runtime.ErrForbidden, "imports buddy:host/v1.http_get, not granted"},
		{"undeclared_user.wasm", runtime.ErrForbidden, "imports extism:host/user.launch_missiles, not granted"},
		{"http_request.wasm", runtime.ErrForbidden, "imports extism:host/env.http_request, refused"},
		{"reserved_fuel.wasm", runtime.ErrForbidden, "buddy:fuel.refuel"},
		{"reserved_kernel.wasm", runtime.ErrForbidden, "buddy:kernel.alloc"},
		{"import_memory.wasm", runtime.ErrInvalidInput, "memory import"},
		{"bad_sig.wasm", runtime.ErrInvalidInput, "signature mismatch"},
		{"bigmem.wasm", runtime.ErrMemoryLimit, "1000 pages"},
		{"global_reset.wasm", runtime.ErrInvalidInput, "global index 1 out of range"},
		{"notwasm.wasm", runtime.ErrInvalidInput, "not a WebAssembly module"},
		{"truncated.wasm", runtime.ErrInvalidInput, "malformed"},
		{"sleep.wasm", runtime.ErrForbidden, "imports buddy:test.sleep, not granted"},
	}
	rt := newRuntime(t, runtime.Options{})
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			done := make(chan struct{})
			var err error
			go func() {
				defer close(done)
				_, err = rt.Load(t.Context(), readFixture(t, c.file), runtime.Spec{})
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Load hung")
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("err = %q, want it to contain %q", err, c.wantMsg)
			}
		})
	}
}

// An entrypoint the module does not export is not_found, naming the exports.
func TestMissingEntrypoint(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	_, err := rt.Load(t.Context(), readFixture(t, "echo.wasm"), runtime.Spec{Manifest: manifest("nope", nil)})
	if !errors.Is(err, runtime.ErrNotFound) || !strings.Contains(err.Error(), "fail_plain") {
		t.Fatalf("err = %v, want not found listing the exports", err)
	}
	mod := load(t, rt, "echo.wasm", nil, nil)
	if _, err := mod.CallExport(t.Context(), "nope", nil); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("CallExport(nope) = %v, want not found", err)
	}
}

// Inspect is the install-time check against the manifest's declarations.
func TestInspectDeclarations(t *testing.T) {
	m := runtime.DefaultManifest("x")
	_, err := runtime.Inspect(t.Context(), readFixture(t, "undeclared.wasm"), m)
	if !errors.Is(err, runtime.ErrForbidden) || !strings.Contains(err.Error(), "declares no network capability") {
		t.Fatalf("Inspect = %v, want a forbidden error naming the network capability", err)
	}
	m.Capabilities.Network = []string{"example.com"}
	_, err = runtime.Inspect(t.Context(), readFixture(t, "undeclared.wasm"), m)
	if !errors.Is(err, runtime.ErrForbidden) || !strings.Contains(err.Error(), "declares permission read_only; it needs network") {
		t.Fatalf("Inspect of a read_only module importing http_get = %v, want forbidden naming the permission", err)
	}
	m.Permission = runtime.Network
	if _, err := runtime.Inspect(t.Context(), readFixture(t, "undeclared.wasm"), m); err != nil {
		t.Fatalf("Inspect with network declared: %v", err)
	}
	info, err := runtime.Inspect(t.Context(), readFixture(t, "pdkplugin.wasm"), manifest("greet", nil))
	if err != nil {
		t.Fatal(err)
	}
	if !info.WASI || len(info.SHA256) != 64 {
		t.Errorf("info = %+v, want WASI and a sha256", info)
	}
}

// A plugin from a real PDK (go-pdk + TinyGo wasip1) runs unchanged.
func TestThirdPartyPDKPlugin(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	mod := load(t, rt, "pdkplugin.wasm", manifest("greet", nil), nil)
	res, err := mod.Call(t.Context(), []byte("Ada"))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != "Hello, Ada!" {
		t.Errorf("greet = %q", res.Output)
	}
	res, err = mod.CallExport(t.Context(), "count_vowels", []byte("The quick brown fox"))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != "5" {
		t.Errorf("count_vowels = %q, want 5", res.Output)
	}
}

// WASI is linked with nothing of the host: no filesystem, environment,
// arguments or stdout.
func TestWASIGivesNothingOfTheHost(t *testing.T) {
	t.Setenv("HOME", "/home/secret")
	rt := newRuntime(t, runtime.Options{})
	mod := load(t, rt, "pdkplugin.wasm", manifest("wasi_probe", nil), nil)
	res, err := mod.Call(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ReadOK     bool `json:"read_ok"`
		DirEntries int  `json:"dir_entries"`
		DirOK      bool `json:"dir_ok"`
		Env        int
		Home       string
		Args       int
	}
	if err := json.Unmarshal(res.Output, &got); err != nil {
		t.Fatalf("output %q: %v", res.Output, err)
	}
	if got.ReadOK || got.DirOK || got.DirEntries != 0 || got.Env != 0 || got.Home != "" || got.Args != 0 {
		t.Errorf("a WASI guest reached the host: %s", res.Output)
	}
}

// Inputs over the cap are refused before they reach go-sdk, which would drop
// them silently.
func TestInputCap(t *testing.T) {
	rt := newRuntime(t, runtime.Options{MaxInputBytes: 1000})
	mod := load(t, rt, "echo.wasm", nil, nil)
	if _, err := mod.Call(t.Context(), make([]byte, 1000)); err != nil {
		t.Fatalf("input at the cap: %v", err)
	}
	_, err := mod.Call(t.Context(), make([]byte, 1001))
	if !errors.Is(err, runtime.ErrTooLarge) {
		t.Fatalf("input over the cap: %v, want too large", err)
	}
	// The kernel-capacity bound applies even when MaxInputBytes is larger.
	rt2 := newRuntime(t, runtime.Options{})
	small := load(t, rt2, "echo.wasm", manifest("", func(r *runtime.Resources) { r.MemoryMB = 2 }), nil)
	if _, err := small.Call(t.Context(), make([]byte, 600<<10)); !errors.Is(err, runtime.ErrTooLarge) {
		t.Fatalf("input over the kernel's quarter: %v, want too large", err)
	}
}

func TestOutputCap(t *testing.T) {
	rt := newRuntime(t, runtime.Options{MaxOutputBytes: 100})
	mod := load(t, rt, "echo.wasm", nil, nil)
	if _, err := mod.Call(t.Context(), make([]byte, 100)); err != nil {
		t.Fatalf("output at the cap: %v", err)
	}
	if _, err := mod.Call(t.Context(), make([]byte, 101)); !errors.Is(err, runtime.ErrTooLarge) {
		t.Fatalf("output over the cap: %v, want too large", err)
	}
}

// A guest asking to output 1 GiB fails fast with a cap error and the host's
// heap does not follow it.
func TestHugeOutputDoesNotGrowTheHost(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	mod := load(t, rt, "output_huge.wasm", nil, nil)
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	start := time.Now()
	for i := 0; i < 20; i++ {
		if _, err := mod.Call(t.Context(), nil); !errors.Is(err, runtime.ErrTooLarge) && !errors.Is(err, runtime.ErrMemoryLimit) {
			t.Fatalf("err = %v, want a cap error", err)
		}
	}
	goruntime.ReadMemStats(&after)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("20 calls took %s: a cap error should be fast", took)
	}
	if after.TotalAlloc-before.TotalAlloc > 512<<20 {
		t.Errorf("20 calls allocated %d MiB in total", (after.TotalAlloc-before.TotalAlloc)>>20)
	}
}

// Out-of-bounds pointers handed to kernel and host functions end the call with
// an error; none may panic the process.
func TestOutOfBoundsPointers(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	kernel := load(t, rt, "oob_kernel.wasm", manifest("load_u8", nil), nil)
	for _, fn := range kernel.Info().Exports {
		if fn == "_initialize" {
			continue
		}
		t.Run("kernel/"+fn, func(t *testing.T) {
			_, err := kernel.CallExport(t.Context(), fn, []byte("x"))
			if err != nil && errs.KindOf(err) == errs.KindInternal {
				t.Errorf("%s: internal error %v", fn, err)
			}
		})
	}

	dir := t.TempDir()
	host, err := hostfns.Link(hostfns.Grants{
		Read: []string{dir}, Write: []string{dir}, Domains: allow.Intersect([]string{"*"}, []string{"127.0.0.1"}),
		Env: []string{"HOME"}, Namespace: "t",
	}, hostfns.Deps{KV: nopKV{}, Memories: nopKV{}})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close(context.Background())
	hm := manifest("log", nil)
	hm.Permission = runtime.Network // it imports every host function
	hmod := load(t, rt, "oob_host.wasm", hm, host)
	for _, fn := range hmod.Info().Exports {
		for _, mode := range []string{"f", "a", "0", "m"} {
			t.Run("host/"+fn+"/"+mode, func(t *testing.T) {
				_, err := hmod.CallExport(t.Context(), fn, []byte(mode))
				switch mode {
				case "f":
					// A far pointer breaks the memory contract: the call traps.
					if !errors.Is(err, runtime.ErrTrap) {
						t.Errorf("%s with a far pointer: %v, want a trap", fn, err)
					}
				default:
					if err != nil && errs.KindOf(err) == errs.KindInternal {
						t.Errorf("%s: internal error %v", fn, err)
					}
				}
			})
		}
	}
}

type nopKV struct{}

func (nopKV) KVGet(context.Context, string, string) ([]byte, error) {
	return nil, errs.New(errs.ErrNotFound, "no key")
}
func (nopKV) KVSet(context.Context, string, string, []byte) error { return nil }
func (nopKV) KVDelete(context.Context, string, string) error      { return nil }
func (nopKV) Remember(context.Context, string, string, []string) (int64, error) {
	return 1, nil
}
func (nopKV) Recall(context.Context, string, string, int) ([]hostfns.Memory, error) {
	return nil, nil
}

// Guest logs are limited per call.
func TestGuestLogLimit(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	rt := newRuntime(t, runtime.Options{Log: func(skill string, level runtime.Level, msg string) {
		mu.Lock()
		lines = append(lines, msg)
		mu.Unlock()
	}})
	mod := load(t, rt, "oob_kernel.wasm", manifest("log_info", nil), nil)
	for i := 0; i < 300; i++ {
		mod.CallExport(t.Context(), "log_info", nil)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) > 300*201 {
		t.Errorf("%d log lines from 300 calls", len(lines))
	}
}

// The hostile modules, called 1,000 times each, concurrently: the process
// survives and its heap stays bounded.
func TestHostileModulesInALoop(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	rt := newRuntime(t, runtime.Options{MaxConcurrent: 4})
	small := func(r *runtime.Resources) { r.Fuel = 2_000_000; r.Timeout = 10 * time.Second; r.MemoryMB = 4 }
	// Deep recursion and kernel-allocation spam cost time in proportion to
	// depth (stack copying) and to the kernel's block walk: a smaller budget
	// keeps 1,000 calls quick while still stopping each one by fuel.
	smaller := func(r *runtime.Resources) { small(r); r.Fuel = 300_000 }
	type target struct{ file, entry string }
	targets := []target{
		{"spin.wasm", ""}, {"calltree.wasm", ""}, {"recurse.wasm", ""}, {"grow.wasm", ""},
		{"fill.wasm", ""}, {"fill.wasm", "fill_oob"}, {"output_huge.wasm", ""}, {"output_huge.wasm", "bogus_small"},
		{"alloc_spam.wasm", ""}, {"trap.wasm", ""}, {"trap.wasm", "div0"}, {"trap.wasm", "oob_load"},
		{"oob_kernel.wasm", "load_u64"}, {"oob_kernel.wasm", "output_set"}, {"oob_kernel.wasm", "store_u64_alias"},
		{"echo.wasm", "fail"},
	}
	// 1,000 calls per module (make test runs this test without the race
	// detector too); 100 under -race, still from 4 goroutines at once.
	calls := 1000
	if raceEnabled {
		calls = 100
	}
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	for _, tg := range targets {
		start := time.Now()
		res := small
		if tg.file == "recurse.wasm" || tg.file == "alloc_spam.wasm" {
			res = smaller
		}
		mod := load(t, rt, tg.file, manifest(tg.entry, res), nil)
		var wg sync.WaitGroup
		var mu sync.Mutex
		kinds := map[errs.Kind]int{}
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < calls/4; i++ {
					_, err := mod.Call(context.Background(), []byte("f"))
					mu.Lock()
					kinds[errs.KindOf(err)]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if kinds[errs.KindInternal] > 0 {
			t.Errorf("%s %s: %d internal errors", tg.file, tg.entry, kinds[errs.KindInternal])
		}
		t.Logf("%s %s: %d calls in %s: %v", tg.file, tg.entry, calls, time.Since(start).Round(time.Millisecond), kinds)
		mod.Close(context.Background())
	}
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if grown > 64<<20 {
		t.Errorf("heap grew by %d MiB over %d hostile calls", grown>>20, calls*len(targets))
	}
	t.Logf("heap before %d MiB, after %d MiB", before.HeapAlloc>>20, after.HeapAlloc>>20)
}

// The instrumented module and the compiled code are cached on disk: a second
// runtime on the same directory loads from them, and a corrupted cache entry
// is ignored rather than executed.
func TestDiskCache(t *testing.T) {
	dir := t.TempDir()
	wasm := readFixture(t, "echo.wasm")
	rt1 := newRuntime(t, runtime.Options{CacheDir: dir})
	if _, err := rt1.Load(t.Context(), wasm, runtime.Spec{}); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "instrumented", "*.wasm"))
	if len(files) != 1 {
		t.Fatalf("instrumented cache files = %v, want 1", files)
	}
	compiled, _ := filepath.Glob(filepath.Join(dir, "wazero", "*", "*"))
	if len(compiled) == 0 {
		t.Fatal("no compiled code cached")
	}
	// Corrupt the instrumented entry: it must be ignored and rewritten.
	if err := os.WriteFile(files[0], []byte("garbage that is not wasm"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt2 := newRuntime(t, runtime.Options{CacheDir: dir})
	mod, err := rt2.Load(t.Context(), wasm, runtime.Spec{})
	if err != nil {
		t.Fatalf("load with a corrupt cache entry: %v", err)
	}
	res, err := mod.Call(t.Context(), []byte("still works"))
	if err != nil || string(res.Output) != "still works" {
		t.Fatalf("call = %q, %v", res.Output, err)
	}
	data, _ := os.ReadFile(files[0])
	if bytes.HasPrefix(data, []byte("garbage")) {
		t.Error("the corrupt cache entry was not replaced")
	}
}

func TestCloseIsIdempotentAndRefusesWork(t *testing.T) {
	rt, err := runtime.New(t.Context(), runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mod := load(t, rt, "echo.wasm", nil, nil)
	if err := rt.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := mod.Call(t.Context(), nil); err == nil {
		t.Fatal("call after Close succeeded")
	}
	if _, err := rt.Load(t.Context(), readFixture(t, "echo.wasm"), runtime.Spec{}); err == nil {
		t.Fatal("Load after Close succeeded")
	}
}

// Canceling the caller's context ends the call with canceled, not timeout.
func TestCancel(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	mod := load(t, rt, "spin.wasm", manifest("", func(r *runtime.Resources) { r.Fuel = runtime.MaxFuel; r.Timeout = time.Minute }), nil)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := mod.Call(ctx, nil)
	if !errors.Is(err, runtime.ErrCanceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
}
