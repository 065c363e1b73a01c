package fuel

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// Hostile modules are generated here rather than committed: some are
// megabytes.

// tables returns a module with n funcref tables of min entries each.
func tablesModule(n int, min uint32) []byte {
	m := &wmod{}
	for i := 0; i < n; i++ {
		m.tables = append(m.tables, appendU32([]byte{byte(FuncRef), 0}, min))
	}
	return m.bytes()
}

// nested returns a function body of n nested structures of kind op, with a
// br_if to the outermost label in each if branches (which is what makes
// metered code costly to compile).
func nestedModule(n int, op byte, branches bool) []byte {
	var body []byte
	for i := 0; i < n; i++ {
		if op == opIf {
			body = append(body, lget(0)...)
		}
		body = append(body, op, blockEmpty)
		if branches {
			body = append(body, lget(0)...)
			body = append(body, brIf(uint32(i))...)
		}
	}
	for i := 0; i < n; i++ {
		body = append(body, opEnd)
	}
	m := &wmod{}
	m.exportFunc("f", m.fn(ft(vt(I32), nil), nil, body))
	return m.bytes()
}

func brTableModule(perTable, tables, funcs int) []byte {
	m := &wmod{}
	labels := make([]uint32, perTable-1)
	for f := 0; f < funcs; f++ {
		var body []byte
		for i := 0; i < tables; i++ {
			body = append(body, opBlock, blockEmpty)
			body = append(body, lget(0)...)
			body = append(body, brTable(0, labels...)...)
			body = append(body, opEnd)
		}
		m.fn(ft(vt(I32), nil), nil, body)
	}
	return m.bytes()
}

func globalsModule(n int) []byte {
	m := &wmod{}
	for i := 0; i < n; i++ {
		m.global(I32, false, i32c(0))
	}
	return m.bytes()
}

func funcsModule(n int) []byte {
	m := &wmod{}
	for i := 0; i < n; i++ {
		m.fn(ft(nil, nil), nil)
	}
	return m.bytes()
}

func elemModule(segments, perSegment int) []byte {
	m := &wmod{}
	f := m.fn(ft(nil, nil), nil)
	m.table(1)
	for i := 0; i < segments; i++ {
		// passive segments: flags 1, elemkind 0, function indices
		b := appendU32([]byte{1, 0}, uint32(perSegment))
		for j := 0; j < perSegment; j++ {
			b = appendU32(b, f)
		}
		m.elems = append(m.elems, b)
	}
	return m.bytes()
}

func dataModule(segments int) []byte {
	m := &wmod{}
	m.memory(1, 0)
	for i := 0; i < segments; i++ {
		m.datas = append(m.datas, []byte{1, 0}) // passive, empty
	}
	return m.bytes()
}

func bodyModule(size int) []byte {
	body := bytes.Repeat([]byte{opNop}, size)
	m := &wmod{}
	m.fn(ft(nil, nil), nil, body)
	return m.bytes()
}

func namesModule(n int) []byte {
	m := &wmod{}
	f := m.fn(ft(nil, nil), nil)
	payload := appendU32(nil, uint32(n))
	for i := 0; i < n; i++ {
		payload = appendU32(payload, f)
		payload = appendName(payload, "")
	}
	sub := append([]byte{1}, appendU32(nil, uint32(len(payload)))...)
	m.customs = append(m.customs, wcustom{"name", append(sub, payload...)})
	return m.bytes()
}

type limitCase struct {
	name  string
	wasm  func() []byte
	err   error  // nil: accepted
	limit string // named in the error
}

