package fuel

import (
	"errors"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Options.GlobalExportPrefix exports every mutable global the module defines,
// so that a host can read and set it; constant globals, imported ones and the
// fuel global stay unexported, and a module using the prefix is refused.
func TestGlobalExportPrefix(t *testing.T) {
	build := func(exportName string) []byte {
		m := &wmod{}
		m.importGlobal("env", "g", I32, true)
		c := m.global(I64, false, i64c(7))
		g := m.global(I32, true, i32c(5))
		h := m.global(I64, true, i64c(-1))
		get := m.fn(ft(nil, vt(I32)), nil, gget(g))
		m.exportFunc("get", get)
		if exportName != "" {
			m.export(exportName, KindGlobal, c)
		}
		m.exportFunc("h", m.fn(ft(nil, vt(I64)), nil, gget(h)))
		return m.bytes()
	}
	opts := Options{GlobalExportPrefix: "__g"}

	t.Run("Info.Globals", func(t *testing.T) {
		_, info, err := Instrument(build(""), opts)
		if err != nil {
			t.Fatal(err)
		}
		want := []Global{{I32, true, true}, {I64, false, false}, {I32, true, false}, {I64, true, false}}
		if len(info.Globals) != len(want) {
			t.Fatalf("Globals = %v, want %v", info.Globals, want)
		}
		for i := range want {
			if info.Globals[i] != want[i] {
				t.Errorf("Globals[%d] = %+v, want %+v", i, info.Globals[i], want[i])
			}
		}
	})
	t.Run("exported, readable and settable", func(t *testing.T) {
		m := &wmod{}
		g := m.global(I32, true, i32c(5))
		m.global(I32, false, i32c(9))
		get := m.fn(ft(nil, vt(I32)), nil, gget(g))
		m.exportFunc("get", get)
		ctx, r := newRuntime(t, wazero.NewRuntimeConfigCompiler())
		out := mustInstrument(t, m.bytes(), opts)
		mod, err := r.Instantiate(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		if mod.ExportedGlobal("__g1") != nil {
			t.Error("a constant global is exported")
		}
		if mod.ExportedGlobal("__g2") != nil {
			t.Error("the fuel global is exported")
		}
		eg := mod.ExportedGlobal("__g0")
		mg, ok := eg.(api.MutableGlobal)
		if !ok {
			t.Fatalf("__g0 = %v, want a mutable global", eg)
		}
		if mg.Get() != 5 {
			t.Errorf("__g0 = %d, want 5", mg.Get())
		}
		mg.Set(42)
		mt := &meter{budget: 1000, chunk: 1000}
		v, err := mod.ExportedFunction("get").Call(withMeter(ctx, mt))
		if err != nil {
			t.Fatal(err)
		}
		if uint32(v[0]) != 42 {
			t.Errorf("get after Set(42) = %d", uint32(v[0]))
		}
	})
	t.Run("the prefix is taken", func(t *testing.T) {
		_, _, err := Instrument(build("__g_mine"), opts)
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("err = %v, want unsupported", err)
		}
	})
	t.Run("without the option nothing is added", func(t *testing.T) {
		m := &wmod{}
		m.global(I32, true, i32c(5))
		ctx, r := newRuntime(t, wazero.NewRuntimeConfigCompiler())
		mod, err := r.Instantiate(ctx, mustInstrument(t, m.bytes(), Options{}))
		if err != nil {
			t.Fatal(err)
		}
		if mod.ExportedGlobal("__g0") != nil {
			t.Error("exported without the option")
		}
	})
}

// Info.TableWrites and Info.DataDrops name the instructions that change a
// table or drop a segment, from Inspect and Instrument alike.
func TestTableWritesAndDataDrops(t *testing.T) {
	cases := []struct {
		name              string
		code              []any
		tableWrite, drops bool
	}{
		{"none", []any{i32c(0), opDrop, i32c(0), []byte{0x25, 0}, opDrop}, false, false}, // table.get only
		{"table.set", []any{i32c(0), []byte{0xd0, byte(FuncRef)}, []byte{0x26, 0}}, true, false},
		{"table.grow", []any{[]byte{0xd0, byte(FuncRef)}, i32c(1), misc(15, 0), opDrop}, true, false},
		{"table.fill", []any{i32c(0), []byte{0xd0, byte(FuncRef)}, i32c(0), misc(17, 0)}, true, false},
		{"table.copy", []any{i32c(0), i32c(0), i32c(0), misc(14, 0, 0)}, true, false},
		{"table.init", []any{i32c(0), i32c(0), i32c(0), misc(12, 0, 0)}, true, false},
		{"elem.drop", []any{misc(13, 0)}, true, false},
		{"data.drop", []any{misc(9, 0)}, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &wmod{}
			m.memory(1, 1)
			m.table(1)
			f := m.fn(ft(nil, nil), nil, c.code...)
			m.elemFuncs(0, f)
			m.datas = append(m.datas, []byte{1, 1, 'x'}) // passive
			m.dataCount = true
			m.exportFunc("f", f)
			wasm := m.bytes()
			in, err := Inspect(wasm)
			if err != nil {
				t.Fatal(err)
			}
			_, out, err := Instrument(wasm, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range []*Info{in, out} {
				if i.TableWrites != c.tableWrite || i.DataDrops != c.drops {
					t.Errorf("TableWrites, DataDrops = %v, %v; want %v, %v", i.TableWrites, i.DataDrops, c.tableWrite, c.drops)
				}
			}
		})
	}
}
