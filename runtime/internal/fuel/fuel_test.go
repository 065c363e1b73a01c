package fuel

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

const unlimited = math.MaxInt64 / 4

var chunks = []int64{7, 7777, 1_000_000, 1 << 40}

// forEngines runs f once per wazero engine.
func forEngines(t *testing.T, f func(t *testing.T, cfg wazero.RuntimeConfig)) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { f(t, e.cfg()) })
	}
}

// expectRun runs export name and checks the results and the fuel settled.
func expectRun(t *testing.T, fx *fixture, name string, wantFuel int64, want []uint64, args ...uint64) {
	t.Helper()
	m, res, err := fx.run(name, unlimited, 1_000_000, args...)
	if err != nil {
		t.Fatalf("%s%v: %v", name, args, err)
	}
	if len(m.settles) != 1 {
		t.Fatalf("%s%v: settle called %d times, want 1", name, args, len(m.settles))
	}
	if got := m.consumed(); got != wantFuel {
		t.Errorf("%s%v: consumed %d, want %d", name, args, got, wantFuel)
	}
	if want != nil && !equalU64(res, want) {
		t.Errorf("%s%v: results %v, want %v", name, args, res, want)
	}
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStraightLineCountIsExact(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		for _, k := range []int{0, 1, 10, 1000, 20000} {
			m := &wmod{}
			code := []any{i32c(1)}
			for i := 0; i < k; i++ {
				code = append(code, i32c(1), opI32Add)
			}
			f := m.fn(ft(nil, vt(I32)), nil, code...)
			m.exportFunc("f", f)
			empty := m.fn(ft(nil, nil), nil)
			m.exportFunc("empty", empty)
			fx := newFixture(t, cfg, m.bytes(), Options{})
			expectRun(t, fx, "f", int64(1+2*k), []uint64{uint64(k + 1)})
			// An empty body still costs 1 (every entry costs at least 1).
			expectRun(t, fx, "empty", 1, nil)
		}
	})
}

// countingLoop: i := 0; loop { i++; if i < n continue }: 1 + 7 per iteration.
func countingLoop(m *wmod) uint32 {
	return m.fn(ft(vt(I32), vt(I32)), vt(I32),
		opLoop, blockEmpty,
		lget(1), i32c(1), opI32Add, ltee(1), lget(0), opI32LtU, brIf(0),
		opEnd,
		lget(1))
}

func TestLoopChargesEveryIteration(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		m.exportFunc("loop", countingLoop(m))
		// A loop whose body leaves a nested block early to continue the loop
		// (wasm-instrument would charge the code after the block on every
		// iteration; the charge here is exact).
		m.exportFunc("continue", continueLoop(m))
		fx := newFixture(t, cfg, m.bytes(), Options{})
		for _, n := range []uint64{0, 1, 5, 1000} {
			iters := max(n, 1)
			expectRun(t, fx, "loop", int64(2+7*iters), []uint64{iters}, n)
		}
		// i=1: 12, i=2: 15, i=3: 12, i=4: 15, i=5: 9, plus the loop opcode.
		expectRun(t, fx, "continue", 64, nil, 5)
		expectRun(t, fx, "continue", continueCost(1000), nil, 1000)
	})
}

// continueLoop: i := 0; loop { i++; if i >= n break; if odd continue; nop;
// nop; continue }, with the continues branching to the loop from inside a
// block. Costs 1 + 12 per odd i, 15 per even i and 9 for the last.
func continueLoop(m *wmod) uint32 {
	return m.fn(ft(vt(I32), nil), vt(I32),
		opLoop, blockEmpty,
		opBlock, blockEmpty,
		lget(1), i32c(1), opI32Add, ltee(1),
		lget(0), opI32GeU, brIf(0), // exit
		lget(1), i32c(1), opI32And, brIf(1), // odd: continue
		opNop, opNop, br(1), // even: continue
		opEnd,
		opNop,
		opEnd)
}

func continueCost(n int64) int64 {
	c := int64(1)
	for i := int64(1); ; i++ {
		if i >= n {
			return c + 9
		}
		c += 12 + 3*(1-i%2)
	}
}

func TestBranchPathsAreExact(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		ifElse := m.fn(ft(vt(I32), vt(I32)), nil,
			lget(0), opIf, I32,
			i32c(10), i32c(1), opI32Add,
			opElse,
			i32c(20),
			opEnd,
			i32c(2), opI32Mul)
		m.exportFunc("ifelse", ifElse)
		ifNoElse := m.fn(ft(vt(I32), vt(I32)), vt(I32),
			lget(0), opIf, blockEmpty,
			i32c(7), lset(1),
			opEnd,
			lget(1))
		m.exportFunc("if", ifNoElse)
		sw := m.fn(ft(vt(I32), vt(I32)), nil,
			opBlock, blockEmpty,
			opBlock, blockEmpty,
			opBlock, blockEmpty,
			lget(0), brTable(2, 0, 1),
			opEnd,
			i32c(100), opReturn,
			opEnd,
			i32c(200), i32c(1), opI32Add, opReturn,
			opEnd,
			i32c(300))
		m.exportFunc("switch", sw)
		// br_if to the function's own label must store the fuel local first.
		brOut := m.fn(ft(vt(I32), vt(I32)), nil,
			i32c(1), lget(0), brIf(0),
			opDrop, i32c(2))
		m.exportFunc("brout", brOut)
		// br_table whose default is the function label.
		tblOut := m.fn(ft(vt(I32), vt(I32)), nil,
			opBlock, I32,
			i32c(5), lget(0), brTable(1, 0), // 0 -> block, else -> function
			opEnd,
			opDrop, i32c(6))
		m.exportFunc("tblout", tblOut)
		fx := newFixture(t, cfg, m.bytes(), Options{})
		expectRun(t, fx, "ifelse", 7, []uint64{22}, 1)
		expectRun(t, fx, "ifelse", 5, []uint64{40}, 0)
		expectRun(t, fx, "if", 5, []uint64{7}, 1)
		expectRun(t, fx, "if", 3, []uint64{0}, 0)
		expectRun(t, fx, "switch", 7, []uint64{100}, 0)
		expectRun(t, fx, "switch", 9, []uint64{201}, 1)
		expectRun(t, fx, "switch", 6, []uint64{300}, 2)
		expectRun(t, fx, "switch", 6, []uint64{300}, 99)
		expectRun(t, fx, "brout", 3, []uint64{1}, 1)
		expectRun(t, fx, "brout", 5, []uint64{2}, 0)
		expectRun(t, fx, "tblout", 6, []uint64{6}, 0)
		expectRun(t, fx, "tblout", 4, []uint64{5}, 1)
	})
}

