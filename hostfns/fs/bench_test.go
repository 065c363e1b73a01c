package fs

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkRead4KiB compares Roots.Read with a bare os.Root ReadFile of the
// same 4 KiB file: the difference is the gate (lexical checks, the stat
// before the open, fstat, error mapping).
func BenchmarkRead4KiB(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("roots", func(b *testing.B) {
		r, err := Open([]string{dir}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		ctx := b.Context()
		b.SetBytes(4096)
		b.ReportAllocs()
		for b.Loop() {
			if data, err := r.Read(ctx, "f"); err != nil || len(data) != 4096 {
				b.Fatal(len(data), err)
			}
		}
	})
	b.Run("native", func(b *testing.B) {
		root, err := os.OpenRoot(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer root.Close()
		b.SetBytes(4096)
		b.ReportAllocs()
		for b.Loop() {
			if data, err := root.ReadFile("f"); err != nil || len(data) != 4096 {
				b.Fatal(len(data), err)
			}
		}
	})
}