func limitCases() []limitCase {
	return []limitCase{
		{"1,000 tables of 2^27 entries", func() []byte { return tablesModule(1000, 1<<27) }, ErrMemoryLimit, "MaxTableEntries"},
		{"1,000 tables of 1 entry", func() []byte { return tablesModule(1000, 1) }, ErrTooLarge, "MaxTables"},
		{"one table of 2^27 entries", func() []byte { return tablesModule(1, 1<<27) }, ErrMemoryLimit, "MaxTableEntries"},
		{"tables over the entries cap together", func() []byte { return tablesModule(2, MaxTableEntries/2+1) }, ErrMemoryLimit, "MaxTableEntries"},
		{"tables at the caps", func() []byte { return tablesModule(MaxTables, MaxTableEntries/MaxTables) }, nil, ""},
		{"10^6 globals", func() []byte { return globalsModule(1_000_000) }, ErrTooLarge, "MaxGlobals"},
		{"globals at the cap", func() []byte { return globalsModule(MaxGlobals) }, nil, ""},
		{"functions over the cap", func() []byte { return funcsModule(MaxFunctions + 1) }, ErrTooLarge, "MaxFunctions"},
		{"element segments over the cap", func() []byte { return elemModule(MaxElemSegments+1, 0) }, ErrTooLarge, "MaxElemSegments"},
		{"element entries over the cap", func() []byte { return elemModule(2, MaxElemEntries/2+1) }, ErrTooLarge, "MaxElemEntries"},
		{"data segments over the cap", func() []byte { return dataModule(MaxDataSegments + 1) }, ErrTooLarge, "MaxDataSegments"},
		{"function body over the cap", func() []byte { return bodyModule(MaxBodyBytes) }, ErrTooLarge, "MaxBodyBytes"},
		{"module over the cap", func() []byte { return bodyModule(MaxModuleBytes) }, ErrTooLarge, "MaxModuleBytes"},
		{"8,000 nested blocks", func() []byte { return nestedModule(8000, opBlock, false) }, ErrTooLarge, "MaxNesting"},
		{"nesting at the cap", func() []byte { return nestedModule(MaxNesting, opBlock, false) }, nil, ""},
		{"8,000 nested blocks with branches", func() []byte { return nestedModule(8000, opBlock, true) }, ErrTooLarge, "MaxFunctionNestingWeight"},
		{"2,000 nested loops with branches", func() []byte { return nestedModule(2000, opLoop, true) }, ErrTooLarge, "MaxFunctionNestingWeight"},
		{"3,000 nested ifs with branches", func() []byte { return nestedModule(3000, opIf, true) }, ErrTooLarge, "MaxFunctionNestingWeight"},
		{"1,000 nested loops with branches", func() []byte { return nestedModule(1000, opLoop, true) }, nil, ""},
		{"many functions of 700 nested loops", func() []byte {
			m := &wmod{}
			var body []byte
			for i := 0; i < 700; i++ {
				body = append(body, opLoop, blockEmpty)
			}
			body = append(body, bytes.Repeat([]byte{opEnd}, 700)...)
			for i := 0; i < 20; i++ {
				m.fn(ft(nil, nil), nil, body)
			}
			return m.bytes()
		}, ErrTooLarge, "MaxNestingWeight"},
		{"br_table of 200,000 targets", func() []byte { return brTableModule(200_000, 1, 1) }, ErrTooLarge, "MaxBrTableTargets"},
		{"br_table at the cap", func() []byte { return brTableModule(MaxBrTableTargets, 1, 1) }, nil, ""},
		{"br_tables of one function over the cap", func() []byte { return brTableModule(MaxBrTableTargets/4, 5, 1) }, ErrTooLarge, "MaxBrTableTargets"},
		{"br_tables of the module over the cap", func() []byte { return brTableModule(MaxBrTableTargets, 1, MaxModuleBrTableTargets/MaxBrTableTargets+1) }, ErrTooLarge, "MaxModuleBrTableTargets"},
		{"names over the cap", func() []byte { return namesModule(MaxNameEntries + 1) }, ErrTooLarge, "MaxNameEntries"},
	}
}