// fib builds the loop-free recursive fib and returns its index.
func fib(m *wmod) uint32 {
	self := m.numFImp + uint32(len(m.funcs))
	return m.fn(ft(vt(I32), vt(I32)), nil,
		lget(0), i32c(2), opI32LtU, opIf, I32,
		lget(0),
		opElse,
		lget(0), i32c(1), opI32Sub, call(self),
		lget(0), i32c(2), opI32Sub, call(self), opI32Add,
		opEnd)
}

func fibCost(n int) int64 {
	if n < 2 {
		return 5
	}
	return 13 + fibCost(n-1) + fibCost(n-2)
}

func fibValue(n int) uint64 {
	if n < 2 {
		return uint64(n)
	}
	return fibValue(n-1) + fibValue(n-2)
}

// callTree adds f0..fk where fi calls f(i-1) twice; f0 is a nop. fk makes
// 2^k leaf calls with no loop anywhere and costs 3*2^k - 2.
func callTree(m *wmod, k int) uint32 {
	f := m.fn(ft(nil, nil), nil, opNop)
	for i := 1; i <= k; i++ {
		f = m.fn(ft(nil, nil), nil, call(f), call(f))
	}
	return f
}

func TestRecursionIsMeteredAndStopped(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		m.exportFunc("fib", fib(m))
		m.exportFunc("tree10", callTree(m, 10))
		m.exportFunc("tree40", callTree(m, 40))
		fx := newFixture(t, cfg, m.bytes(), Options{})
		for _, n := range []int{0, 1, 2, 10, 20} {
			expectRun(t, fx, "fib", fibCost(n), []uint64{fibValue(n)}, uint64(n))
		}
		expectRun(t, fx, "tree10", 3*1024-2, nil)
		// 2^40 leaf calls would take hours; a budget stops them.
		const budget = 5_000_000
		for _, name := range []string{"fib", "tree40"} {
			var first int64
			for i, chunk := range chunks {
				var args []uint64
				if name == "fib" {
					args = []uint64{40}
				}
				m, _, err := fx.run(name, budget, chunk, args...)
				e := exhaustedIn(err)
				if e == nil {
					t.Fatalf("%s chunk %d: want exhaustion, got %v", name, chunk, err)
				}
				if e.consumed <= budget || e.consumed > budget+13 {
					t.Errorf("%s chunk %d: stopped at %d, want just past %d", name, chunk, e.consumed, budget)
				}
				if i == 0 {
					first = e.consumed
				} else if e.consumed != first {
					t.Errorf("%s chunk %d: stopped at %d, chunk %d stopped at %d", name, chunk, e.consumed, chunks[0], first)
				}
				if len(m.settles) != 0 {
					t.Errorf("%s: settle called on an exhausted call", name)
				}
			}
		}
	})
}

func TestBulkMemoryIsChargedByLength(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		m.memory(1, 1)
		fill := m.fn(ft(vt(I32), nil), nil, i32c(0), i32c(0), lget(0), memoryFill)
		m.exportFunc("fill", fill)
		cp := m.fn(ft(vt(I32), nil), nil, i32c(0), i32c(0), lget(0), memoryCopy)
		m.exportFunc("copy", cp)
		fx := newFixture(t, cfg, m.bytes(), Options{})
		expectRun(t, fx, "fill", 4+1, nil, 0)
		expectRun(t, fx, "fill", 4+101, nil, 6400)
		expectRun(t, fx, "fill", 4+1024+1, nil, 65536)
		expectRun(t, fx, "copy", 4+101, nil, 6400+63)

		// 1 GiB: the charge comes before the bounds check, so a budget below
		// 2^24 stops it before it runs, and the exhaustion point is exact.
		const gib = 1 << 30
		for _, chunk := range chunks {
			_, _, err := fx.run("fill", 1_000_000, chunk, gib)
			if e := exhaustedIn(err); e == nil || e.consumed != 4+1<<24+1 {
				t.Errorf("chunk %d: fill 1 GiB: got %v, want exhaustion at %d", chunk, err, 4+1<<24+1)
			}
		}
		// With enough fuel, the charge passes and the fill traps (1 page).
		mt, _, err := fx.run("fill", 1<<30, 1000, gib)
		if err == nil || !strings.Contains(err.Error(), "out of bounds memory access") {
			t.Errorf("fill 1 GiB on one page: got %v, want out of bounds trap", err)
		}
		if mt.maxSeen != 4+1<<24+1 {
			t.Errorf("fill 1 GiB: host saw %d consumed, want %d", mt.maxSeen, 4+1<<24+1)
		}

		// BulkByteShift changes the unit.
		fx2 := newFixture(t, cfg, m.bytes(), Options{BulkByteShift: 10})
		expectRun(t, fx2, "fill", 4+7, nil, 6400)
		fx3 := newFixture(t, cfg, m.bytes(), Options{BulkByteShift: 32})
		expectRun(t, fx3, "fill", 4+1, nil, 65536)
	})
}

