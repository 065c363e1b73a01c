//go:build unix

package osfile

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// otherUID is a uid that is neither the test's nor root's ("nobody").
const otherUID = 65534

// chownOther gives path to another user, which only root can do.
func chownOther(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file to another user")
	}
	if err := os.Lchown(path, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
}

func mkdirMode(t *testing.T, path string, mode fs.FileMode) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPrivateDir(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, path string) string // returns the path to check
		want  string                                 // "" = accepted; else in the error
	}{
		{name: "created 0700", setup: func(t *testing.T, p string) string { return p }},
		{name: "created with its parents", setup: func(t *testing.T, p string) string { return filepath.Join(p, "a", "b") }},
		{name: "existing 0700", setup: func(t *testing.T, p string) string { return mkdirMode(t, p, 0o700) }},
		{name: "existing 0750: others may read, not write", setup: func(t *testing.T, p string) string { return mkdirMode(t, p, 0o750) }},
		{name: "existing 0755", setup: func(t *testing.T, p string) string { return mkdirMode(t, p, 0o755) }},
		{name: "0770 group-writable", setup: func(t *testing.T, p string) string { return mkdirMode(t, p, 0o770) },
			want: "is writable by group (mode 0770)"},
		{name: "0707 world-writable", setup: func(t *testing.T, p string) string { return mkdirMode(t, p, 0o707) },
			want: "is writable by others (mode 0707)"},
		{name: "0777", setup: func(t *testing.T, p string) string { return mkdirMode(t, p, 0o777) },
			want: "is writable by group and others (mode 0777)"},
		{name: "sticky 1777 like /tmp", setup: func(t *testing.T, p string) string { return mkdirMode(t, p, 0o777|fs.ModeSticky) },
			want: "(mode 1777)"},
		{name: "symlink to a private directory", setup: func(t *testing.T, p string) string {
			target := mkdirMode(t, p+"-target", 0o700)
			must(t, os.Symlink(target, p))
			return p
		}},
		{name: "symlink to a shared directory", setup: func(t *testing.T, p string) string {
			target := mkdirMode(t, p+"-target", 0o777)
			must(t, os.Symlink(target, p))
			return p
		}, want: "writable by group and others"},
		{name: "a regular file", setup: func(t *testing.T, p string) string {
			return writeFile(t, p, nil, 0o600)
		}, want: "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.setup(t, filepath.Join(t.TempDir(), "data"))
			err := PrivateDir(path)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("PrivateDir = %v, want nil", err)
				}
				fi, err := os.Stat(path)
				if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
					t.Fatalf("after PrivateDir: %v, %v", fi, err)
				}
				return
			}
			if errs.KindOf(err) != errs.KindConfig || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("PrivateDir = %v (%s), want a config error containing %q", err, errs.KindOf(err), tt.want)
			}
		})
	}
}

// TestPrivateDirCreatesOwnerOnly: new directories are 0700, whatever the umask
// allows.
func TestPrivateDirCreatesOwnerOnly(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "x", "y")
	must(t, PrivateDir(path))
	for _, p := range []string{filepath.Join(base, "x"), path} {
		fi, err := os.Stat(p)
		must(t, err)
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", p, fi.Mode().Perm())
		}
	}
}

// TestPrivateDirFixMessage: the error names the command that fixes it, and
// running that command makes the directory acceptable.
func TestPrivateDirFixMessage(t *testing.T) {
	for _, name := range []string{"data", "my data", "it's"} {
		t.Run(name, func(t *testing.T) {
			path := mkdirMode(t, filepath.Join(t.TempDir(), name), 0o777)
			err := PrivateDir(path)
			var ie *InsecureError
			if !errors.As(err, &ie) || ie.Path != path || !ie.Dir {
				t.Fatalf("PrivateDir = %v, want an InsecureError for %s", err, path)
			}
			msg := err.Error()
			i := strings.Index(msg, "fix: ")
			if i < 0 {
				t.Fatalf("no fix in %q", msg)
			}
			fix := msg[i+len("fix: "):]
			if !strings.HasPrefix(fix, "chmod 700 ") {
				t.Fatalf("fix = %q", fix)
			}
			if out, err := exec.Command("sh", "-c", fix).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", fix, err, out)
			}
			if err := PrivateDir(path); err != nil {
				t.Fatalf("after %q: %v", fix, err)
			}
		})
	}
}

