package secrets_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/secrets"
)

func open(t *testing.T, dir string) *secrets.Store {
	t.Helper()
	st, err := secrets.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestStoreSetListSecretRemove(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir)
	ctx := t.Context()
	if l, err := st.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("an empty store lists %v, %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(dir, secrets.KeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open made files before any Set: %v", err)
	}
	if err := st.Set(ctx, "github", []byte(token)); err != nil {
		t.Fatal(err)
	}
	if err := st.Set(ctx, "openai", []byte("sk-0123456789")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{secrets.KeyFile, secrets.StoreFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode())
		}
	}
	raw, _ := os.ReadFile(filepath.Join(dir, secrets.StoreFile))
	if bytes.Contains(raw, []byte(token)) || bytes.Contains(raw, []byte("github")) {
		t.Error("the store file holds a name or a value in clear")
	}
	v, err := st.Secret(ctx, "github")
	if err != nil || string(v) != token {
		t.Fatalf("Secret = %q, %v", v, err)
	}
	l, err := st.List(ctx)
	if err != nil || len(l) != 2 || l[0].Name != "github" || l[1].Name != "openai" || l[0].SetAt.IsZero() {
		t.Fatalf("List = %+v, %v", l, err)
	}
	// Another process's view sees it, and the redactor matches it.
	other := open(t, dir)
	if got := other.Redact("x " + token); got != "x [secret:github]" {
		t.Errorf("another Store redacts %q", got)
	}
	if err := other.Set(ctx, "github", []byte("a-new-token-value")); err != nil {
		t.Fatal(err)
	}
	if got := st.Redact("a-new-token-value"); got != "[secret:github]" {
		t.Errorf("a change made by another Store is not seen: %q", got)
	}
	if got := st.Redact(token); got != token {
		t.Errorf("the replaced value is still redacted: %q", got)
	}
	if err := st.Remove(ctx, "github"); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove(ctx, "github"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("removing twice: %v", err)
	}
	if _, err := st.Secret(ctx, "github"); !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), "buddy secret set github") {
		t.Errorf("Secret of a removed name: %v", err)
	}
}

func TestStoreRefusesBadNamesAndValues(t *testing.T) {
	st := open(t, t.TempDir())
	for _, c := range []struct {
		name, value string
		kind        error
	}{
		{"", "0123456789", errs.ErrInvalidInput},
		{"1abc", "0123456789", errs.ErrInvalidInput},
		{"a b", "0123456789", errs.ErrInvalidInput},
		{"ok", "short", errs.ErrInvalidInput},
		{"ok", "0123456789\n", errs.ErrInvalidInput},
		{"ok", "0123\r\n456789", errs.ErrInvalidInput},
		{"ok", "\xff\xfe0123456789", errs.ErrInvalidInput},
		{"ok", strings.Repeat("x", secrets.MaxValueBytes+1), errs.ErrTooLarge},
	} {
		if err := st.Set(t.Context(), c.name, []byte(c.value)); !errors.Is(err, c.kind) {
			t.Errorf("Set(%q, %q) = %v, want %v", c.name, c.value[:min(len(c.value), 20)], err, c.kind)
		}
	}
}

// TestStoreRefusesFilesOthersCanRead: a key or store others can read or
// write is refused, with the chmod that fixes it.
func TestStoreRefusesFilesOthersCanRead(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Log("running as root: modes are still checked")
	}
	for _, f := range []string{secrets.KeyFile, secrets.StoreFile} {
		for _, mode := range []os.FileMode{0o640, 0o604, 0o660, 0o602} {
			dir := t.TempDir()
			if err := open(t, dir).Set(t.Context(), "github", []byte(token)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, f)
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
			_, err := secrets.Open(dir)
			if !errors.Is(err, errs.ErrConfig) || !strings.Contains(err.Error(), "chmod 600 "+path) {
				t.Errorf("%s mode %04o: Open = %v; want a config error naming chmod 600 %s", f, mode, err, path)
			}
		}
	}
}

// TestStoreCorruptIsAnError: a store that does not decrypt is a clear
// error, never an empty store.
func TestStoreCorruptIsAnError(t *testing.T) {
	cases := map[string]func(dir string){
		"a byte flipped": func(dir string) {
			p := filepath.Join(dir, secrets.StoreFile)
			b, _ := os.ReadFile(p)
			b[len(b)-5] ^= 1
			os.WriteFile(p, b, 0o600)
		},
		"truncated": func(dir string) {
			p := filepath.Join(dir, secrets.StoreFile)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:20], 0o600)
		},
		"not ours": func(dir string) { os.WriteFile(filepath.Join(dir, secrets.StoreFile), []byte("hello"), 0o600) },
		"another key": func(dir string) {
			os.WriteFile(filepath.Join(dir, secrets.KeyFile), []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
		},
		"a key that is not hex": func(dir string) {
			os.WriteFile(filepath.Join(dir, secrets.KeyFile), []byte("not a key\n"), 0o600)
		},
		"the key missing": func(dir string) { os.Remove(filepath.Join(dir, secrets.KeyFile)) },
		"a symlink for the store": func(dir string) {
			p := filepath.Join(dir, secrets.StoreFile)
			os.Rename(p, p+".real")
			os.Symlink(p+".real", p)
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := open(t, dir).Set(t.Context(), "github", []byte(token)); err != nil {
				t.Fatal(err)
			}
			spoil(dir)
			_, err := secrets.Open(dir)
			if !errors.Is(err, errs.ErrConfig) {
				t.Fatalf("Open = %v, want a config error", err)
			}
			if !strings.Contains(err.Error(), "secret store") {
				t.Errorf("the error does not say what: %v", err)
			}
			t.Log(err)
		})
	}
}

// TestStoreCorruptWhileRunning: a store spoiled under a running buddy fails
// the next Secret, and keeps redacting what it knew.
func TestStoreCorruptWhileRunning(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir)
	if err := st.Set(t.Context(), "github", []byte(token)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, secrets.StoreFile), []byte("garbage garbage garbage"), 0o600)
	if _, err := st.Secret(t.Context(), "github"); !errors.Is(err, errs.ErrConfig) {
		t.Errorf("Secret = %v", err)
	}
	if got := st.Redact(token); got != "[secret:github]" {
		t.Errorf("Redact = %q", got)
	}
}

func TestStoreAlso(t *testing.T) {
	st := open(t, t.TempDir())
	st.Also("OPENAI_API_KEY", []byte("sk-env-0123456789"))
	if err := st.Set(t.Context(), "github", []byte(token)); err != nil {
		t.Fatal(err)
	}
	if got := st.Redact("sk-env-0123456789 " + token); got != "[secret:OPENAI_API_KEY] [secret:github]" {
		t.Errorf("Redact = %q", got)
	}
	if _, err := st.Secret(t.Context(), "OPENAI_API_KEY"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("a value Also was told of is not stored: %v", err)
	}
}
