package skills_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

const echoManifest = `
[skill]
name = "echo"
version = "1.0.0"
description = "Echoes its input."
author = "tests"
permission = "read_only"
`

// installRow copies a fixture into dir and records it in st as installed,
// the way lifecycle does; it returns the module's path.
func installRow(t *testing.T, st *store.Store, dir, name, fixtureName, manifest string) string {
	t.Helper()
	wasm := fixture(t, fixtureName)
	path := filepath.Join(dir, name+".wasm")
	if err := os.WriteFile(path, wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	err := st.InsertSkill(t.Context(), store.InstalledSkill{
		Name: name, Version: "1.0.0", Description: "test skill", WasmPath: path, SHA256: sha(wasm),
		Manifest: manifest, Status: store.StatusVerified,
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func storedStatus(t *testing.T, st *store.Store, name string) string {
	t.Helper()
	row, err := st.GetSkill(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return row.Status
}

// flipLastByte changes one byte of a file and returns its original content.
func flipLastByte(t *testing.T, path string) []byte {
	t.Helper()
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(orig)
	bad[len(bad)-1] ^= 0xff
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	return orig
}

func TestInstalledSkill(t *testing.T) {
	st := newStore(t)
	rt := newRuntime(t)
	path := installRow(t, st, t.TempDir(), "echo", "echo.wasm", echoManifest)
	reg := newRegistry(t, rt, parseConfig(t, ``), st)

	if got := names(reg); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("registered %v, want [echo]", got)
	}
	sk, err := reg.Get("echo")
	if err != nil {
		t.Fatal(err)
	}
	if sk.Status != skills.StatusReady || sk.Builtin || sk.WasmPath != path || sk.SHA256 != sha(fixture(t, "echo.wasm")) {
		t.Errorf("echo: status %s, builtin %v, path %s, sha %s", sk.Status, sk.Builtin, sk.WasmPath, sk.SHA256)
	}
	if sk.Approval != config.ApprovalTrust || !sk.Grants.Empty() {
		t.Errorf("echo: approval %s, grants %+v; want trust and nothing", sk.Approval, sk.Grants)
	}
	res, err := reg.Call(t.Context(), "echo", []byte(`{"hello":"world"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `{"hello":"world"}` {
		t.Errorf("output %q", res.Output)
	}
}

// TestVerificationAtLoad: a module changed on disk after the registry listed
// it is refused when it is first loaded, and the status is persisted.
func TestVerificationAtLoad(t *testing.T) {
	st := newStore(t)
	rt := newRuntime(t)
	path := installRow(t, st, t.TempDir(), "echo", "echo.wasm", echoManifest)
	reg := newRegistry(t, rt, parseConfig(t, ``), st)
	if sk, _ := reg.Get("echo"); sk.Status != skills.StatusReady {
		t.Fatalf("status %s before tampering", sk.Status)
	}
	flipLastByte(t, path)

	_, err := reg.Call(t.Context(), "echo", []byte(`{}`))
	wantKind(t, err, errs.ErrForbidden, "verification failed", path)
	sk, _ := reg.Get("echo")
	if sk.Status != skills.StatusVerificationFailed {
		t.Errorf("Skills() status %s, want verification_failed", sk.Status)
	}
	if got := storedStatus(t, st, "echo"); got != store.StatusVerificationFailed {
		t.Errorf("stored status %q, want verification_failed", got)
	}
	// It stays refused, and Load says why too.
	_, err = reg.Call(t.Context(), "echo", []byte(`{}`))
	wantKind(t, err, errs.ErrForbidden, "verification failed")
	wantKind(t, reg.Load(t.Context(), "echo"), errs.ErrForbidden, "verification failed")
}

// TestVerificationAtList: a changed module is flagged by skills.New, and
// is ready again once its bytes are restored.
func TestVerificationAtList(t *testing.T) {
	st := newStore(t)
	rt := newRuntime(t)
	path := installRow(t, st, t.TempDir(), "echo", "echo.wasm", echoManifest)
	orig := flipLastByte(t, path)

	reg := newRegistry(t, rt, parseConfig(t, ``), st)
	sk, err := reg.Get("echo")
	if err != nil {
		t.Fatal(err)
	}
	if sk.Status != skills.StatusVerificationFailed {
		t.Errorf("status %s, want verification_failed", sk.Status)
	}
	wantKind(t, sk.Problem, errs.ErrForbidden, "verification failed")
	if got := storedStatus(t, st, "echo"); got != store.StatusVerificationFailed {
		t.Errorf("stored status %q, want verification_failed", got)
	}
	_, err = reg.Call(t.Context(), "echo", []byte(`{}`))
	wantKind(t, err, errs.ErrForbidden, "verification failed")

	// Restored: ready again at the next skills.New, in the store too.
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	reg = newRegistry(t, rt, parseConfig(t, ``), st)
	sk, _ = reg.Get("echo")
	if sk.Status != skills.StatusReady || sk.Problem != nil {
		t.Errorf("after restoring: status %s, problem %v", sk.Status, sk.Problem)
	}
	if got := storedStatus(t, st, "echo"); got != store.StatusVerified {
		t.Errorf("stored status %q, want verified", got)
	}
	if _, err := reg.Call(t.Context(), "echo", []byte(`{}`)); err != nil {
		t.Errorf("call after restoring: %v", err)
	}
}

func TestVerificationMissingFile(t *testing.T) {
	st := newStore(t)
	path := installRow(t, st, t.TempDir(), "echo", "echo.wasm", echoManifest)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, newRuntime(t), parseConfig(t, ``), st)
	sk, _ := reg.Get("echo")
	if sk.Status != skills.StatusVerificationFailed {
		t.Errorf("status %s, want verification_failed", sk.Status)
	}
	_, err := reg.Call(t.Context(), "echo", []byte(`{}`))
	wantKind(t, err, errs.ErrForbidden, "verification failed", "cannot read")
}

// TestUndeclaredImportNotGranted: a module importing a host function that
// the operator did not grant is refused when it is loaded, naming the import.
func TestUndeclaredImportNotGranted(t *testing.T) {
	manifest := `
[skill]
name = "undeclared"
version = "1.0.0"
description = "Calls http_get."
permission = "network"

[capabilities]
network = ["example.com"]
`
	tests := []struct {
		name string
		toml string
	}{
		{"no section", ``},
		{"a section granting another domain", `
[skills.undeclared]
allowed_domains = ["example.org"]
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			installRow(t, st, t.TempDir(), "undeclared", "undeclared.wasm", manifest)
			reg := newRegistry(t, newRuntime(t), parseConfig(t, tt.toml), st)
			sk, _ := reg.Get("undeclared")
			if sk.Status != skills.StatusReady {
				t.Fatalf("status %s before loading", sk.Status)
			}
			_, err := reg.Call(t.Context(), "undeclared", []byte(`{}`))
			wantKind(t, err, errs.ErrForbidden, "imports buddy:host/v1.http_get, not granted")
			sk, _ = reg.Get("undeclared")
			if sk.Status != skills.StatusUnavailable || sk.Problem == nil {
				t.Errorf("status %s, problem %v; want unavailable", sk.Status, sk.Problem)
			}
			// Not a verification failure: the store keeps "verified".
			if got := storedStatus(t, st, "undeclared"); got != store.StatusVerified {
				t.Errorf("stored status %q", got)
			}
		})
	}
	t.Run("granted", func(t *testing.T) {
		st := newStore(t)
		installRow(t, st, t.TempDir(), "undeclared", "undeclared.wasm", manifest)
		reg := newRegistry(t, newRuntime(t), parseConfig(t, `
[skills.undeclared]
allowed_domains = ["example.com"]
`), st)
		// Loaded only: its run would reach a real host.
		if err := reg.Load(t.Context(), "undeclared"); err != nil {
			t.Fatalf("with a grant: %v", err)
		}
	})
}

// TestInstalledSectionLimits: an installed skill's section sets its fuel,
// and the runtime enforces it.
func TestInstalledSectionLimits(t *testing.T) {
	st := newStore(t)
	installRow(t, st, t.TempDir(), "echo", "echo.wasm", echoManifest)
	reg := newRegistry(t, newRuntime(t), parseConfig(t, `
[skills.echo]
fuel = 10
approval = "once"
`), st)
	sk, _ := reg.Get("echo")
	if sk.Manifest.Resources.Fuel != 10 || sk.Declared.Fuel != runtime.DefaultFuel || sk.Approval != config.ApprovalOnce {
		t.Errorf("fuel %d (declared %d), approval %s", sk.Manifest.Resources.Fuel, sk.Declared.Fuel, sk.Approval)
	}
	_, err := reg.Call(t.Context(), "echo", []byte(`{"x":"`+strings.Repeat("a", 1000)+`"}`))
	wantKind(t, err, errs.ErrFuelExhausted)
}

// TestInstalledBadManifest: a stored manifest that no longer parses makes the
// skill unavailable, not the registry.
func TestInstalledBadManifest(t *testing.T) {
	st := newStore(t)
	installRow(t, st, t.TempDir(), "echo", "echo.wasm", "[skill]\nname = 42\n")
	reg := newRegistry(t, newRuntime(t), parseConfig(t, ``), st)
	sk, err := reg.Get("echo")
	if err != nil {
		t.Fatal(err)
	}
	if sk.Status != skills.StatusUnavailable {
		t.Errorf("status %s, want unavailable", sk.Status)
	}
	_, err = reg.Call(t.Context(), "echo", []byte(`{}`))
	wantKind(t, err, errs.ErrConfig, "stored manifest")
}

// TestInstalledCannotShadowBuiltin: a row with a built-in's name (which the
// installer refuses, but an old or hand-edited database may hold) never takes
// the built-in's place.
func TestInstalledCannotShadowBuiltin(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "notes.txt"), "real read_file")
	shadow := func(t *testing.T, st *store.Store) {
		for _, name := range []string{"read_file", "fetch_url", "memory", "recall"} {
			m := bytes.Replace([]byte(echoManifest), []byte(`"echo"`), []byte(`"`+name+`"`), 1)
			installRow(t, st, t.TempDir(), name, "echo.wasm", string(m))
		}
	}
	t.Run("built-in enabled", func(t *testing.T) {
		st := newStore(t)
		shadow(t, st)
		reg := newRegistry(t, newRuntime(t), parseConfig(t, `
[skills.read_file]
allowed_directories = [`+tomlString(dir)+`]
`), st)
		if got := names(reg); !slices.Equal(got, []string{"read_file"}) {
			t.Errorf("registered %v, want [read_file]", got)
		}
		sk, _ := reg.Get("read_file")
		if !sk.Builtin {
			t.Fatalf("read_file is the installed row")
		}
		res, err := reg.Call(t.Context(), "read_file", []byte(`{"path":"notes.txt"}`))
		if err != nil || !bytes.Contains(res.Output, []byte("real read_file")) {
			t.Errorf("read_file: %v", err)
		}
	})
	t.Run("built-in not enabled", func(t *testing.T) {
		st := newStore(t)
		shadow(t, st)
		reg := newRegistry(t, newRuntime(t), parseConfig(t, ``), st)
		if got := names(reg); len(got) != 0 {
			t.Errorf("registered %v, want nothing", got)
		}
		_, err := reg.Call(t.Context(), "read_file", []byte(`{"path":"notes.txt"}`))
		wantKind(t, err, errs.ErrNotFound, "add a [skills.read_file] section")
	})
}

// TestStatusWhileCalling: listing skills while a call finds that a module no
// longer verifies is safe under -race, and the listing sees the new status.
func TestStatusWhileCalling(t *testing.T) {
	st := newStore(t)
	path := installRow(t, st, t.TempDir(), "echo", "echo.wasm", echoManifest)
	reg := newRegistry(t, newRuntime(t), parseConfig(t, ``), st)
	flipLastByte(t, path)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := reg.Call(t.Context(), "echo", []byte(`{}`))
			if !errors.Is(err, errs.ErrForbidden) {
				t.Errorf("call: %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			for range 50 {
				for _, s := range reg.Skills() {
					_, _ = s.Status, s.Problem
				}
			}
		}()
	}
	wg.Wait()
	if sk := reg.Skills()[0]; sk.Status != skills.StatusVerificationFailed || sk.Problem == nil {
		t.Errorf("status %s, problem %v", sk.Status, sk.Problem)
	}
}
