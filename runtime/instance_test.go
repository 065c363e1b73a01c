package runtime

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestInstancePreparedAhead: instances of a plain module and of a WASI
// reactor (TinyGo, go-pdk) get their entry point and guest initializer looked
// up when they are made, and calls answer through them.
func TestInstancePreparedAhead(t *testing.T) {
	ctx := t.Context()
	rt, err := New(ctx, Options{Prepared: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	for _, c := range []struct {
		fixture, entry string
		input          []byte
		wantInit       bool
		check          func([]byte) bool
	}{
		{"echo.wasm", "run", []byte(`{"path":"notes/today.txt"}`), false,
			func(out []byte) bool { return bytes.Equal(out, []byte(`{"path":"notes/today.txt"}`)) }},
		{"pdkplugin.wasm", "greet", []byte(`{"name":"Ada"}`), true,
			func(out []byte) bool { return bytes.Contains(out, []byte("Ada")) }},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			wasm, err := os.ReadFile(filepath.Join("testdata", c.fixture))
			if err != nil {
				t.Fatal(err)
			}
			man := DefaultManifest("fast")
			man.Entrypoint = c.entry
			mod, err := rt.Load(ctx, wasm, Spec{Manifest: man})
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(ctx)
			inst, err := mod.newInstance(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			defer inst.close(ctx, nil)
			if inst.entry == nil {
				t.Fatal("entry point not looked up ahead")
			}
			if (inst.init != nil) != c.wantInit {
				t.Errorf("guest initializer found = %v, want %v", inst.init != nil, c.wantInit)
			}
			for i := 0; i < 3; i++ { // fresh instances each time, via Call
				res, err := mod.Call(ctx, c.input)
				if err != nil {
					t.Fatal(err)
				}
				if !c.check(res.Output) {
					t.Fatalf("output %q", res.Output)
				}
			}
		})
	}
}