func TestTableOpsAreChargedByLength(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		m.table(4)
		// table.fill(0, null, n) ; table.grow(null, n) drop
		fill := m.fn(ft(vt(I32), nil), nil, i32c(0), 0xd0, FuncRef, lget(0), misc(17, 0))
		m.exportFunc("fill", fill)
		grow := m.fn(ft(vt(I32), vt(I32)), nil, 0xd0, FuncRef, lget(0), misc(15, 0))
		m.exportFunc("grow", grow)
		fx := newFixture(t, cfg, m.bytes(), Options{})
		expectRun(t, fx, "fill", 4+3+1, nil, 3)
		// table.grow costs by the bytes it allocates, not by entries.
		expectRun(t, fx, "grow", 3+1000*TableEntryBytes+1, []uint64{4}, 1000)
	})
}

func TestMemoryGrowIsChargedAndOOMReported(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		m.memory(1, 3)
		grow := m.fn(ft(vt(I32), vt(I32)), nil, lget(0), opMemoryGrow, 0)
		m.exportFunc("grow", grow)
		fx := newFixture(t, cfg, m.bytes(), Options{})
		mt, res, err := fx.run("grow", unlimited, 1000, 2)
		if err != nil || res[0] != 1 || mt.consumed() != 2+2*1024 || mt.ooms != 0 {
			t.Errorf("grow 2: res %v err %v consumed %d ooms %d; want 1, nil, %d, 0", res, err, mt.consumed(), mt.ooms, 2+2*1024)
		}
		mt, res, err = fx.run("grow", unlimited, 1000, 5)
		if err != nil || uint32(res[0]) != 0xffffffff || mt.consumed() != 2+5*1024 || mt.ooms != 1 {
			t.Errorf("grow 5: res %v err %v consumed %d ooms %d; want -1, nil, %d, 1", res, err, mt.consumed(), mt.ooms, 2+5*1024)
		}
		// A huge request is charged (and so refused by the budget) before the
		// runtime looks at it.
		_, _, err = fx.run("grow", 1_000_000, 1000, 0xffffffff)
		if e := exhaustedIn(err); e == nil || e.consumed != 2+0xffffffff*1024 {
			t.Errorf("grow 2^32-1 pages: got %v, want exhaustion at %d", err, int64(2+0xffffffff*1024))
		}
		fx2 := newFixture(t, cfg, m.bytes(), Options{GrowPageCost: 1})
		expectRun(t, fx2, "grow", 2+2, []uint64{1}, 2)
	})
}

func TestCallsAndCallIndirect(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		h := m.importFunc("env", "h", ft(vt(I32), vt(I32)))
		alloc := m.importFunc("extism:host/env", "alloc", ft(vt(I64), vt(I64)))
		m.table(2)
		three := m.fn(ft(nil, vt(I32)), nil, i32c(1), i32c(2), opI32Add) // 3
		four := m.fn(ft(nil, vt(I32)), nil, i32c(4), opNop, opNop, opNop)
		m.elemFuncs(0, three, four)
		ind := m.fn(ft(vt(I32), vt(I32)), nil, lget(0), callIndirect(m.typ(ft(nil, vt(I32)))))
		m.exportFunc("indirect", ind)
		direct := m.fn(ft(nil, vt(I32)), nil, call(three), call(four), opI32Add)
		m.exportFunc("direct", direct)
		host := m.fn(ft(nil, vt(I32)), nil, i32c(41), call(h), i64c(8), call(alloc), opDrop)
		m.exportFunc("host", host)
		m.exportFunc("h", h) // a re-exported import goes through a wrapper too
		opts := Options{
			ImportCost: func(module, name string) int64 {
				switch module + "." + name {
				case "env.h":
					return 100
				case "extism:host/env.alloc":
					return 7
				}
				return 0
			},
			Rename: func(module, name string) string {
				if module == "extism:host/env" {
					return KernelModule
				}
				return ""
			},
		}
		ctx, r := newRuntime(t, cfg)
		_, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().
			WithFunc(func(x int32) int32 { return x + 1 }).Export("h").Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Only buddy:kernel provides alloc: the rename must have happened.
		_, err = r.NewHostModuleBuilder(KernelModule).NewFunctionBuilder().
			WithFunc(func(n int64) int64 { return n * 2 }).Export("alloc").Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out, info, err := Instrument(m.bytes(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if info.Imports[1].Module != "extism:host/env" {
			t.Errorf("Info must describe the original imports, got %+v", info.Imports[1])
		}
		cm, err := r.CompileModule(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		fx := &fixture{ctx: ctx, r: r, cm: cm}
		expectRun(t, fx, "indirect", 2+3, []uint64{3}, 0)
		expectRun(t, fx, "indirect", 2+4, []uint64{4}, 1)
		expectRun(t, fx, "direct", 3+3+4, []uint64{7})
		expectRun(t, fx, "host", 5+100+7, []uint64{42})
		expectRun(t, fx, "h", 100, []uint64{6}, 5)
		_, _, err = fx.run("indirect", unlimited, 1000, 2)
		if err == nil || !strings.Contains(err.Error(), "invalid table access") {
			t.Errorf("indirect out of the table: %v", err)
		}
	})
}

// TestImportsThroughTablesAreCharged: an import that costs fuel and escapes
// into a table (element segment, ref.func in code, funcref global) is called
// through a thunk that charges the same as a direct call.
func TestImportsThroughTablesAreCharged(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		h := m.importFunc("env", "h", ft(vt(I32), vt(I32)))
		free := m.importFunc("env", "free", ft(vt(I32), vt(I32)))
		m.table(4)
		m.elemFuncs(0, h, free)
		g := m.global(FuncRef, false, refFunc(h))
		hT := m.typ(ft(vt(I32), vt(I32)))
		// slot 2 <- ref.func h (in code), slot 3 <- the global
		m.exportFunc("init", m.fn(ft(nil, nil), nil, i32c(2), refFunc(h), 0x26, 0, i32c(3), gget(g), 0x26, 0))
		m.exportFunc("via", m.fn(ft(vt(I32), vt(I32)), nil, i32c(10), lget(0), callIndirect(hT)))
		m.exportFunc("h", h)
		opts := Options{ImportCost: func(module, name string) int64 {
			if name == "h" {
				return 50
			}
			return 0
		}}
		ctx, r := newRuntime(t, cfg)
		if _, err := r.NewHostModuleBuilder("env").
			NewFunctionBuilder().WithFunc(func(x int32) int32 { return x + 1 }).Export("h").
			NewFunctionBuilder().WithFunc(func(x int32) int32 { return x + 2 }).Export("free").
			Instantiate(ctx); err != nil {
			t.Fatal(err)
		}
		cm, err := r.CompileModule(ctx, mustInstrument(t, m.bytes(), opts))
		if err != nil {
			t.Fatal(err)
		}
		mt := &meter{budget: unlimited, chunk: 1000}
		ctx = withMeter(ctx, mt)
		mod, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mod.ExportedFunction("init").Call(ctx); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			slot     uint64
			want     uint64
			wantCost int64
		}{{0, 11, 3 + 50}, {1, 12, 3}, {2, 11, 3 + 50}, {3, 11, 3 + 50}} {
			before := mt.consumed()
			res, err := mod.ExportedFunction("via").Call(ctx, c.slot)
			if err != nil || uint32(res[0]) != uint32(c.want) {
				t.Fatalf("via(%d) = %v, %v", c.slot, res, err)
			}
			if got := mt.consumed() - before; got != c.wantCost {
				t.Errorf("via(%d) cost %d, want %d", c.slot, got, c.wantCost)
			}
		}
		before := mt.consumed()
		if _, err := mod.ExportedFunction("h").Call(ctx, 1); err != nil || mt.consumed()-before != 50 {
			t.Errorf("exported h: %v, cost %d, want 50", err, mt.consumed()-before)
		}
	})
}

