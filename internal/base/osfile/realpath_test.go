package osfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/buddy-run/buddy/internal/base/osfile"
)

// TestRealPath: symbolic links are resolved as far as the path exists, the
// rest joined on as named.
func TestRealPath(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(root, "real")
	if err := os.MkdirAll(filepath.Join(real, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "f.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Skipf("symlinks: %v", err)
	}
	if err := os.Symlink(filepath.Join(real, "f.db"), filepath.Join(root, "f-link.db")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ in, want string }{
		{filepath.Join(link, "f.db"), filepath.Join(real, "f.db")},                     // exists, through a linked directory
		{filepath.Join(root, "f-link.db"), filepath.Join(real, "f.db")},                // a linked file
		{filepath.Join(link, "new.db"), filepath.Join(real, "new.db")},                 // missing leaf
		{filepath.Join(link, "a", "b", "c.db"), filepath.Join(real, "a", "b", "c.db")}, // missing directories
		{filepath.Join(link, "sub", "..", "f.db"), filepath.Join(real, "f.db")},        // cleaned first
		{"no/such/relative", "no/such/relative"},
	} {
		if got := osfile.RealPath(tt.in); got != tt.want {
			t.Errorf("RealPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