func TestPrivateDirOtherOwner(t *testing.T) {
	for _, mode := range []fs.FileMode{0o700, 0o755} {
		path := mkdirMode(t, filepath.Join(t.TempDir(), "data"), mode)
		chownOther(t, path)
		err := PrivateDir(path)
		var ie *InsecureError
		if !errors.As(err, &ie) || ie.Owner != otherUID || errs.KindOf(err) != errs.KindConfig {
			t.Fatalf("mode %v: PrivateDir = %v, want an InsecureError naming uid %d", mode, err, otherUID)
		}
		if !strings.Contains(err.Error(), "owned by uid 65534, not by the user running buddy") || !strings.Contains(err.Error(), "chown 0 "+path) {
			t.Errorf("message = %q", err)
		}
	}
}

func TestReadPrivate(t *testing.T) {
	tests := []struct {
		name  string
		mode  fs.FileMode
		other bool // owned by another user
		want  string
	}{
		{name: "0600", mode: 0o600},
		{name: "0644", mode: 0o644},
		{name: "0400", mode: 0o400},
		{name: "0664 group-writable", mode: 0o664, want: "%s is writable by group (mode 0664)"},
		{name: "0646 world-writable", mode: 0o646, want: "writable by others (mode 0646)"},
		{name: "0666", mode: 0o666, want: "writable by group and others (mode 0666): a file others can change must not decide what skills may do; fix: chmod 600 %s"},
		{name: "another user's 0600", mode: 0o600, other: true, want: "%s is owned by uid 65534"},
		{name: "another user's 0644", mode: 0o644, other: true, want: "owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, filepath.Join(t.TempDir(), "buddy.toml"), []byte("x = 1\n"), tt.mode)
			if tt.other {
				chownOther(t, path)
			}
			data, err := ReadPrivate(path, 1<<10)
			if tt.want == "" {
				if err != nil || string(data) != "x = 1\n" {
					t.Fatalf("ReadPrivate = %q, %v", data, err)
				}
				return
			}
			want := tt.want
			if strings.Contains(want, "%s") {
				want = strings.ReplaceAll(want, "%s", path)
			}
			if errs.KindOf(err) != errs.KindConfig || !strings.Contains(err.Error(), want) {
				t.Fatalf("ReadPrivate = %v, want a config error containing %q", err, want)
			}
		})
	}
	t.Run("a symlink is judged by its target", func(t *testing.T) {
		dir := t.TempDir()
		target := writeFile(t, filepath.Join(dir, "shared.toml"), nil, 0o666)
		link := filepath.Join(dir, "buddy.toml")
		must(t, os.Symlink(target, link))
		if _, err := ReadPrivate(link, 1<<10); errs.KindOf(err) != errs.KindConfig {
			t.Fatalf("ReadPrivate through a symlink to a 0666 file = %v, want config", err)
		}
	})
	t.Run("still bounded", func(t *testing.T) {
		path := writeFile(t, filepath.Join(t.TempDir(), "buddy.toml"), make([]byte, 2048), 0o600)
		if _, err := ReadPrivate(path, 1<<10); errs.KindOf(err) != errs.KindTooLarge {
			t.Fatalf("ReadPrivate of 2 KiB with a 1 KiB cap = %v, want too_large", err)
		}
	})
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/home/me/.local/share/buddy": "/home/me/.local/share/buddy",
		"/tmp/my data":                "'/tmp/my data'",
		"/tmp/it's":                   `'/tmp/it'\''s'`,
		"/tmp/\x1b[31mred":            `"/tmp/\x1b[31mred"`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
