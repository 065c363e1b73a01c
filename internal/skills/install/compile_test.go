package install_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/skills/install"
	"github.com/buddy-run/buddy/runtime"
)

// TestInstallCompiles: the installer hands the module and its manifest to
// Compile before it writes anything; a module Compile refuses is not
// installed.
func TestInstallCompiles(t *testing.T) {
	cases := []struct {
		name    string
		compile error
	}{
		{"compiled", nil},
		{"refused", errs.New(errs.ErrTooLarge, "module refused")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			var got []byte
			var gotName string
			e.inst.Compile = func(_ context.Context, wasm []byte, m *runtime.Manifest) error {
				got, gotName = wasm, m.Name
				return c.compile
			}
			_, err := e.inst.Install(t.Context(), install.Request{WasmPath: e.module(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))})
			if !bytes.Equal(got, fixture(t, "echo.wasm")) || gotName != "echo" {
				t.Fatalf("Compile got %d bytes for %q, want echo.wasm for echo", len(got), gotName)
			}
			if !errors.Is(err, c.compile) {
				t.Fatalf("Install: %v, want %v", err, c.compile)
			}
			if c.compile == nil {
				return
			}
			if files := e.files(t); len(files) != 0 {
				t.Errorf("a refused install left %v", files)
			}
			if _, err := e.st.GetSkill(t.Context(), "echo"); !errors.Is(err, errs.ErrNotFound) {
				t.Errorf("a refused install was recorded: %v", err)
			}
		})
	}
}
