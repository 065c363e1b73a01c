//go:build unix

package runtime

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestCacheDirMustBePrivate: wazero runs the native code it finds in the
// compilation cache, so New refuses a cache directory (or subdirectory)
// others may write, and creates its own 0700.
func TestCacheDirMustBePrivate(t *testing.T) {
	tests := []struct {
		name  string
		sub   string      // "" = the cache directory itself
		mode  fs.FileMode // 0 = not created beforehand
		other bool
		want  string
	}{
		{name: "created"},
		{name: "0700", mode: 0o700},
		{name: "0755", mode: 0o755},
		{name: "0770", mode: 0o770, want: "is writable by group (mode 0770)"},
		{name: "0777", mode: 0o777, want: "writable by group and others (mode 0777)"},
		{name: "1777", mode: 0o777 | fs.ModeSticky, want: "(mode 1777)"},
		{name: "wazero/ 0777", sub: "wazero", mode: 0o777, want: "wazero is writable by group and others"},
		{name: "instrumented/ 0707", sub: "instrumented", mode: 0o707, want: "instrumented is writable by others"},
		{name: "another user's", mode: 0o700, other: true, want: "is owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "cache")
			if tt.mode != 0 {
				d := filepath.Join(cache, tt.sub)
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(d, tt.mode); err != nil {
					t.Fatal(err)
				}
				if tt.other {
					if os.Geteuid() != 0 {
						t.Skip("only root can give a directory to another user")
					}
					if err := os.Chown(d, 65534, 65534); err != nil {
						t.Fatal(err)
					}
				}
			}
			rt, err := New(t.Context(), Options{CacheDir: cache})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("New = %v", err)
				}
				rt.Close(t.Context())
				for _, d := range []string{cache, filepath.Join(cache, "wazero"), filepath.Join(cache, "instrumented")} {
					if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o022 != 0 {
						t.Errorf("%s: %v, %v", d, fi.Mode(), err)
					}
				}
				return
			}
			if err == nil {
				rt.Close(t.Context())
				t.Fatal("New succeeded")
			}
			if errs.KindOf(err) != errs.KindConfig || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "fix: chmod 700") && !tt.other {
				t.Fatalf("New = %v (%s), want a config error containing %q and the fix", err, errs.KindOf(err), tt.want)
			}
		})
	}
}
