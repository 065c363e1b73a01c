package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/hostfns/fs"
	"github.com/buddy-run/buddy/runtime/internal/fuel"
)

func benchFixture(b *testing.B, name string) []byte {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkFuelOverhead runs the same real plugin (go-pdk + TinyGo,
// count_vowels over 128 KiB) original and instrumented, each call in a fresh
// instance made outside the measured time (call-ns/op), so that the ratio is
// the cost of metering alone; ratio alternates the two call by call and
// reports instrumented ÷ original as x.
func BenchmarkFuelOverhead(b *testing.B) {
	ctx := context.Background()
	wasm := benchFixture(b, "pdkplugin.wasm")
	input := bytes.Repeat([]byte("The quick brown fox jumps over the lazy dog. "), 128<<10/45+1)[:128<<10]
	instrumented, _, err := fuel.Instrument(wasm, instrumentOptions)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := New(ctx, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	m := &Module{r: rt, name: "bench", manifest: DefaultManifest("bench")}
	m.manifest.Resources.Fuel = MaxFuel
	m.manifest.Resources.MemoryMB = 16
	m.info = &Info{WASI: true}

	// Both variants run on buddy's own call path and Go kernel; the
	// original imports every kernel function from extism:host/env, so its
	// runtime serves them all there.
	variants := []struct {
		name   string
		code   []byte
		rename bool
	}{
		{"original", wasm, false},
		{"instrumented", instrumented, true},
	}
	type compiled struct {
		rt wazero.Runtime
		cm wazero.CompiledModule
	}
	cms := make([]compiled, len(variants))
	for i, c := range variants {
		r := wazero.NewRuntimeWithConfig(ctx, rt.runtimeConfig(256))
		defer r.Close(ctx)
		funcs := m.kernelFunctions()
		if !c.rename {
			for j := range funcs {
				if funcs[j].ns == hostfns.KernelNamespace {
					funcs[j].ns = kernelNS
				}
			}
		}
		byNS := map[string]wazero.HostModuleBuilder{}
		for _, f := range funcs {
			if byNS[f.ns] == nil {
				byNS[f.ns] = r.NewHostModuleBuilder(f.ns)
			}
			byNS[f.ns].NewFunctionBuilder().WithGoModuleFunction(f.fn, f.params, f.results).Export(f.name)
		}
		for _, hb := range byNS {
			if _, err := hb.Instantiate(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
			b.Fatal(err)
		}
		cm, err := r.CompileModule(ctx, c.code)
		if err != nil {
			b.Fatal(err)
		}
		cms[i] = compiled{r, cm}
	}
	// call runs count_vowels once in a fresh instance of variant i, made and
	// closed outside the returned time: the guest's allocator never frees
	// (TinyGo's leaking GC), so a reused instance runs out of memory after a
	// few hundred calls.
	call := func(b *testing.B, i int) time.Duration {
		mod, err := cms[i].rt.InstantiateModule(ctx, cms[i].cm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
		if err != nil {
			b.Fatal(err)
		}
		inst := &instance{mod: mod, rand: &xorshiftReader{}, entry: mod.ExportedFunction("count_vowels"), init: mod.ExportedFunction("_initialize")}
		st := &callState{m: m, ctx: ctx, budget: MaxFuel, chunk: DefaultFuelChunk}
		st.k.init(rt.mem, 16<<20)
		defer inst.close(ctx, st)
		cctx := context.WithValue(ctx, stateKey{}, st)
		start := time.Now()
		_, out, err := inst.call(cctx, st, "count_vowels", input)
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if len(out) == 0 {
			b.Fatal("no output")
		}
		return took
	}
	for i, c := range variants {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(input)))
			var total time.Duration
			for n := 0; n < b.N; n++ {
				total += call(b, i)
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "call-ns/op")
		})
	}
	// ratio: original and instrumented alternated call by call, so that load
	// from other processes hits both alike; x = ratio of the median calls.
	b.Run("ratio", func(b *testing.B) {
		var d [2][]time.Duration
		for n := 0; n < b.N; n++ {
			for i := range variants {
				d[i] = append(d[i], call(b, i))
			}
		}
		b.ReportMetric(float64(median(d[1]))/float64(median(d[0])), "x")
	})
}

// BenchmarkCallLatency: one call of a trivial echo plugin, never reusing an
// instance.
//   - buddy/idle: the runtime is idle (its prepared instances are ready), the
//     latency a caller sees; the call's clean-up on a goroutine it starts;
//   - buddy/idle-afteruse: likewise, the clean-up run by the caller after
//     the answer (AfterUse, as the server's invoke does);
//   - buddy/serial and buddy/parallel: back-to-back calls from 1 and 2
//     goroutines (throughput: each call still instantiates a fresh instance,
//     ahead of demand or not);
//   - gosdk-naive: Extism go-sdk used naively, Instance + Call + Close;
//   - wazero-floor: an import-free module instantiated, called and closed on
//     bare wazero: what a fresh instance costs before anything Extism does;
//   - ratio: idle buddy (as the server calls it: AfterUse), the wazero
//     floor and naive go-sdk interleaved call
//     by call; reports buddy/floor and naive/buddy (ratios of medians), and
//     read_file of 4 KiB against the echo (readfile/echo), and the same read
//     by the host function's own code outside the sandbox (nativeread-µs):
//     readfile/(echo+nativeread) is what the sandbox adds to a read; and a
//     built-in's trivial call (testdata/skillkit_noop.wasm: TinyGo through
//     skillkit, the built-ins' target) against the echo (tinygo/echo). The
//     paths run in a new (seeded) order every iteration, so that none
//     always follows naive go-sdk's 1.2 MiB of garbage or another read;
//   - native: a Go JSON echo doing the same work.
func BenchmarkCallLatency(b *testing.B) {
	ctx := context.Background()
	wasm := benchFixture(b, "echo.wasm")
	input := []byte(`{"path":"notes/today.txt"}`)

	for _, afterUse := range []bool{false, true} {
		name := "buddy/idle"
		if afterUse {
			name = "buddy/idle-afteruse"
		}
		b.Run(name, func(b *testing.B) {
			rt, err := New(ctx, Options{Prepared: 2})
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close(ctx)
			mod, err := rt.Load(ctx, wasm, Spec{})
			if err != nil {
				b.Fatal(err)
			}
			mod.refill()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				mod.calls.Wait() // the previous call's clean-up is done
				waitReady(mod)
				cctx, cleanUp := ctx, func() {}
				if afterUse {
					cctx, cleanUp = AfterUse(ctx)
				}
				b.StartTimer()
				res, err := mod.Call(cctx, input)
				if err != nil || !bytes.Equal(res.Output, input) {
					b.Fatal(err)
				}
				if afterUse {
					b.StopTimer()
					cleanUp()
					b.StartTimer()
				}
			}
		})
	}
	for _, par := range []int{1, 2} {
		name := "buddy/serial"
		if par > 1 {
			name = "buddy/parallel"
		}
		b.Run(name, func(b *testing.B) {
			rt, err := New(ctx, Options{Prepared: 2})
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close(ctx)
			mod, err := rt.Load(ctx, wasm, Spec{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if par == 1 {
				for i := 0; i < b.N; i++ {
					if _, err := mod.Call(ctx, input); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(1) // GOMAXPROCS goroutines: 2 on the reference machine
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := mod.Call(ctx, input); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	b.Run("gosdk-naive", func(b *testing.B) {
		cp, err := extism.NewCompiledPlugin(ctx, extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm}}},
			extism.PluginConfig{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cp.Close(ctx)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			p, err := cp.Instance(ctx, extism.PluginInstanceConfig{})
			if err != nil {
				b.Fatal(err)
			}
			_, out, err := p.Call("run", input)
			if err != nil || !bytes.Equal(out, input) {
				b.Fatal(err)
			}
			p.Close(ctx)
		}
	})
	b.Run("wazero-floor", func(b *testing.B) {
		f := newFloor(b, ctx)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			f.call(b, ctx)
		}
	})
	// ratio: the three fresh-instance paths interleaved call by call, so that
	// load from other processes hits them alike; the metrics are ratios of
	// per-call medians (p50) within the run.
	b.Run("ratio", func(b *testing.B) {
		rt, err := New(ctx, Options{Prepared: 2})
		if err != nil {
			b.Fatal(err)
		}
		defer rt.Close(ctx)
		mod, err := rt.Load(ctx, wasm, Spec{})
		if err != nil {
			b.Fatal(err)
		}
		cp, err := extism.NewCompiledPlugin(ctx, extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm}}},
			extism.PluginConfig{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cp.Close(ctx)
		f := newFloor(b, ctx)
		rf, rfInput, rfDir := loadReadFile(b, rt)
		noop, err := rt.Load(ctx, benchFixture(b, "skillkit_noop.wasm"), Spec{})
		if err != nil {
			b.Fatal(err)
		}
		noopInput, noopOutput := []byte(`{"path":"notes/today.txt"}`), []byte(`{"path":"notes/today.txt"}`)
		roots, err := fs.Open([]string{rfDir}, fs.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer roots.Close()
		mod.refill()
		rf.refill()
		noop.refill()
		var floor, buddy, naive, readFile, native, tinygo []time.Duration
		b.ResetTimer()
		order := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < b.N; i++ {
			floorCall := func() {
				start := time.Now()
				f.call(b, ctx)
				floor = append(floor, time.Since(start))
			}

			// buddy as the server calls it on an idle runtime: its prepared
			// instances ready, and the call's clean-up (closing, zeroing,
			// preparing the next) run by the caller once it has the answer
			// (AfterUse, as the server's invoke does after sending it), before
			// the next path is timed, so that it does not run on another's
			// clock. (The timer keeps running: ns/op of this sub-benchmark
			// means nothing, and StopTimer's memory statistics stop the
			// world.)
			echo := func() {
				waitReady(mod)
				cctx, cleanUp := AfterUse(ctx)
				start := time.Now()
				res, err := mod.Call(cctx, input)
				buddy = append(buddy, time.Since(start))
				if err != nil || !bytes.Equal(res.Output, input) {
					b.Fatal(err)
				}
				cleanUp()
				mod.calls.Wait()
				waitReady(mod)
			}
			// The read_file built-in reading 4 KiB, under the same
			// discipline as the echo call.
			read := func() {
				waitReady(rf)
				cctx, cleanUp := AfterUse(ctx)
				start := time.Now()
				res, err := rf.Call(cctx, rfInput)
				readFile = append(readFile, time.Since(start))
				if err != nil || len(res.Output) < 4096 {
					b.Fatal(err)
				}
				cleanUp()
				rf.calls.Wait()
				waitReady(rf)
			}
			// A built-in's trivial call (TinyGo, skillkit), likewise.
			tinygoCall := func() {
				waitReady(noop)
				cctx, cleanUp := AfterUse(ctx)
				start := time.Now()
				res, err := noop.Call(cctx, noopInput)
				tinygo = append(tinygo, time.Since(start))
				if err != nil || !bytes.Equal(res.Output, noopOutput) {
					b.Fatal(err)
				}
				cleanUp()
				noop.calls.Wait()
				waitReady(noop)
			}
			naiveCall := func() {
				start := time.Now()
				p, err := cp.Instance(ctx, extism.PluginInstanceConfig{})
				if err != nil {
					b.Fatal(err)
				}
				_, out, err := p.Call("run", input)
				p.Close(ctx)
				naive = append(naive, time.Since(start))
				if err != nil || !bytes.Equal(out, input) {
					b.Fatal(err)
				}
			}
			// The same read by the host function's own code, outside any
			// sandbox: what read_file cannot cost less than.
			nativeRead := func() {
				start := time.Now()
				data, err := roots.Read(ctx, "f.txt")
				native = append(native, time.Since(start))
				if err != nil || len(data) != 4096 {
					b.Fatal(err)
				}
			}
			// Every iteration runs the six paths in a new order (a
			// fixed-seed shuffle), so that none always follows another:
			// naive go-sdk's garbage, and the warm file cache a read leaves,
			// fall on each path alike.
			paths := [...]func(){floorCall, echo, tinygoCall, naiveCall, read, nativeRead}
			order.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
			for _, p := range paths {
				p()
			}
		}
		fl, bu, na, rd, nr, tg := median(floor), median(buddy), median(naive), median(readFile), median(native), median(tinygo)
		b.ReportMetric(float64(fl.Nanoseconds())/1e3, "floor-µs")
		b.ReportMetric(float64(bu.Nanoseconds())/1e3, "buddy-µs")
		b.ReportMetric(float64(na.Nanoseconds())/1e3, "naive-µs")
		b.ReportMetric(float64(bu)/float64(fl), "buddy/floor")
		b.ReportMetric(float64(na)/float64(bu), "naive/buddy")
		b.ReportMetric(float64(rd.Nanoseconds())/1e3, "readfile-µs")
		b.ReportMetric(float64(rd)/float64(bu), "readfile/echo")
		b.ReportMetric(float64(nr.Nanoseconds())/1e3, "nativeread-µs")
		b.ReportMetric(float64(bu+nr)/float64(bu), "(echo+nativeread)/echo")
		b.ReportMetric(float64(rd)/float64(bu+nr), "readfile/(echo+nativeread)")
		b.ReportMetric(float64(tg.Nanoseconds())/1e3, "tinygo-µs")
		b.ReportMetric(float64(tg)/float64(bu), "tinygo/echo")
	})
	b.Run("native", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var v map[string]any
			if err := json.Unmarshal(input, &v); err != nil {
				b.Fatal(err)
			}
			out, err := json.Marshal(v)
			if err != nil || len(out) != len(input) {
				b.Fatal(err)
			}
		}
	})
}

// floorWasm is the smallest module a call can run: one page of memory and
// an export returning 0, with no imports.
//
//	(module (memory 1) (func (export "run") (result i32) i32.const 0))
var floorWasm = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // type: () -> i32
	0x03, 0x02, 0x01, 0x00, // func 0: type 0
	0x05, 0x03, 0x01, 0x00, 0x01, // memory: min 1 page
	0x07, 0x07, 0x01, 0x03, 'r', 'u', 'n', 0x00, 0x00, // export "run" = func 0
	0x0a, 0x06, 0x01, 0x04, 0x00, 0x41, 0x00, 0x0b, // code: i32.const 0
}

// floor is wazero's own floor for a fresh-instance call: the import-free
// floorWasm compiled once, then instantiated, called and closed per call on
// bare wazero (default compiler and module configuration).
type floor struct {
	r        wazero.Runtime
	compiled wazero.CompiledModule
}

func newFloor(b *testing.B, ctx context.Context) *floor {
	b.Helper()
	r := wazero.NewRuntime(ctx)
	b.Cleanup(func() { r.Close(ctx) })
	compiled, err := r.CompileModule(ctx, floorWasm)
	if err != nil {
		b.Fatal(err)
	}
	return &floor{r: r, compiled: compiled}
}

func (f *floor) call(b *testing.B, ctx context.Context) {
	mod, err := f.r.InstantiateModule(ctx, f.compiled, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		b.Fatal(err)
	}
	res, err := mod.ExportedFunction("run").Call(ctx)
	if err != nil || len(res) != 1 || res[0] != 0 {
		b.Fatal(err)
	}
	mod.Close(ctx)
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// loadReadFile loads the read_file built-in (builtins-wasm/) with a read
// grant on a directory holding a 4 KiB file, and returns it with the input
// that reads that file.
func loadReadFile(b *testing.B, rt *Runtime) (mod *Module, input []byte, dir string) {
	dir = b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), bytes.Repeat([]byte("0123456789abcdef"), 256), 0o600); err != nil {
		b.Fatal(err)
	}
	wasm, err := os.ReadFile(filepath.Join("..", "builtins-wasm", "read_file.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	toml, err := os.ReadFile(filepath.Join("..", "builtins-wasm", "read_file.skill.toml"))
	if err != nil {
		b.Fatal(err)
	}
	man, err := ParseManifest(toml)
	if err != nil {
		b.Fatal(err)
	}
	host, err := hostfns.Link(hostfns.Grants{Read: []string{dir}}, hostfns.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { host.Close(context.Background()) })
	mod, err = rt.Load(context.Background(), wasm, Spec{Manifest: man, Host: host})
	if err != nil {
		b.Fatal(err)
	}
	return mod, []byte(`{"path":"f.txt"}`), dir
}

// waitReady waits until the module's prepared instances are all there.
func waitReady(m *Module) {
	deadline := time.Now().Add(10 * time.Second)
	for m.ready.len() < m.ready.cap() && time.Now().Before(deadline) {
		m.refill()
		time.Sleep(200 * time.Microsecond)
	}
}

// BenchmarkLoad: Load of a real plugin by a new Runtime (as in a new
// process): cold (empty cache directory: validate, instrument, compile) vs
// warm (the on-disk caches of an earlier Runtime).
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	wasm := benchFixture(b, "pdkplugin.wasm")
	m := DefaultManifest("pdk")
	m.Entrypoint = "greet"
	b.Run("cold", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			dir := b.TempDir()
			rt, err := New(ctx, Options{CacheDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rt.Load(ctx, wasm, Spec{Manifest: m}); err != nil {
				b.Fatal(err)
			}
			rt.Close(ctx)
		}
	})
	b.Run("warm", func(b *testing.B) {
		dir := b.TempDir()
		rt, err := New(ctx, Options{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rt.Load(ctx, wasm, Spec{Manifest: m}); err != nil {
			b.Fatal(err)
		}
		rt.Close(ctx)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			rt, err := New(ctx, Options{CacheDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rt.Load(ctx, wasm, Spec{Manifest: m}); err != nil {
				b.Fatal(err)
			}
			rt.Close(ctx)
		}
	})
}

// BenchmarkLoadNewProcess is the compile-once figure as the issue states it:
// the first Load of a module in a new process with an empty cache directory
// (cold) vs the first Load in another new process that finds the on-disk
// caches of an earlier one (warm). Each iteration re-executes the test binary;
// the child times its own Load, so process start-up is not counted.
func BenchmarkLoadNewProcess(b *testing.B) {
	for _, name := range []string{"pdkplugin.wasm", "../../builtins-wasm/read_file.wasm"} {
		warmDir := b.TempDir()
		childLoad(b, name, warmDir) // populate
		for _, mode := range []string{"cold", "warm"} {
			b.Run(filepath.Base(name)+"/"+mode, func(b *testing.B) {
				var total time.Duration
				for i := 0; i < b.N; i++ {
					dir := warmDir
					if mode == "cold" {
						dir = b.TempDir()
					}
					total += childLoad(b, name, dir)
				}
				b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "load-ns/op")
			})
		}
	}
}

func childLoad(b *testing.B, fixture, cacheDir string) time.Duration {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BUDDY_BENCH_CHILD_LOAD="+fixture, "BUDDY_BENCH_CHILD_CACHE="+cacheDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("child: %v\n%s", err, out)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		b.Fatalf("child output %q", out)
	}
	return time.Duration(ns)
}

func TestMain(m *testing.M) {
	if fixture := os.Getenv("BUDDY_BENCH_CHILD_LOAD"); fixture != "" {
		ctx := context.Background()
		wasm, err := os.ReadFile(filepath.Join("testdata", fixture))
		if err != nil {
			panic(err)
		}
		man := DefaultManifest("bench")
		man.Entrypoint = ""
		host, err := hostfns.Link(hostfns.Grants{Read: []string{os.TempDir()}}, hostfns.Deps{})
		if err != nil {
			panic(err)
		}
		start := time.Now()
		rt, err := New(ctx, Options{CacheDir: os.Getenv("BUDDY_BENCH_CHILD_CACHE")})
		if err == nil {
			_, err = rt.Load(ctx, wasm, Spec{Manifest: man, Host: host})
		}
		took := time.Since(start)
		if err != nil {
			panic(err)
		}
		fmt.Println(took.Nanoseconds())
		os.Exit(0)
	}
	os.Exit(m.Run())
}