func TestMultiValueAndWrapperForwarding(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		pair := m.typ(ft(vt(I32), vt(I32, I32)))
		mv := m.fn(ft(nil, vt(I32, I64)), nil,
			i32c(1),
			opBlock, byte(pair), // [i32] -> [i32 i32]
			i32c(2),
			opEnd,
			opI32Add,
			i64c(5))
		m.exportFunc("mv", mv)
		swap := m.fn(ft(vt(I32, I64, F64), vt(F64, I64, I32)), nil, lget(2), lget(1), lget(0))
		m.exportFunc("swap", swap)
		m.exportFunc("swap2", swap) // one wrapper for both names
		fx := newFixture(t, cfg, m.bytes(), Options{})
		expectRun(t, fx, "mv", 5, []uint64{3, 5})
		f := math.Float64bits(2.5)
		expectRun(t, fx, "swap", 3, []uint64{f, 1 << 40, 7}, 7, 1<<40, f)
		expectRun(t, fx, "swap2", 3, []uint64{f, 1 << 40, 7}, 7, 1<<40, f)
		out := mustInstrument(t, m.bytes(), Options{})
		secs := sectionsOf(t, out)
		if n := countOf(t, secs[secFunction]); n != 4 {
			t.Errorf("%d functions after instrumenting, want 2 + 2 wrappers", n)
		}
	})
}

func TestSettleAccumulatesOnOneInstance(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		m.exportFunc("loop", countingLoop(m))
		ctx, r := newRuntime(t, cfg)
		mt := &meter{budget: unlimited, chunk: 1000}
		ctx = withMeter(ctx, mt)
		mod, err := r.Instantiate(ctx, mustInstrument(t, m.bytes(), Options{}))
		if err != nil {
			t.Fatal(err)
		}
		fn := mod.ExportedFunction("loop")
		for i := 1; i <= 3; i++ {
			if _, err := fn.Call(ctx, 10); err != nil {
				t.Fatal(err)
			}
			if got, want := mt.consumed(), int64(i*72); got != want {
				t.Errorf("after call %d: consumed %d, want %d", i, got, want)
			}
		}
		if mt.refuels != 1 {
			t.Errorf("%d refuels for 216 fuel with chunk 1000, want 1", mt.refuels)
		}
	})
}

func TestDeterministicAcrossChunks(t *testing.T) {
	m := &wmod{}
	m.exportFunc("loop", countingLoop(m))
	m.exportFunc("fib", fib(m))
	m.exportFunc("tree", callTree(m, 12))
	m.exportFunc("continue", continueLoop(m))
	wasm := m.bytes()
	out1 := mustInstrument(t, wasm, Options{})
	out2 := mustInstrument(t, wasm, Options{})
	if !bytes.Equal(out1, out2) {
		t.Fatal("two rewrites of the same module differ")
	}
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		fx := newFixture(t, cfg, wasm, Options{})
		cases := []struct {
			name string
			args []uint64
			want int64
		}{
			{"loop", []uint64{100000}, 2 + 7*100000},
			{"fib", []uint64{18}, fibCost(18)},
			{"tree", nil, 3*4096 - 2},
			{"continue", []uint64{10001}, continueCost(10001)},
		}
		for _, c := range cases {
			for rep := 0; rep < 2; rep++ {
				for _, chunk := range chunks {
					mt, _, err := fx.run(c.name, unlimited, chunk, c.args...)
					if err != nil {
						t.Fatal(err)
					}
					if mt.consumed() != c.want {
						t.Errorf("%s chunk %d: consumed %d, want %d", c.name, chunk, mt.consumed(), c.want)
					}
				}
			}
			// The exhaustion point does not depend on the chunk.
			for _, budget := range []int64{0, 1, 100, c.want / 3, c.want - 1} {
				var at int64 = -1
				for _, chunk := range chunks {
					_, _, err := fx.run(c.name, budget, chunk, c.args...)
					e := exhaustedIn(err)
					if e == nil {
						t.Fatalf("%s budget %d chunk %d: want exhaustion, got %v", c.name, budget, chunk, err)
					}
					if at >= 0 && e.consumed != at {
						t.Errorf("%s budget %d: chunk %d stopped at %d, chunk %d at %d", c.name, budget, chunk, e.consumed, chunks[0], at)
					}
					// Checked at every loop header, call and entry: past the
					// budget by less than one iteration or block.
					if e.consumed <= budget || e.consumed > budget+15 {
						t.Errorf("%s budget %d chunk %d: stopped at %d", c.name, budget, chunk, e.consumed)
					}
					at = e.consumed
				}
			}
			// Exactly enough fuel succeeds.
			for _, chunk := range chunks {
				if _, _, err := fx.run(c.name, c.want, chunk, c.args...); err != nil {
					t.Errorf("%s with budget = its cost, chunk %d: %v", c.name, chunk, err)
				}
			}
		}
	})
}

