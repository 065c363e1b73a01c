//go:build unix

package fs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestPrivateFiles: the secret store and its key are neither read nor
// replaced through a granted directory that holds them, whatever path
// leads to them; other files beside them are.
func TestPrivateFiles(t *testing.T) {
	top := t.TempDir()
	data := filepath.Join(top, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	key, store, lock := filepath.Join(data, "secrets.key"), filepath.Join(data, "secrets.enc"), filepath.Join(data, "secrets.lock")
	for p, v := range map[string]string{key: "k3y", store: "st0re", filepath.Join(data, "notes.txt"): "notes"} {
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("data/secrets.key", filepath.Join(top, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(key, filepath.Join(top, "hard")); err != nil {
		t.Fatal(err)
	}
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(data, alias); err != nil {
		t.Fatal(err)
	}
	private := Options{Private: []string{store, key, lock}}
	above, err := Open([]string{top}, private)
	if err != nil {
		t.Fatal(err)
	}
	defer above.Close()
	inside, err := Open([]string{alias}, private) // the data directory itself, through a symlink
	if err != nil {
		t.Fatal(err)
	}
	defer inside.Close()

	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errs.ErrForbidden) || !strings.Contains(err.Error(), "private files") {
			t.Errorf("%s: %v, want forbidden: one of buddy's private files", what, err)
		}
	}
	for _, c := range []struct {
		r    *Roots
		path string
	}{
		{above, "data/secrets.key"}, {above, "data/secrets.enc"}, {above, "link"}, {above, "hard"},
		{above, filepath.Join(top, "data", "secrets.key")}, {inside, "secrets.key"}, {inside, alias + "/secrets.enc"},
	} {
		_, err := c.r.Read(t.Context(), c.path)
		refused("read "+c.path, err)
		tg, err := c.r.Inspect(t.Context(), c.path, false, nil)
		if err != nil || !strings.Contains(tg.Refused, "private files") {
			t.Errorf("inspect read %s: %+v, %v", c.path, tg, err)
		}
	}
	for _, c := range []struct {
		r    *Roots
		path string
	}{
		{above, "data/secrets.key"}, {above, "data/secrets.enc"}, {above, "data/secrets.lock"}, {above, "data/SECRETS.KEY"},
		{above, "hard"}, {inside, "secrets.enc"}, {inside, "secrets.lock"},
	} {
		_, err := c.r.Write(t.Context(), c.path, []byte("planted"))
		refused("write "+c.path, err)
		tg, err := c.r.Inspect(t.Context(), c.path, true, []byte("planted"))
		if err != nil || !strings.Contains(tg.Refused, "private files") {
			t.Errorf("inspect write %s: %+v, %v", c.path, tg, err)
		}
	}
	for p, want := range map[string]string{key: "k3y", store: "st0re"} {
		if b, _ := os.ReadFile(p); string(b) != want {
			t.Errorf("%s now holds %q", p, b)
		}
	}
	if _, err := os.Lstat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lock file was created: %v", err)
	}

	// The files beside them are a granted directory's like any other.
	if b, err := above.Read(t.Context(), "data/notes.txt"); err != nil || string(b) != "notes" {
		t.Errorf("read notes.txt: %q, %v", b, err)
	}
	if _, err := inside.Write(t.Context(), "secrets.key.txt", []byte("not the key")); err != nil {
		t.Errorf("write secrets.key.txt: %v", err)
	}
	if _, err := Open([]string{top}, Options{Private: []string{"relative/secrets.key"}}); !errors.Is(err, errs.ErrConfig) {
		t.Errorf("a relative private path: %v", err)
	}
}
