//go:build unix

package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
)

// TestLoadFileChecks: buddy.toml is read with bounds, as UTF-8, and only when
// nobody but its owner (the user running buddy, or root) can change it.
func TestLoadFileChecks(t *testing.T) {
	const valid = "[limits]\nmax_fuel = 1000\n"
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir string) string
		wantKind errs.Kind
		want     string
	}{
		{name: "0600", setup: func(t *testing.T, dir string) string {
			return withMode(t, writeFile(t, dir, "buddy.toml", valid), 0o600)
		}},
		{name: "0644", setup: func(t *testing.T, dir string) string {
			return withMode(t, writeFile(t, dir, "buddy.toml", valid), 0o644)
		}},
		{name: "group-writable", setup: func(t *testing.T, dir string) string {
			return withMode(t, writeFile(t, dir, "buddy.toml", valid), 0o664)
		},
			wantKind: errs.KindConfig, want: "is writable by group (mode 0664): a file others can change must not decide what skills may do; fix: chmod 600 "},
		{name: "world-writable", setup: func(t *testing.T, dir string) string {
			return withMode(t, writeFile(t, dir, "buddy.toml", valid), 0o666)
		},
			wantKind: errs.KindConfig, want: "writable by group and others (mode 0666)"},
		{name: "another user's", setup: func(t *testing.T, dir string) string {
			p := writeFile(t, dir, "buddy.toml", valid)
			chownNobody(t, p)
			return p
		}, wantKind: errs.KindConfig, want: "is owned by uid 65534"},
		{name: "over the cap", setup: func(t *testing.T, dir string) string {
			return writeFile(t, dir, "buddy.toml", "# "+strings.Repeat("x", MaxFileBytes)+"\n")
		}, wantKind: errs.KindTooLarge, want: "over the cap of 1 MiB"},
		{name: "not UTF-8", setup: func(t *testing.T, dir string) string {
			return writeFile(t, dir, "buddy.toml", "# caf\xe9\n[limits]\nmax_fuel = 1000\n")
		}, wantKind: errs.KindConfig, want: "line 1, column 6: not valid UTF-8 (invalid byte 0xe9 at offset 5)"},
		{name: "not UTF-8 in a string", setup: func(t *testing.T, dir string) string {
			return writeFile(t, dir, "buddy.toml", "[skills.read_file]\nallowed_directories = [\"/tmp/\xff\"]\n")
		}, wantKind: errs.KindConfig, want: "line 2, column 30: not valid UTF-8"},
		{name: "a FIFO", setup: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "buddy.toml")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skip(err)
			}
			return p
		}, wantKind: errs.KindInvalidInput, want: "is a named pipe (FIFO), not a regular file"},
		{name: "/dev/zero", setup: func(*testing.T, string) string { return "/dev/zero" },
			wantKind: errs.KindInvalidInput, want: "/dev/zero is a character device"},
		{name: "a directory", setup: func(t *testing.T, dir string) string { return mkdir(t, dir, "buddy.toml") },
			wantKind: errs.KindInvalidInput, want: "is a directory"},
		{name: "missing", setup: func(t *testing.T, dir string) string { return filepath.Join(dir, "nope.toml") },
			wantKind: errs.KindConfig, want: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.setup(t, t.TempDir())
			done := make(chan struct{})
			var c *Config
			var err error
			go func() { defer close(done); c, err = Load(path) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Load is still blocked after 5s")
			}
			if tt.wantKind == "" {
				if err != nil || c.Limits.MaxFuel != 1000 {
					t.Fatalf("Load = %v", err)
				}
				return
			}
			if k := errs.KindOf(err); k != tt.wantKind || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %v (%s), want %s containing %q", err, k, tt.wantKind, tt.want)
			}
		})
	}
}

// TestDataDirModes: the data directory is created 0700; an existing one
// others can write, or another user's, is refused with the fix.
func TestDataDirModes(t *testing.T) {
	tests := []struct {
		name  string
		mode  fs.FileMode // 0 = does not exist yet
		other bool
		want  string
	}{
		{name: "created"},
		{name: "0700", mode: 0o700},
		{name: "0750", mode: 0o750},
		{name: "0755", mode: 0o755},
		{name: "0770", mode: 0o770, want: "is writable by group (mode 0770)"},
		{name: "0777", mode: 0o777, want: "(mode 0777)"},
		{name: "1777 like /tmp", mode: 0o777 | fs.ModeSticky, want: "(mode 1777)"},
		{name: "another user's 0700", mode: 0o700, other: true, want: "is owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "buddy")
			if tt.mode != 0 {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				withMode(t, dir, tt.mode)
				if tt.other {
					chownNobody(t, dir)
				}
			}
			c := Default()
			c.Storage.DataDir = dir
			got, err := c.DataDir()
			if tt.want == "" {
				if err != nil || got != dir {
					t.Fatalf("DataDir = %q, %v", got, err)
				}
				return
			}
			var ie *osfile.InsecureError
			if !errors.As(err, &ie) || errs.KindOf(err) != errs.KindConfig || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DataDir = %v, want a config error containing %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "data directory: "+dir) {
				t.Errorf("message %q does not start with the directory", err)
			}
			if !tt.other && !strings.HasSuffix(err.Error(), "fix: chmod 700 "+dir) {
				t.Errorf("message %q does not end with the fix", err)
			}
		})
	}
}

// TestLocalFile: ./buddy.toml is reported (for the CLI's note), never picked.
func TestLocalFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if got := LocalFile(); got != "" {
		t.Fatalf("LocalFile with none = %q", got)
	}
	writeFile(t, dir, "buddy.toml", "")
	if got := LocalFile(); got != "buddy.toml" {
		t.Fatalf("LocalFile = %q", got)
	}
}

func withMode(t *testing.T, path string, mode fs.FileMode) string {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func chownNobody(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file to another user")
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}