// TestElementSegmentsKeepOriginals checks all eight element segment forms, a
// funcref global and ref.func: each must still name the original function
// (not a wrapper, not a shifted neighbour) after instrumenting.
func TestElementSegmentsKeepOriginals(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		m.importFunc("env", "h", ft(vt(I32), vt(I32)))
		retT := ft(nil, vt(I32))
		var fs []uint32
		for i := 0; i < 9; i++ {
			fs = append(fs, m.fn(retT, nil, i32c(int32(100+i))))
		}
		m.table(16)
		m.table(16)
		expr := func(f uint32) []byte { return asm(refFunc(f), opEnd) }
		off := func(o int32) []byte { return asm(i32c(o), opEnd) }
		seg := func(parts ...any) { m.elems = append(m.elems, asm(parts...)) }
		seg(0, off(0), 1, appendU32(nil, fs[0]))                   // 0: active, table 0
		seg(1, 0, 1, appendU32(nil, fs[1]))                        // 1: passive, funcidx
		seg(2, 1, off(0), 0, 1, appendU32(nil, fs[2]))             // 2: active, table 1
		seg(3, 0, 1, appendU32(nil, fs[3]))                        // 3: declarative, funcidx
		seg(4, off(4), 1, expr(fs[4]))                             // 4: active, exprs
		seg(5, FuncRef, 2, expr(fs[5]), asm(0xd0, FuncRef, opEnd)) // 5: passive, exprs
		seg(6, 1, off(6), FuncRef, 1, expr(fs[6]))                 // 6: active table 1, exprs
		seg(7, FuncRef, 1, expr(fs[7]))                            // 7: declarative, exprs
		g := m.global(FuncRef, false, refFunc(fs[8]))              // funcref global
		ti := m.typ(retT)
		callAt := func(table byte) uint32 {
			return m.fn(ft(vt(I32), vt(I32)), nil, lget(0), opCallIndirect, byte(ti), table)
		}
		m.exportFunc("t0", callAt(0))
		m.exportFunc("t1", callAt(1))
		// init: table.init passive segments 1 and 5 into table 0 at 8 and 10,
		// put ref.func of fs[3] and fs[7] (declared) at 12 and 13, and the
		// global at 14.
		init := m.fn(ft(nil, nil), nil,
			i32c(8), i32c(0), i32c(1), misc(12, 1, 0),
			i32c(10), i32c(0), i32c(2), misc(12, 5, 0),
			i32c(12), refFunc(fs[3]), 0x26, 0,
			i32c(13), refFunc(fs[7]), 0x26, 0,
			i32c(14), gget(g), 0x26, 0)
		m.exportFunc("init", init)
		m.dataCount = true
		m.exportFunc("f0", fs[0]) // exported and in a table: the table keeps the original
		ctx, r := newRuntime(t, cfg)
		_, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().
			WithFunc(func(x int32) int32 { return x }).Export("h").Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cm, err := r.CompileModule(ctx, mustInstrument(t, m.bytes(), Options{}))
		if err != nil {
			t.Fatal(err)
		}
		mt := &meter{budget: unlimited, chunk: 1000}
		ctx = withMeter(ctx, mt)
		mod, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mod.ExportedFunction("init").Call(ctx); err != nil {
			t.Fatal(err)
		}
		check := func(fn string, slot uint64, want uint64) {
			t.Helper()
			before := len(mt.settles)
			res, err := mod.ExportedFunction(fn).Call(ctx, slot)
			if err != nil || res[0] != want {
				t.Errorf("%s[%d] = %v, %v; want %d", fn, slot, res, err, want)
			}
			if len(mt.settles) != before+1 {
				t.Errorf("%s[%d]: the table entry must not be a wrapper (settles %d -> %d)", fn, slot, before, len(mt.settles))
			}
		}
		check("t0", 0, 100)
		check("t0", 8, 101)
		check("t1", 0, 102)
		check("t0", 12, 103)
		check("t0", 4, 104)
		check("t0", 10, 105)
		check("t1", 6, 106)
		check("t0", 13, 107)
		check("t0", 14, 108)
		if res, err := mod.ExportedFunction("f0").Call(ctx); err != nil || res[0] != 100 {
			t.Errorf("f0() = %v, %v", res, err)
		}
	})
}

func TestImportedGlobalsAndMemoryKeepIndices(t *testing.T) {
	// global.get of an imported and of a defined global, with the fuel global
	// appended after them.
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		gi := m.importGlobal("env", "g", I32, false)
		gd := m.global(I32, true, i32c(5))
		f := m.fn(ft(nil, vt(I32)), nil, gget(gi), gget(gd), opI32Add, i32c(1), gset(gd), gget(gd), opI32Add)
		m.exportFunc("f", f)
		ctx, r := newRuntime(t, cfg)
		env := &wmod{}
		env.global(I32, false, i32c(37))
		env.export("g", KindGlobal, 0)
		if _, err := r.InstantiateWithConfig(ctx, env.bytes(), wazero.NewModuleConfig().WithName("env")); err != nil {
			t.Fatal(err)
		}
		cm, err := r.CompileModule(ctx, mustInstrument(t, m.bytes(), Options{}))
		if err != nil {
			t.Fatal(err)
		}
		expectRun(t, &fixture{ctx, r, cm}, "f", 7, []uint64{43})
	})
}

