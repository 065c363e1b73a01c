package install_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/skills/install"
	"github.com/buddy-run/buddy/internal/store"
)

// env is an installer on a real store, with a data directory of its own.
type env struct {
	st      *store.Store
	inst    *install.Installer
	dataDir string
	src     string // where test modules and manifests are written
}

func newEnv(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	st, err := store.Open(t.Context(), filepath.Join(root, "data", "buddy.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	e := &env{st: st, dataDir: filepath.Join(root, "data"), src: filepath.Join(root, "src")}
	e.inst = &install.Installer{Store: st, DataDir: e.dataDir}
	if err := os.Mkdir(e.src, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// fixture reads a module of runtime/testdata.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "runtime", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// manifest is a skill.toml; extra is appended as is (sections, capabilities).
func manifest(name, version, perm, extra string) string {
	return `[skill]
name = "` + name + `"
version = "` + version + `"
description = "A test skill."
author = "tests"
permission = "` + perm + `"
` + extra
}

// module writes a fixture and its skill.toml into a fresh directory under
// e.src and returns the module's path.
func (e *env) module(t *testing.T, fixtureName, manifestText string) string {
	t.Helper()
	dir, err := os.MkdirTemp(e.src, "mod")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "skill.wasm")
	if err := os.WriteFile(path, fixture(t, fixtureName), 0o644); err != nil {
		t.Fatal(err)
	}
	if manifestText != "" {
		if err := os.WriteFile(filepath.Join(dir, "skill.toml"), []byte(manifestText), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func (e *env) install(t *testing.T, fixtureName, manifestText string) *install.Result {
	t.Helper()
	res, err := e.inst.Install(t.Context(), install.Request{WasmPath: e.module(t, fixtureName, manifestText)})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// files lists the files under DataDir/skills, relative to it.
func (e *env) files(t *testing.T) []string {
	t.Helper()
	var out []string
	root := filepath.Join(e.dataDir, "skills")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == root {
			return filepath.SkipAll
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel != "." {
			if d.IsDir() {
				rel += "/"
			}
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// nothingWritten fails if the store has any skill or DataDir/skills has any file.
func (e *env) nothingWritten(t *testing.T) {
	t.Helper()
	rows, err := e.st.ListSkills(context.WithoutCancel(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 0 {
		t.Errorf("rows left: %+v", rows)
	}
	if f := e.files(t); len(f) != 0 {
		t.Errorf("files left under skills/: %v", f)
	}
}

func (e *env) row(t *testing.T, name string) store.InstalledSkill {
	t.Helper()
	r, err := e.st.GetSkill(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantKind fails unless err matches kind and mentions every one of want.
func wantKind(t *testing.T, err, kind error, want ...string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("err = %v (kind %s), want %s", err, errs.KindOf(err), errs.KindOf(kind))
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("err = %q, want it to mention %q", err, w)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// consent records what it was asked and answers ok (or err).
type consent struct {
	asked [][]string
	ok    bool
	err   error
}

func (c *consent) fn(widened []string) (bool, error) {
	c.asked = append(c.asked, widened)
	return c.ok, c.err
}
