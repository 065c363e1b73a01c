package osfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestWriteAtomic: the file holds the new content with its mode; a write
// that fails (the directory is gone, the target is a directory) leaves the
// old content and no temporary file behind.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	for _, content := range []string{"first", "second, longer"} {
		if err := WriteAtomic(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	if fi, _ := os.Stat(p); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode())
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{filepath.Join(dir, "missing", "x"), sub} {
		if err := WriteAtomic(bad, []byte("x"), 0o600); err == nil {
			t.Errorf("WriteAtomic(%s) succeeded", bad)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("left behind: %v", entries)
	}
	if got, _ := os.ReadFile(p); string(got) != "second, longer" {
		t.Fatalf("a failed write changed the file: %q", got)
	}
	if err := WriteAtomic(filepath.Join(dir, "missing", "x"), nil, 0o600); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want not exist", err)
	}
}