// TestDeadCode: code after br, return and unreachable stays valid and is not
// charged.
func TestDeadCode(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		f := m.fn(ft(vt(I32), vt(I32)), nil,
			opBlock, I32,
			lget(0), opIf, blockEmpty,
			i32c(1), br(1),
			i32c(9), opDrop, opLoop, blockEmpty, opNop, opEnd, // dead
			opEnd,
			i32c(2), opReturn,
			opI32Add, opUnreachable, opDrop, // dead
			opEnd)
		m.exportFunc("f", f)
		trap := m.fn(ft(nil, nil), nil, opUnreachable, opNop, opNop)
		m.exportFunc("trap", trap)
		fx := newFixture(t, cfg, m.bytes(), Options{})
		expectRun(t, fx, "f", 5, []uint64{1}, 1)
		expectRun(t, fx, "f", 5, []uint64{2}, 0)
		mt, _, err := fx.run("trap", unlimited, 1000)
		if err == nil || !strings.Contains(err.Error(), "unreachable") || mt.maxSeen != 1 {
			t.Errorf("trap: %v, charged %d, want unreachable trap and 1", err, mt.maxSeen)
		}
	})
}

func TestSynthesizedSections(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		// Nothing but a memory: type, import and global sections are added.
		m := &wmod{}
		m.memory(1, 0)
		out := mustInstrument(t, m.bytes(), Options{})
		ctx, r := newRuntime(t, cfg)
		if _, err := r.Instantiate(ctx, out); err != nil {
			t.Fatal(err)
		}
		// Only a re-exported import: function and code sections are added.
		m = &wmod{}
		h := m.importFunc("env", "h", ft(vt(I32), vt(I32)))
		m.exportFunc("h", h)
		if _, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().
			WithFunc(func(x int32) int32 { return x * 3 }).Export("h").Instantiate(ctx); err != nil {
			t.Fatal(err)
		}
		cm, err := r.CompileModule(ctx, mustInstrument(t, m.bytes(), Options{}))
		if err != nil {
			t.Fatal(err)
		}
		expectRun(t, &fixture{ctx, r, cm}, "h", 0, []uint64{9}, 3)
		// Empty module.
		if _, err := r.CompileModule(ctx, mustInstrument(t, (&wmod{}).bytes(), Options{})); err != nil {
			t.Fatal(err)
		}
	})
}

// sectionsOf splits a module into sections: id -> contents (custom sections
// under their name with id 0 ignored; see customsOf).
func sectionsOf(t *testing.T, wasm []byte) map[byte][]byte {
	t.Helper()
	out := map[byte][]byte{}
	r := &reader{b: wasm, pos: 8, end: len(wasm), fn: -1}
	for !r.done() {
		id, _ := r.byte()
		n, err := r.u32()
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.bytes(int(n))
		if err != nil {
			t.Fatal(err)
		}
		if id != 0 {
			out[id] = c
		}
	}
	return out
}

