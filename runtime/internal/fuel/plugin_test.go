package fuel

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"
)

// Real plugins: the test plugins shipped in the extism/go-sdk module (Rust,
// TinyGo, Go, Haskell, C), when it is in the module cache.

var goSDKDir = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/extism/go-sdk").Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
})

// goSDKWasm returns a test plugin of go-sdk, or nil.
func goSDKWasm(t testing.TB, name string) []byte {
	dir, err := goSDKDir()
	if err != nil || dir == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "wasm", name))
	if err != nil {
		return nil
	}
	return b
}

// kernelImports are the Extism kernel functions whose cost grows with the
// kernel's state; the runtime renames them to buddy:kernel wrappers.
var kernelImports = map[string]bool{"alloc": true, "free": true, "length": true, "length_unsafe": true}

var pluginOptions = Options{
	ImportCost: func(module, name string) int64 {
		if module == "extism:host/env" {
			return 100
		}
		return 1000
	},
	Rename: func(module, name string) string {
		if module == "extism:host/env" && kernelImports[name] {
			return KernelModule
		}
		return ""
	},
}

// TestRealPlugins instruments every go-sdk test plugin: the output must
// compile wherever the original does, and grow by a bounded factor.
func TestRealPlugins(t *testing.T) {
	dir, err := goSDKDir()
	if err != nil || dir == "" {
		t.Skip("extism/go-sdk not in the module cache")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "wasm", "*.wasm"))
	if len(files) == 0 {
		t.Skip("no go-sdk test plugins")
	}
	if testing.Short() || raceEnabled {
		files = files[:min(len(files), 6)]
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			wasm, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			info, err := Inspect(wasm)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			out, info2, err := Instrument(wasm, pluginOptions)
			if err != nil {
				t.Fatalf("Instrument: %v", err)
			}
			if len(info.Imports) != len(info2.Imports) || info.HasStart {
				t.Errorf("Inspect and Instrument disagree, or a start section: %+v", info)
			}
			if err := compiles(wasm); err != nil {
				t.Skipf("wazero refuses the original: %v", err)
			}
			if err := compiles(out); err != nil {
				t.Fatalf("the instrumented plugin does not compile: %v", err)
			}
			codeIn, codeOut := len(sectionsOf(t, wasm)[secCode]), len(sectionsOf(t, out)[secCode])
			t.Logf("%d -> %d bytes, code %d -> %d (x%.2f)", len(wasm), len(out), codeIn, codeOut,
				float64(codeOut)/float64(max(codeIn, 1)))
			if codeOut > 3*codeIn+1024 {
				t.Errorf("code grew more than 3x")
			}
		})
	}
}

// fuelHostFunctions are buddy:fuel and buddy:kernel for go-sdk.
func fuelHostFunctions() []extism.HostFunction {
	i64 := []extism.ValueType{extism.ValueTypeI64}
	refuel := extism.NewHostFunctionWithStack(RefuelName, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
		if m := meterOf(ctx); m != nil {
			stack[0] = uint64(m.refuel(int64(stack[0])))
			return
		}
		stack[0] = uint64(int64(stack[0]) + 1<<50)
	}, i64, i64)
	settle := extism.NewHostFunctionWithStack(SettleName, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
		if m := meterOf(ctx); m != nil {
			m.settles = append(m.settles, m.granted-int64(stack[0]))
		}
	}, i64, nil)
	oom := extism.NewHostFunctionWithStack(OOMName, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {}, nil, nil)
	fns := []extism.HostFunction{refuel, settle, oom}
	for i := range fns {
		fns[i].SetNamespace(Module)
	}
	kernel := func(name string, params, results []extism.ValueType, f func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64)) {
		h := extism.NewHostFunctionWithStack(name, f, params, results)
		h.SetNamespace(KernelModule)
		fns = append(fns, h)
	}
	kernel("alloc", i64, i64, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
		off, err := p.AllocWithContext(ctx, stack[0])
		if err != nil {
			panic(err)
		}
		stack[0] = off
	})
	kernel("free", i64, nil, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
		if err := p.FreeWithContext(ctx, stack[0]); err != nil {
			panic(err)
		}
	})
	length := func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
		n, err := p.LengthWithContext(ctx, stack[0])
		if err != nil {
			panic(err)
		}
		stack[0] = n
	}
	kernel("length", i64, i64, length)
	kernel("length_unsafe", i64, i64, length)
	return fns
}

