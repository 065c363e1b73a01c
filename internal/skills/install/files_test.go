//go:build unix

package install_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/skills/install"
	"github.com/buddy-run/buddy/runtime"
)

// installWithin runs Install and fails the test if it has not returned after
// a few seconds (a FIFO or a device read would otherwise hang it).
func installWithin(t *testing.T, e *env, req install.Request) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := e.inst.Install(t.Context(), req); done <- err }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Install is still blocked after 10s")
		return nil
	}
}

// TestInstallReadsFilesWithBounds: the module and the manifest an operator
// names are read only when they are regular files under their caps, and the
// manifest only as UTF-8.
func TestInstallReadsFilesWithBounds(t *testing.T) {
	good := manifest("skill_x", "1.0.0", "read_only", "")
	tests := []struct {
		name string
		// wasm and man return the paths to install ("" = the module's own / skill.toml beside it)
		wasm func(t *testing.T, e *env) string
		man  func(t *testing.T, e *env) string
		kind error
		want []string
	}{
		{name: "module is a FIFO", wasm: func(t *testing.T, e *env) string {
			dir := filepath.Dir(e.module(t, "echo.wasm", good))
			return fifo(t, filepath.Join(dir, "fifo.wasm"))
		}, kind: errs.ErrInvalidInput, want: []string{"fifo.wasm is a named pipe (FIFO), not a regular file"}},
		{name: "module is /dev/zero", wasm: func(t *testing.T, e *env) string { return "/dev/zero" },
			man: func(t *testing.T, e *env) string {
				return filepath.Join(filepath.Dir(e.module(t, "echo.wasm", good)), "skill.toml")
			},
			kind: errs.ErrInvalidInput, want: []string{"/dev/zero is a character device"}},
		{name: "module is a symlink to a FIFO", wasm: func(t *testing.T, e *env) string {
			dir := filepath.Dir(e.module(t, "echo.wasm", good))
			f := fifo(t, filepath.Join(dir, "fifo"))
			link := filepath.Join(dir, "link.wasm")
			if err := os.Symlink(f, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, kind: errs.ErrInvalidInput, want: []string{"named pipe"}},
		{name: "module over the cap", wasm: func(t *testing.T, e *env) string {
			path := e.module(t, "echo.wasm", good)
			// Sparse: the size is what is checked, before any byte is read.
			if err := os.Truncate(path, install.MaxModuleBytes+1); err != nil {
				t.Fatal(err)
			}
			return path
		}, kind: errs.ErrTooLarge, want: []string{"over the cap of 64 MiB"}},
		{name: "manifest is a FIFO", man: func(t *testing.T, e *env) string {
			return fifo(t, filepath.Join(t.TempDir(), "skill.toml"))
		}, kind: errs.ErrInvalidInput, want: []string{"skill.toml is a named pipe (FIFO)"}},
		{name: "skill.toml beside is a FIFO", wasm: func(t *testing.T, e *env) string {
			path := e.module(t, "echo.wasm", "")
			fifo(t, filepath.Join(filepath.Dir(path), "skill.toml"))
			return path
		}, kind: errs.ErrInvalidInput, want: []string{"named pipe"}},
		{name: "manifest is /dev/zero", man: func(t *testing.T, e *env) string { return "/dev/zero" },
			kind: errs.ErrInvalidInput, want: []string{"character device"}},
		{name: "manifest is a directory", man: func(t *testing.T, e *env) string { return t.TempDir() },
			kind: errs.ErrInvalidInput, want: []string{"is a directory"}},
		{name: "manifest over the cap", man: func(t *testing.T, e *env) string {
			p := filepath.Join(t.TempDir(), "skill.toml")
			if err := os.WriteFile(p, []byte(good+"# "+strings.Repeat("x", runtime.MaxManifestBytes)), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, kind: errs.ErrTooLarge, want: []string{"over the cap of 1 MiB"}},
		{name: "manifest not UTF-8", man: func(t *testing.T, e *env) string {
			p := filepath.Join(t.TempDir(), "skill.toml")
			bad := strings.Replace(good, "A test skill.", "A t\xe9st skill.", 1)
			if err := os.WriteFile(p, []byte(bad), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, kind: errs.ErrInvalidInput, want: []string{"is not valid UTF-8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			req := install.Request{}
			if tt.wasm != nil {
				req.WasmPath = tt.wasm(t, e)
			} else {
				req.WasmPath = e.module(t, "echo.wasm", "")
			}
			if tt.man != nil {
				req.ManifestPath = tt.man(t, e)
			}
			err := installWithin(t, e, req)
			wantKind(t, err, tt.kind, tt.want...)
			if k := errs.KindOf(err); k != errs.KindOf(tt.kind) {
				t.Errorf("kind %s, want %s", k, errs.KindOf(tt.kind))
			}
			e.nothingWritten(t)
		})
	}
}

// TestInstallRefusesSharedDirectories: the skills directory (and each
// skill's) is created 0700; one that others may write is refused, with the
// fix, and nothing is copied into it.
func TestInstallRefusesSharedDirectories(t *testing.T) {
	good := manifest("skill_x", "1.0.0", "read_only", "")
	tests := []struct {
		name string
		dir  func(e *env) string // made 0777 before the install
	}{
		{"data directory", func(e *env) string { return e.dataDir }},
		{"skills directory", func(e *env) string { return filepath.Join(e.dataDir, "skills") }},
		{"the skill's directory", func(e *env) string { return filepath.Join(e.dataDir, "skills", "skill_x") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			d := tt.dir(e)
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(d, 0o777); err != nil {
				t.Fatal(err)
			}
			_, err := e.inst.Install(t.Context(), install.Request{WasmPath: e.module(t, "echo.wasm", good)})
			wantKind(t, err, errs.ErrConfig, d+" is writable by group and others (mode 0777)", "fix: chmod 700 "+d)
			if _, err := e.st.GetSkill(t.Context(), "skill_x"); err == nil {
				t.Error("the skill was recorded")
			}
			if m, _ := filepath.Glob(filepath.Join(e.dataDir, "skills", "skill_x", "*")); len(m) != 0 {
				t.Errorf("files copied: %v", m)
			}
		})
	}
	t.Run("created 0700", func(t *testing.T) {
		e := newEnv(t)
		e.install(t, "echo.wasm", good)
		for _, d := range []string{filepath.Join(e.dataDir, "skills"), filepath.Join(e.dataDir, "skills", "skill_x")} {
			fi, err := os.Stat(d)
			if err != nil || fi.Mode()&(fs.ModePerm|fs.ModeSticky) != 0o700 {
				t.Errorf("%s: %v, %v; want 0700", d, fi.Mode(), err)
			}
		}
	})
}

func fifo(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return path
}