// TestLimitsRefuseBeforeCompiling: every cap refuses its class of module in
// Inspect and Instrument, with an error naming the limit and the value, and
// accepts a module at the cap.
func TestLimitsRefuseBeforeCompiling(t *testing.T) {
	for _, c := range limitCases() {
		t.Run(c.name, func(t *testing.T) {
			wasm := c.wasm()
			_, err := Inspect(wasm)
			_, _, ierr := Instrument(wasm, Options{})
			if c.err == nil {
				if err != nil || ierr != nil {
					t.Fatalf("Inspect: %v, Instrument: %v; want both to accept", err, ierr)
				}
				return
			}
			for _, e := range []error{err, ierr} {
				if !errors.Is(e, c.err) {
					t.Fatalf("got %v, want %v", e, c.err)
				}
				if msg := e.Error(); !strings.Contains(msg, c.limit+")") || !strings.Contains(msg, "over the limit of") {
					t.Errorf("error %q does not name the limit %s and the value", msg, c.limit)
				}
			}
		})
	}
}

// TestHostileModulesFailFast: the issue's examples are refused with little
// allocation (Inspect allocates nothing per declared entry).
func TestHostileModulesFailFast(t *testing.T) {
	cases := map[string][]byte{
		"1,000 tables of 2^27": tablesModule(1000, 1<<27),
		"10^6 globals":         globalsModule(1_000_000),
		"8,000 nested blocks":  nestedModule(8000, opBlock, false),
		"br_table of 200,000":  brTableModule(200_000, 1, 1),
	}
	for name, wasm := range cases {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Inspect(wasm)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
			t.Errorf("%s (%d bytes): Inspect allocated %d bytes before refusing", name, len(wasm), d)
		}
	}
}