func customsOf(t *testing.T, wasm []byte) []string {
	t.Helper()
	var names []string
	r := &reader{b: wasm, pos: 8, end: len(wasm), fn: -1}
	for !r.done() {
		id, _ := r.byte()
		n, _ := r.u32()
		c, err := r.bytes(int(n))
		if err != nil {
			t.Fatal(err)
		}
		if id == 0 {
			cr := &reader{b: c, end: len(c), fn: -1}
			name, err := cr.name()
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
	}
	return names
}

func countOf(t *testing.T, content []byte) int {
	r := &reader{b: content, end: len(content), fn: -1}
	n, err := r.u32()
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func nameSectionPayload(funcs map[uint32]string, locals map[uint32]map[uint32]string, labels bool) []byte {
	var p []byte
	p = append(p, 0)
	mn := appendName(nil, "mod")
	p = appendU32(p, uint32(len(mn)))
	p = append(p, mn...)
	sub := func(id byte, keys []uint32, entry func(k uint32) []byte) {
		c := appendU32(nil, uint32(len(keys)))
		for _, k := range keys {
			c = appendU32(c, k)
			c = append(c, entry(k)...)
		}
		p = append(p, id)
		p = appendU32(p, uint32(len(c)))
		p = append(p, c...)
	}
	sorted := func(mp map[uint32]string) []uint32 {
		var ks []uint32
		for k := range mp {
			ks = append(ks, k)
		}
		for i := range ks {
			for j := i + 1; j < len(ks); j++ {
				if ks[j] < ks[i] {
					ks[i], ks[j] = ks[j], ks[i]
				}
			}
		}
		return ks
	}
	sub(1, sorted(funcs), func(k uint32) []byte { return appendName(nil, funcs[k]) })
	var lk []uint32
	for k := range locals {
		lk = append(lk, k)
	}
	sub(2, lk, func(k uint32) []byte {
		ks := sorted(locals[k])
		c := appendU32(nil, uint32(len(ks)))
		for _, l := range ks {
			c = appendU32(c, l)
			c = appendName(c, locals[k][l])
		}
		return c
	})
	if labels {
		p = append(p, 3, 1, 0) // an empty label subsection
	}
	return p
}

func TestNamesAndCustomSections(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		h := m.importFunc("env", "h", ft(nil, nil))
		ok := m.fn(ft(nil, nil), nil, call(h))
		victim := m.fn(ft(nil, nil), nil, opUnreachable)
		caller := m.fn(ft(nil, nil), nil, call(ok), call(victim))
		m.exportFunc("run", caller)
		m.customs = []wcustom{
			{".debug_info", []byte{1, 2, 3}},
			{"producers", []byte{0}},
			{"name", nameSectionPayload(
				map[uint32]string{h: "host_h", ok: "ok_fn", victim: "victim_fn", caller: "caller_fn", 99: "ghost"},
				map[uint32]map[uint32]string{victim: {0: "x"}}, true)},
		}
		out := mustInstrument(t, m.bytes(), Options{})
		got := strings.Join(customsOf(t, out), ",")
		if got != "producers,name" {
			t.Errorf("custom sections after instrumenting: %s, want producers,name", got)
		}
		ctx, r := newRuntime(t, cfg)
		if _, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().
			WithFunc(func() {}).Export("h").Instantiate(ctx); err != nil {
			t.Fatal(err)
		}
		cm, err := r.CompileModule(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		if cm.Name() != "mod" {
			t.Errorf("module name %q, want mod", cm.Name())
		}
		_, _, err = (&fixture{ctx, r, cm}).run("run", unlimited, 1000)
		if err == nil {
			t.Fatal("want a trap")
		}
		// The stack trace names the trapping function and its caller.
		msg := err.Error()
		if !strings.Contains(msg, ".victim_fn(") || !strings.Contains(msg, ".caller_fn(") {
			t.Errorf("trap trace does not name the original functions:\n%s", msg)
		}
	})
}

func TestInspect(t *testing.T) {
	m := &wmod{}
	m.importFunc("extism:host/env", "alloc", ft(vt(I64), vt(I64)))
	m.importMemory("env", "mem", 2)
	m.importGlobal("env", "g", I32, true)
	f := m.fn(ft(vt(I32, F64), vt(I64)), nil, i64c(1))
	m.exportFunc("run", f)
	m.export("g", KindGlobal, 0)
	m.start = new(uint32)
	*m.start = 1
	info, err := Inspect(m.bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := Info{
		Imports: []Import{
			{Module: "extism:host/env", Name: "alloc", Kind: KindFunc, Type: ft(vt(I64), vt(I64))},
			{Module: "env", Name: "mem", Kind: KindMemory},
			{Module: "env", Name: "g", Kind: KindGlobal},
		},
		Exports: []Export{
			{Name: "run", Kind: KindFunc, Type: ft(vt(I32, F64), vt(I64))},
			{Name: "g", Kind: KindGlobal},
		},
		HasStart: true, MemoryMin: 2, HasMemory: true,
	}
	if !infoEqual(*info, want) {
		t.Errorf("Inspect = %+v\nwant %+v", *info, want)
	}
	// Instrument refuses the start section Inspect reports.
	if _, _, err := Instrument(m.bytes(), Options{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Instrument with a start section: %v, want ErrUnsupported", err)
	}
	m2 := &wmod{}
	m2.memory(3, 70)
	info, err = Inspect(m2.bytes())
	if err != nil || info.MemoryMin != 3 || info.MemoryMax != 70 || !info.HasMemoryMax {
		t.Errorf("Inspect memory limits: %+v, %v", info, err)
	}
}

func infoEqual(a, b Info) bool {
	if len(a.Imports) != len(b.Imports) || len(a.Exports) != len(b.Exports) {
		return false
	}
	for i := range a.Imports {
		x, y := a.Imports[i], b.Imports[i]
		if x.Module != y.Module || x.Name != y.Name || x.Kind != y.Kind || !x.Type.Equal(y.Type) {
			return false
		}
	}
	for i := range a.Exports {
		x, y := a.Exports[i], b.Exports[i]
		if x.Name != y.Name || x.Kind != y.Kind || !x.Type.Equal(y.Type) {
			return false
		}
	}
	return a.HasStart == b.HasStart && a.MemoryMin == b.MemoryMin && a.MemoryMax == b.MemoryMax &&
		a.HasMemoryMax == b.HasMemoryMax && a.HasMemory == b.HasMemory
}

func TestOptionsOutOfRange(t *testing.T) {
	m := &wmod{}
	m.importFunc("env", "h", ft(nil, nil))
	wasm := m.bytes()
	for _, o := range []Options{
		{GrowPageCost: -1},
		{GrowPageCost: MaxGrowPageCost + 1},
		{BulkByteShift: 33},
		{ImportCost: func(string, string) int64 { return -1 }},
		{ImportCost: func(string, string) int64 { return MaxImportCost + 1 }},
		{Rename: func(string, string) string { return Module }},
		{Rename: func(string, string) string { return "\xff" }},
	} {
		if _, _, err := Instrument(wasm, o); !errors.Is(err, ErrOptions) {
			t.Errorf("Instrument(%+v) = %v, want ErrOptions", o, err)
		}
	}
	if _, _, err := Instrument(wasm, Options{GrowPageCost: MaxGrowPageCost, BulkByteShift: 32,
		ImportCost: func(string, string) int64 { return MaxImportCost }}); err != nil {
		t.Errorf("options at their limits: %v", err)
	}
}

// compileErr compiles wasm with wazero (V2 features) and returns the error.
func compileErr(wasm []byte) error {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2))
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, wasm)
	if err == nil {
		cm.Close(ctx)
	}
	return err
}

// TestLoopsAndBranchDepths: loops get a refill path (three frames around
// them) unless they have params, so every branch out of a loop is renumbered.
// Branches of every kind out of nested loops, and a loop with params, must
// still go where they went and cost what they cost.
func TestLoopsAndBranchDepths(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		// sum = 0; for i in n..1 { for j in i..1 { if j == 3 break outer via
		// br_table; sum += j } } -- with br, br_if and br_table crossing both
		// loops, a block result carried out of the loops, and a return.
		nested := m.fn(ft(vt(I32), vt(I32)), vt(I32, I32), // n; i, sum
			opBlock, I32, // $out
			lget(0), lset(1),
			opLoop, blockEmpty, // $L1
			lget(1), opI32Eqz, opIf, blockEmpty,
			lget(2), br(2), // i == 0: carry sum out of $out
			opEnd,
			lget(1), lset(0), // j := i (reuses param 0)
			opBlock, blockEmpty, // $B2
			opLoop, blockEmpty, // $L2
			lget(0), i32c(100), opI32Eq, opIf, blockEmpty,
			i32c(-1), opReturn, // never taken
			opEnd,
			lget(2), lget(0), opI32Add, lset(2),
			lget(0), i32c(1), opI32Sub, ltee(0),
			opI32Eqz, brTable(1, 0), // j != 0: continue $L2; j == 0: leave $B2
			opEnd, // $L2
			opEnd, // $B2
			lget(1), i32c(1), opI32Sub, lset(1),
			lget(2), lget(2), i32c(1000), opI32GeU, brIf(1), opDrop, // sum >= 1000: out
			br(0),
			opEnd, // $L1
			i32c(7),
			opEnd, // $out
		)
		m.exportFunc("nested", nested)
		// A loop with params is not wrapped: [i32] -> [i32] loop counting down.
		cnt := m.typ(ft(vt(I32), vt(I32)))
		withParams := m.fn(ft(vt(I32), vt(I32)), nil,
			lget(0),
			opLoop, byte(cnt),
			i32c(1), opI32Sub, ltee(0), lget(0), brIf(0),
			opEnd)
		m.exportFunc("params", withParams)
		ctx, r := newRuntime(t, cfg)
		orig, err := r.InstantiateWithConfig(ctx, m.bytes(), wazero.NewModuleConfig().WithName("orig"))
		if err != nil {
			t.Fatal(err)
		}
		fx := newFixture(t, cfg, m.bytes(), Options{})
		for _, n := range []uint64{0, 1, 2, 5, 9} {
			want, err := orig.ExportedFunction("nested").Call(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			var fuel int64 = -1
			for _, chunk := range chunks {
				mt, got, err := fx.run("nested", unlimited, chunk, n)
				if err != nil || uint32(got[0]) != uint32(want[0]) {
					t.Fatalf("nested(%d) chunk %d = %v, %v; want %v", n, chunk, got, err, want)
				}
				if fuel >= 0 && mt.consumed() != fuel {
					t.Errorf("nested(%d): chunk %d consumed %d, others %d", n, chunk, mt.consumed(), fuel)
				}
				fuel = mt.consumed()
			}
		}
		// params(n): lget, loop, then 5 per iteration.
		for _, n := range []uint64{1, 2, 10} {
			expectRun(t, fx, "params", int64(2+5*n), []uint64{0}, n)
		}
	})
}

