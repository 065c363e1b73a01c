package fuel

import (
	"context"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Micro-loops, each exported as "run". Benchmarks run the original and the
// instrumented module on wazero's compiler engine as sub-benchmarks
// (BenchmarkRun/<loop>/original and .../instrumented), so the overhead ratio
// can be read off one run.

type workload struct {
	name string
	wasm []byte
	args []uint64
}

func workloads() []workload {
	var ws []workload

	// spin: a register-only xorshift loop.
	m := &wmod{}
	m.exportFunc("run", m.fn(ft(vt(I32), vt(I32)), vt(I32),
		i32c(1), lset(1),
		opLoop, blockEmpty,
		lget(1), lget(1), i32c(13), opI32Shl, opI32Xor, lset(1),
		lget(1), lget(1), i32c(17), opI32ShrU, opI32Xor, lset(1),
		lget(1), lget(1), i32c(5), opI32Shl, opI32Xor, lset(1),
		lget(0), i32c(1), opI32Sub, ltee(0), brIf(0),
		opEnd,
		lget(1)))
	ws = append(ws, workload{"spin", m.bytes(), []uint64{10_000_000}})

	// memloop: load, add, store over 64 KiB, args[0] times.
	m = &wmod{}
	m.memory(1, 1)
	m.exportFunc("run", m.fn(ft(vt(I32), vt(I32)), vt(I32),
		opLoop, blockEmpty,
		i32c(0), lset(1),
		opLoop, blockEmpty,
		lget(1), lget(1), memarg(opI32Load, 2, 0), lget(1), opI32Add, memarg(opI32Store, 2, 0),
		lget(1), i32c(4), opI32Add, ltee(1), i32c(65536), opI32LtU, brIf(0),
		opEnd,
		lget(0), i32c(1), opI32Sub, ltee(0), brIf(0),
		opEnd,
		i32c(0), memarg(opI32Load, 2, 0)))
	ws = append(ws, workload{"memloop", m.bytes(), []uint64{100}})

	// fib: recursion, no loop.
	m = &wmod{}
	m.exportFunc("run", fib(m))
	ws = append(ws, workload{"fib25", m.bytes(), []uint64{25}})

	// switch: a br_table dispatch in a loop.
	m = &wmod{}
	m.exportFunc("run", m.fn(ft(vt(I32), vt(I32)), vt(I32),
		opLoop, blockEmpty,
		opBlock, blockEmpty,
		opBlock, blockEmpty,
		opBlock, blockEmpty,
		opBlock, blockEmpty,
		lget(0), i32c(3), opI32And, brTable(3, 0, 1, 2),
		opEnd,
		lget(1), i32c(3), opI32Add, lset(1), br(2),
		opEnd,
		lget(1), i32c(5), opI32Mul, lset(1), br(1),
		opEnd,
		lget(1), lget(0), opI32Xor, lset(1),
		opEnd,
		lget(0), i32c(1), opI32Sub, ltee(0), brIf(0),
		opEnd,
		lget(1)))
	ws = append(ws, workload{"switch", m.bytes(), []uint64{10_000_000}})

	// calls: a loop calling a small function directly and through a table.
	m = &wmod{}
	m.table(1)
	add := m.fn(ft(vt(I32, I32), vt(I32)), nil, lget(0), lget(1), opI32Add, i32c(0x55), opI32Xor)
	m.elemFuncs(0, add)
	m.exportFunc("run", m.fn(ft(vt(I32), vt(I32)), vt(I32),
		opLoop, blockEmpty,
		lget(1), lget(0), call(add), lset(1),
		lget(1), lget(0), i32c(0), callIndirect(m.typ(ft(vt(I32, I32), vt(I32)))), lset(1),
		lget(0), i32c(1), opI32Sub, ltee(0), brIf(0),
		opEnd,
		lget(1)))
	ws = append(ws, workload{"calls", m.bytes(), []uint64{2_000_000}})
	return ws
}

// TestWorkloadsAgree: the instrumented workloads return what the originals
// return, with a count that does not depend on the chunk.
func TestWorkloadsAgree(t *testing.T) {
	for _, w := range workloads() {
		t.Run(w.name, func(t *testing.T) {
			args := append([]uint64(nil), w.args...)
			if w.name != "fib25" {
				args[0] = min(args[0], 1000)
			}
			ctx, r := newRuntime(t, wazero.NewRuntimeConfigCompiler())
			orig, err := r.Instantiate(ctx, w.wasm)
			if err != nil {
				t.Fatal(err)
			}
			want, err := orig.ExportedFunction("run").Call(ctx, args...)
			if err != nil {
				t.Fatal(err)
			}
			fx := newFixture(t, wazero.NewRuntimeConfigCompiler(), w.wasm, Options{})
			var fuel int64 = -1
			for _, chunk := range chunks {
				mt, got, err := fx.run("run", unlimited, chunk, args...)
				if err != nil || uint32(got[0]) != uint32(want[0]) {
					t.Fatalf("chunk %d: got %v, %v; want %v", chunk, got, err, want)
				}
				if fuel >= 0 && mt.consumed() != fuel {
					t.Errorf("chunk %d: consumed %d, other chunks %d", chunk, mt.consumed(), fuel)
				}
				fuel = mt.consumed()
			}
		})
	}
}

func BenchmarkRun(b *testing.B) {
	for _, w := range workloads() {
		inst := mustInstrument(b, w.wasm, Options{})
		for _, v := range []struct {
			name string
			wasm []byte
		}{{"original", w.wasm}, {"instrumented", inst}} {
			b.Run(w.name+"/"+v.name, func(b *testing.B) {
				ctx, r := newRuntime(b, wazero.NewRuntimeConfigCompiler())
				ctx = withMeter(ctx, &meter{budget: unlimited, chunk: 1_000_000})
				mod, err := r.Instantiate(ctx, v.wasm)
				if err != nil {
					b.Fatal(err)
				}
				fn := mod.ExportedFunction("run")
				for b.Loop() {
					if _, err := fn.Call(ctx, w.args...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkOverhead reports instrumented/original time per workload as the
// metric "x", measured in alternating rounds (best of each) so that load from
// other processes hits both sides alike.
func BenchmarkOverhead(b *testing.B) {
	for _, w := range workloads() {
		b.Run(w.name, func(b *testing.B) {
			ctx, r := newRuntime(b, wazero.NewRuntimeConfigCompiler())
			ctx = withMeter(ctx, &meter{budget: unlimited, chunk: 1_000_000})
			var fns [2]api.Function
			for i, wasm := range [][]byte{w.wasm, mustInstrument(b, w.wasm, Options{})} {
				mod, err := r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
				if err != nil {
					b.Fatal(err)
				}
				fns[i] = mod.ExportedFunction("run")
			}
			b.ResetTimer()
			ratio := overheadRatio(b, ctx, fns, w.args)
			b.ReportMetric(ratio, "x")
		})
	}
}

// overheadRatio calls fns[0] and fns[1] in alternating rounds, b.N calls per
// round side, and returns best(fns[1]) / best(fns[0]).
func overheadRatio(b *testing.B, ctx context.Context, fns [2]api.Function, args []uint64) float64 {
	best := [2]time.Duration{1 << 62, 1 << 62}
	for round := 0; round < 5; round++ {
		for i, fn := range fns {
			start := time.Now()
			for n := 0; n < b.N; n++ {
				if _, err := fn.Call(ctx, args...); err != nil {
					b.Fatal(err)
				}
			}
			best[i] = min(best[i], time.Since(start))
		}
	}
	return float64(best[1]) / float64(best[0])
}

// synthetic returns a module of n functions mixing loops, branches, calls,
// memory and bulk operations.
func synthetic(n int) []byte {
	m := &wmod{}
	h := m.importFunc("env", "h", ft(vt(I32), vt(I32)))
	m.memory(1, 0)
	m.table(1)
	prev := h
	for i := 0; i < n; i++ {
		f := m.fn(ft(vt(I32), vt(I32)), vt(I32, I64),
			opLoop, blockEmpty,
			lget(1), lget(0), call(prev), opI32Add, lset(1),
			opBlock, blockEmpty,
			lget(1), i32c(int32(i)), opI32LtU, brIf(0),
			lget(1), i32c(7), memarg(opI32Load, 2, 16), opI32Add, lset(1),
			opEnd,
			lget(0), opIf, I32, i32c(1), opElse, i32c(2), opEnd, opDrop,
			i32c(0), i32c(0), lget(0), memoryFill,
			lget(0), i32c(1), opI32Sub, ltee(0), brIf(0),
			opEnd,
			lget(1))
		prev = f
	}
	m.exportFunc("run", prev)
	return m.bytes()
}

func BenchmarkInstrument(b *testing.B) {
	cases := []struct {
		name string
		wasm []byte
	}{{"synthetic", synthetic(20000)}}
	for _, p := range []string{"count_vowels.wasm", "std_command.wasm"} {
		if wasm := goSDKWasm(b, p); wasm != nil {
			cases = append(cases, struct {
				name string
				wasm []byte
			}{p, wasm})
		}
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.wasm)))
			for b.Loop() {
				if _, _, err := Instrument(c.wasm, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
