package skills_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

// newRuntime returns a runtime with its cache in a temporary directory,
// closed when the test ends.
func newRuntime(t *testing.T) *runtime.Runtime {
	t.Helper()
	rt, err := runtime.New(t.Context(), runtime.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("closing the runtime: %v", err)
		}
	})
	return rt
}

// newStore opens a real SQLite database in a temporary directory.
func newStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "buddy.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	return st
}

// parseConfig parses a buddy.toml document.
func parseConfig(t *testing.T, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", text, err)
	}
	return cfg
}

// newRegistry registers the skills of cfg (and of st, when not nil) on rt.
func newRegistry(t *testing.T, rt *runtime.Runtime, cfg *config.Config, st *store.Store) *skills.Registry {
	t.Helper()
	opts := skills.Options{Runtime: rt, Config: cfg}
	if st != nil {
		opts.Store = st
		opts.Deps = hostfns.Deps{KV: st, Memories: st}
	}
	reg, err := skills.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := reg.Close(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("closing the registry: %v", err)
		}
	})
	return reg
}

// names lists the registered skills.
func names(reg *skills.Registry) []string {
	var out []string
	for _, s := range reg.Skills() {
		out = append(out, s.Name)
	}
	return out
}

// fixture reads a module of runtime/testdata.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "runtime", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// wantKind fails unless err matches kind and its message contains every one
// of want.
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

// tomlString quotes s as a TOML literal string.
func tomlString(s string) string { return "'" + s + "'" }