// TestReentrantImports: a host function that calls back into the module.
// With ReentrantImports the inner call's fuel is counted exactly; without it
// the fuel kept in the caller's local and the stale global disagree and the
// count is wrong (the bookkeeping the option pays for).
func TestReentrantImports(t *testing.T) {
	m := &wmod{}
	back := m.importFunc("env", "back", ft(nil, nil))
	inner := m.fn(ft(nil, nil), nil, opNop, opNop, opNop, opNop, opNop, opNop, opNop, opNop, opNop, opNop) // 10
	m.exportFunc("inner", inner)
	m.exportFunc("outer", m.fn(ft(nil, nil), nil, call(back), opNop)) // 2
	for _, c := range []struct {
		reentrant bool
		want      int64 // -1: anything but exact
	}{{true, 12}, {false, -1}} {
		ctx, r := newRuntime(t, wazero.NewRuntimeConfigInterpreter())
		if _, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().
			WithFunc(func(ctx context.Context, caller api.Module) {
				if _, err := caller.ExportedFunction("inner").Call(ctx); err != nil {
					panic(err)
				}
			}).Export("back").Instantiate(ctx); err != nil {
			t.Fatal(err)
		}
		cm, err := r.CompileModule(ctx, mustInstrument(t, m.bytes(), Options{ReentrantImports: c.reentrant}))
		if err != nil {
			t.Fatal(err)
		}
		mt, _, err := (&fixture{ctx, r, cm}).run("outer", unlimited, 1000)
		if err != nil {
			t.Fatal(err)
		}
		switch got := mt.consumed(); {
		case c.want >= 0 && got != c.want:
			t.Errorf("ReentrantImports=%v: consumed %d, want %d", c.reentrant, got, c.want)
		case c.want < 0 && got == 12:
			t.Errorf("ReentrantImports=false counted re-entrant work exactly: the option would be useless")
		}
	}
}

// TestEveryInfiniteLoopIsStopped: loops of every shape, including loops with
// params (no refill path) whose only call goes to the host or through a
// table, must be stopped by the budget.
func TestEveryInfiniteLoopIsStopped(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		host := m.importFunc("env", "noop", ft(nil, nil))
		m.table(2)
		leaf := m.fn(ft(nil, nil), nil)
		m.elemFuncs(0, host, leaf)
		p := m.typ(ft(vt(I32), nil))
		loops := map[string][]any{
			"plain":              {opLoop, blockEmpty, br(0), opEnd},
			"params":             {i32c(0), opLoop, byte(p), opDrop, i32c(0), br(0), opEnd},
			"params+host":        {i32c(0), opLoop, byte(p), opDrop, call(host), i32c(0), br(0), opEnd},
			"params+leaf":        {i32c(0), opLoop, byte(p), opDrop, call(leaf), i32c(0), br(0), opEnd},
			"params+indirect":    {i32c(0), opLoop, byte(p), opDrop, i32c(0), callIndirect(m.typ(ft(nil, nil))), i32c(0), br(0), opEnd},
			"params+leaf+host":   {i32c(0), opLoop, byte(p), opDrop, call(leaf), call(host), i32c(0), br(0), opEnd},
			"params+host+leaf":   {i32c(0), opLoop, byte(p), opDrop, call(host), call(leaf), i32c(0), br(0), opEnd},
			"nested in a block":  {opBlock, blockEmpty, opLoop, blockEmpty, i32c(1), brIf(0), opEnd, opEnd},
			"host in plain loop": {opLoop, blockEmpty, call(host), br(0), opEnd},
		}
		for name, code := range loops {
			m.exportFunc(name, m.fn(ft(nil, nil), nil, code...))
		}
		// A loop the meter misses must fail the test, not hang it.
		ctx, r := newRuntime(t, cfg.WithCloseOnContextDone(true))
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if _, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().
			WithFunc(func() {}).Export("noop").Instantiate(ctx); err != nil {
			t.Fatal(err)
		}
		cm, err := r.CompileModule(ctx, mustInstrument(t, m.bytes(), Options{}))
		if err != nil {
			t.Fatal(err)
		}
		fx := &fixture{ctx, r, cm}
		for name := range loops {
			_, _, err := fx.run(name, 100_000, 1000)
			if e := exhaustedIn(err); e == nil || e.consumed > 100_000+10 {
				t.Errorf("%s: %v, want exhaustion just past 100000", name, err)
			}
		}
	})
}
