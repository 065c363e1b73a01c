package fuel

import (
	"errors"
	"testing"

	"github.com/tetratelabs/wazero"
)

// A start section becomes an export with Options.StartExport: nothing runs at
// instantiation, the export runs the start function metered, and the module's
// own use of the name is refused.
func TestStartExport(t *testing.T) {
	build := func(withExports bool, extra string) []byte {
		m := &wmod{}
		g := m.global(I32, true, i32c(0))
		start := m.fn(ft(nil, nil), nil, gget(g), i32c(1), opI32Add, gset(g))
		m.start = &start
		if withExports {
			get := m.fn(ft(nil, vt(I32)), nil, gget(g))
			m.exportFunc("get", get)
			if extra != "" {
				m.exportFunc(extra, get)
			}
		}
		return m.bytes()
	}
	opts := Options{StartExport: "__buddy_start"}

	t.Run("runs only when called, metered", func(t *testing.T) {
		ctx, r := newRuntime(t, wazero.NewRuntimeConfigCompiler())
		out := mustInstrument(t, build(true, ""), opts)
		cm, err := r.CompileModule(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		// One instance: nothing ran at instantiation.
		first, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("first"))
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := first.ExportedFunction("get").Call(ctx); uint32(v[0]) != 0 {
			t.Fatalf("get before start = %d: the start function ran at instantiation", uint32(v[0]))
		}
		// A fresh one (fuel lives per instance): the start export is metered.
		mod, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("second"))
		if err != nil {
			t.Fatal(err)
		}
		m := &meter{budget: 1000, chunk: 1000}
		mctx := withMeter(ctx, m)
		if _, err := mod.ExportedFunction("__buddy_start").Call(mctx); err != nil {
			t.Fatal(err)
		}
		if m.consumed() != 4 {
			t.Errorf("start consumed %d fuel, want 4 (its four instructions)", m.consumed())
		}
		if v, _ := mod.ExportedFunction("get").Call(mctx); uint32(v[0]) != 1 {
			t.Fatalf("get after start = %d, want 1", uint32(v[0]))
		}
	})
	t.Run("no export section", func(t *testing.T) {
		ctx, r := newRuntime(t, wazero.NewRuntimeConfigCompiler())
		out := mustInstrument(t, build(false, ""), opts)
		mod, err := r.Instantiate(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		if mod.ExportedFunction("__buddy_start") == nil {
			t.Fatal("no start export")
		}
	})
	t.Run("the name is taken", func(t *testing.T) {
		_, _, err := Instrument(build(true, "__buddy_start"), opts)
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("err = %v, want unsupported", err)
		}
	})
	t.Run("refused without the option", func(t *testing.T) {
		_, _, err := Instrument(build(true, ""), Options{})
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("err = %v, want unsupported", err)
		}
	})
}