func TestInfoReportsTables(t *testing.T) {
	info, err := Inspect(tablesModule(3, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if info.Tables != 3 || info.TableEntries != 3000 {
		t.Errorf("Tables %d, TableEntries %d; want 3, 3000", info.Tables, info.TableEntries)
	}
}

// TestTableGrowIsCapped: table.grow past MaxTableEntries (all tables
// together) returns -1 without allocating, reports oom and costs no bytes;
// within the cap it grows and is charged TableEntryBytes per entry.
func TestTableGrowIsCapped(t *testing.T) {
	forEngines(t, func(t *testing.T, cfg wazero.RuntimeConfig) {
		m := &wmod{}
		m.tables = append(m.tables, appendU32([]byte{byte(FuncRef), 0}, 10))
		m.tables = append(m.tables, appendU32([]byte{byte(ExternRef), 0}, 0))
		// grow(t, n): table.grow t (ref.null, n)
		g0 := m.fn(ft(vt(I32), vt(I32)), nil, 0xd0, FuncRef, lget(0), misc(15, 0))
		g1 := m.fn(ft(vt(I32), vt(I32)), nil, 0xd0, ExternRef, lget(0), misc(15, 1))
		m.exportFunc("grow0", g0)
		m.exportFunc("grow1", g1)
		fx := newFixture(t, cfg, m.bytes(), Options{})
		for _, c := range []struct {
			fn        string
			n         uint64
			want      uint64
			consumed  int64
			oom       int
			setupGrow uint64 // grow1 first by this much
		}{
			{fn: "grow0", n: 100_000_000, want: 0xffffffff, consumed: 3, oom: 1},
			{fn: "grow0", n: 0xffffffff, want: 0xffffffff, consumed: 3, oom: 1},
			{fn: "grow0", n: MaxTableEntries - 10, want: 10, consumed: 3 + (MaxTableEntries-10)*TableEntryBytes + 1},
			{fn: "grow0", n: MaxTableEntries - 9, want: 0xffffffff, consumed: 3, oom: 1},
			{fn: "grow1", n: 1000, want: 0, consumed: 3 + 1000*TableEntryBytes + 1},
		} {
			mt, res, err := fx.run(c.fn, 1<<40, 1<<30, c.n)
			if err != nil || len(res) != 1 || res[0] != c.want || mt.consumed() != c.consumed || mt.ooms != c.oom {
				t.Errorf("%s(%d): res %v err %v consumed %d ooms %d; want %d, nil, %d, %d", c.fn, c.n, res, err, mt.consumed(), mt.ooms, c.want, c.consumed, c.oom)
			}
		}
		// Both tables count: table 1 grown to half the cap leaves table 0
		// less than the other half.
		both := m.fn(ft(vt(I32), vt(I32)), nil, 0xd0, ExternRef, i32c(MaxTableEntries/2), misc(15, 1), opDrop,
			0xd0, FuncRef, lget(0), misc(15, 0))
		m.exportFunc("both", both)
		fx = newFixture(t, cfg, m.bytes(), Options{})
		_, res, err := fx.run("both", 1<<40, 1<<30, MaxTableEntries/2-10)
		if err != nil || res[0] != 10 {
			t.Errorf("both within the cap: %v %v, want 10", res, err)
		}
		mt, res, err := fx.run("both", 1<<40, 1<<30, MaxTableEntries/2-9)
		if err != nil || res[0] != 0xffffffff || mt.ooms != 1 {
			t.Errorf("both over the cap: %v %v ooms %d, want -1 and an oom", res, err, mt.ooms)
		}
	})
}

// TestInstrumentIsLinear: Inspect and Instrument allocate in proportion to
// the module, for deep nesting, many functions and long bodies: 4 times the
// module costs about 4 times the allocations (16 if quadratic).
func TestInstrumentIsLinear(t *testing.T) {
	shapes := map[string]func(n int) []byte{
		"nesting": func(n int) []byte {
			// n/8 functions nested 500 deep with branches
			m := &wmod{}
			for f := 0; f < n/8; f++ {
				var body []byte
				for i := 0; i < 500; i++ {
					body = append(body, opLoop, blockEmpty, opI32Const, 0, opBrIf, byte(i%100))
				}
				body = append(body, bytes.Repeat([]byte{opEnd}, 500)...)
				m.fn(ft(nil, nil), nil, body)
			}
			return m.bytes()
		},
		"functions": func(n int) []byte {
			m := &wmod{}
			for f := 0; f < n*100; f++ {
				m.fn(ft(nil, nil), nil, opBlock, blockEmpty, opI32Const, 0, opBrIf, 0, opEnd)
			}
			return m.bytes()
		},
		"long body": func(n int) []byte {
			var body []byte
			for i := 0; i < n*1000; i++ {
				body = append(body, opBlock, blockEmpty, opI32Const, 1, opBrIf, 0, opLoop, blockEmpty, opEnd, opEnd)
			}
			m := &wmod{}
			m.fn(ft(nil, nil), nil, body)
			return m.bytes()
		},
	}
	for name, gen := range shapes {
		t.Run(name, func(t *testing.T) {
			small, large := gen(8), gen(32)
			bytesOf := func(wasm []byte) (uint64, float64) {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				allocs := testing.AllocsPerRun(2, func() {
					if _, err := Inspect(wasm); err != nil {
						t.Fatal(err)
					}
					if _, _, err := Instrument(wasm, Options{}); err != nil {
						t.Fatal(err)
					}
				})
				runtime.ReadMemStats(&after)
				return after.TotalAlloc - before.TotalAlloc, allocs
			}
			sb, sa := bytesOf(small)
			lb, la := bytesOf(large)
			sizeRatio := float64(len(large)) / float64(len(small))
			byteRatio := float64(lb) / float64(sb)
			allocRatio := la / max(sa, 1)
			t.Logf("size %d -> %d (x%.1f): bytes x%.1f, allocs x%.1f", len(small), len(large), sizeRatio, byteRatio, allocRatio)
			if byteRatio > 1.75*sizeRatio || allocRatio > 1.75*sizeRatio {
				t.Errorf("not linear: module x%.1f, allocated bytes x%.1f, allocations x%.1f", sizeRatio, byteRatio, allocRatio)
			}
		})
	}
}

func ExampleInspect_limit() {
	_, err := Inspect(tablesModule(1000, 1<<27))
	fmt.Println(errors.Is(err, ErrMemoryLimit))
	fmt.Println(err)
	// Output:
	// true
	// fuel: table section, offset 0xd: initial entries of tables 0-0 (8 bytes each): 134217728 is over the limit of 1048576 (MaxTableEntries) (module over a memory limit)
}