func newPlugin(t testing.TB, wasm []byte) *extism.Plugin {
	t.Helper()
	ctx := context.Background()
	p, err := extism.NewPlugin(ctx, extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm, Name: "main"}}},
		extism.PluginConfig{EnableWasi: true}, fuelHostFunctions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(ctx) })
	return p
}

var vowelInput = bytes.Repeat([]byte("The quick brown fox jumps over the lazy dog. "), 128<<10/45)

// TestRealPluginRuns runs count_vowels through go-sdk, original and
// instrumented (with the kernel imports renamed): same output, a
// deterministic count, and a budget stops it.
func TestRealPluginRuns(t *testing.T) {
	wasm := goSDKWasm(t, "count_vowels.wasm")
	if wasm == nil {
		t.Skip("count_vowels.wasm not in the module cache")
	}
	ctx := context.Background()
	_, want, err := newPlugin(t, wasm).CallWithContext(ctx, "count_vowels", vowelInput)
	if err != nil {
		t.Fatal(err)
	}
	inst := newPlugin(t, mustInstrument(t, wasm, pluginOptions))
	var fuel int64
	for i, chunk := range chunks[1:] {
		p := newPlugin(t, mustInstrument(t, wasm, pluginOptions))
		mt := &meter{budget: unlimited, chunk: chunk}
		rc, got, err := p.CallWithContext(withMeter(ctx, mt), "count_vowels", vowelInput)
		if err != nil || rc != 0 || !bytes.Equal(got, want) {
			t.Fatalf("instrumented: rc %d, %q, %v; want %q", rc, got, err, want)
		}
		if i > 0 && mt.consumed() != fuel {
			t.Errorf("chunk %d: consumed %d, first chunk %d", chunk, mt.consumed(), fuel)
		}
		fuel = mt.consumed()
	}
	t.Logf("count_vowels(%d bytes) = %s, %d fuel", len(vowelInput), want, fuel)
	_, _, err = inst.CallWithContext(withMeter(ctx, &meter{budget: fuel / 2, chunk: 1_000_000}), "count_vowels", vowelInput)
	var e *exhausted
	if !errors.As(err, &e) {
		t.Errorf("half the fuel: %v, want exhaustion", err)
	}
}

// BenchmarkPluginOverhead reports instrumented/original time of count_vowels
// as the metric "x" (alternating rounds, best of each).
func BenchmarkPluginOverhead(b *testing.B) {
	wasm := goSDKWasm(b, "count_vowels.wasm")
	if wasm == nil {
		b.Skip("count_vowels.wasm not in the module cache")
	}
	ps := [2]*extism.Plugin{newPlugin(b, wasm), newPlugin(b, mustInstrument(b, wasm, pluginOptions))}
	ctx := withMeter(context.Background(), &meter{budget: unlimited, chunk: 1_000_000})
	best := [2]time.Duration{1 << 62, 1 << 62}
	b.ResetTimer()
	for round := 0; round < 5; round++ {
		for i, p := range ps {
			start := time.Now()
			for n := 0; n < b.N; n++ {
				if _, _, err := p.CallWithContext(ctx, "count_vowels", vowelInput); err != nil {
					b.Fatal(err)
				}
			}
			best[i] = min(best[i], time.Since(start))
		}
	}
	b.ReportMetric(float64(best[1])/float64(best[0]), "x")
}

// BenchmarkPlugin: count_vowels on 128 KiB through go-sdk, original and
// instrumented, on one instance (compiler engine).
func BenchmarkPlugin(b *testing.B) {
	wasm := goSDKWasm(b, "count_vowels.wasm")
	if wasm == nil {
		b.Skip("count_vowels.wasm not in the module cache")
	}
	for _, v := range []struct {
		name string
		wasm []byte
	}{{"original", wasm}, {"instrumented", mustInstrument(b, wasm, pluginOptions)}} {
		b.Run("count_vowels/"+v.name, func(b *testing.B) {
			p := newPlugin(b, v.wasm)
			ctx := withMeter(context.Background(), &meter{budget: unlimited, chunk: 1_000_000})
			b.SetBytes(int64(len(vowelInput)))
			for b.Loop() {
				if _, _, err := p.CallWithContext(ctx, "count_vowels", vowelInput); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
