//go:build linux

package fs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// privateTree is a home directory holding buddy's data directory (with its
// workspace) and ways into it: symlinks to the data directory, to a file in
// it, to its workspace.
type privateTree struct {
	home, data, ws string
}

func newPrivateTree(t testing.TB) privateTree {
	t.Helper()
	home := t.TempDir()
	data := filepath.Join(home, ".local", "share", "buddy")
	ws := filepath.Join(data, "workspace")
	for _, d := range []string{filepath.Join(data, "cache", "wazero"), ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for p, v := range map[string]string{
		filepath.Join(data, "token"):                "t0ken",
		filepath.Join(data, "buddy.db"):             "db",
		filepath.Join(data, "cache", "wazero", "x"): "code",
		filepath.Join(ws, "w.txt"):                  "work",
		filepath.Join(home, "notes.txt"):            "notes",
	} {
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"link":   ".local/share/buddy",
		"tok":    ".local/share/buddy/token",
		"wslink": ".local/share/buddy/workspace",
		"cache":  ".local/share/buddy/cache",
	} {
		if err := os.Symlink(target, filepath.Join(home, link)); err != nil {
			t.Fatal(err)
		}
	}
	return privateTree{home: home, data: data, ws: ws}
}

func (p privateTree) options() Options {
	return Options{PrivateDirs: []string{p.data}, Shared: []string{p.ws}}
}

// TestPrivateDirs: nothing in buddy's data directory is read, written or
// created through a granted directory that holds it, whatever path leads
// there; its workspace and everything else are.
func TestPrivateDirs(t *testing.T) {
	p := newPrivateTree(t)
	r, err := Open([]string{p.home}, p.options())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.dirs[0].guarded {
		t.Fatal("a granted directory holding the data directory is not guarded")
	}
	ctx := t.Context()
	abs := func(rel string) string { return filepath.Join(p.home, rel) }

	reads := []struct {
		path string
		ok   bool
	}{
		{"notes.txt", true},
		{".local/share/buddy/workspace/w.txt", true},
		{"link/workspace/w.txt", true},
		{"wslink/w.txt", true},
		{abs("wslink/w.txt"), true},
		{".local/share/buddy/token", false},
		{abs(".local/share/buddy/token"), false},
		{".local/share/buddy/buddy.db", false},
		{".local/share/buddy/cache/wazero/x", false},
		{"link/token", false},
		{"link/buddy.db", false},
		{"tok", false},
		{"cache/wazero/x", false},
		{abs("link/token"), false},
		{".local/share/buddy/workspace/../token", false}, // ".." is refused anyway
	}
	for _, c := range reads {
		data, err := r.Read(ctx, c.path)
		if c.ok && err != nil {
			t.Errorf("Read(%q): %v", c.path, err)
		}
		if !c.ok {
			if !errors.Is(err, errs.ErrForbidden) || data != nil {
				t.Errorf("Read(%q) = %q, %v; want forbidden", c.path, data, err)
			}
		}
		tg, err := r.Inspect(ctx, c.path, false, nil)
		if err != nil || (tg.Refused == "") != c.ok {
			t.Errorf("Inspect(%q, read) refused %q, err %v; want refused %v", c.path, tg.Refused, err, !c.ok)
		}
	}

	writes := []struct {
		path    string
		ok      bool
		created string // a path (relative to home) the write must not create when refused
	}{
		{"new.txt", true, ""},
		{"sub/new.txt", true, ""},
		{".local/share/buddy/workspace/new.txt", true, ""},
		{"wslink/deep/new.txt", true, ""},
		{"link/workspace/new2.txt", true, ""},
		{".local/share/buddy/token", false, ""},
		{".local/share/buddy/evil", false, ".local/share/buddy/evil"},
		{".local/share/buddy/cache/new/dir/f", false, ".local/share/buddy/cache/new"},
		{"cache/wazero/x", false, ""},
		{"cache/wazero/y", false, ".local/share/buddy/cache/wazero/y"},
		{"link/evil", false, ".local/share/buddy/evil"},
		{"link/sub/evil", false, ".local/share/buddy/sub"},
		{abs("link/buddy.db"), false, ""},
	}
	for _, c := range writes {
		tg, err := r.Inspect(ctx, c.path, true, []byte("x"))
		if err != nil || (tg.Refused == "") != c.ok {
			t.Errorf("Inspect(%q, write) refused %q, err %v; want refused %v", c.path, tg.Refused, err, !c.ok)
		}
		_, err = r.Write(ctx, c.path, []byte("overwritten"))
		if c.ok && err != nil {
			t.Errorf("Write(%q): %v", c.path, err)
		}
		if !c.ok {
			if !errors.Is(err, errs.ErrForbidden) || !strings.Contains(err.Error(), "buddy's own directories") {
				t.Errorf("Write(%q): %v; want forbidden: buddy's own directories", c.path, err)
			}
			if c.created != "" {
				if _, err := os.Lstat(abs(c.created)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("Write(%q) created %s (%v)", c.path, c.created, err)
				}
			}
		}
	}
	// The data directory is as it was.
	for file, want := range map[string]string{"token": "t0ken", "buddy.db": "db", "cache/wazero/x": "code"} {
		if got, err := os.ReadFile(filepath.Join(p.data, file)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", file, got, err, want)
		}
	}
}

// TestPrivateDirsGrants: a grant inside the data directory is refused; its
// workspace, or a directory holding neither, is granted unguarded (no
// per-call check: os.Root keeps every path inside it).
func TestPrivateDirsGrants(t *testing.T) {
	p := newPrivateTree(t)
	other := t.TempDir()
	for _, c := range []struct {
		dir     string
		err     error
		guarded bool
	}{
		{p.data, errs.ErrConfig, false},
		{filepath.Join(p.data, "cache"), errs.ErrConfig, false},
		{filepath.Join(p.home, "link"), errs.ErrConfig, false}, // the data directory through a symlink
		{filepath.Join(p.home, "cache"), errs.ErrConfig, false},
		{p.ws, nil, false},
		{filepath.Join(p.home, "wslink"), nil, false},
		{other, nil, false},
		{p.home, nil, true},
		{filepath.Join(p.home, ".local"), nil, true},
	} {
		r, err := Open([]string{c.dir}, p.options())
		if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
			t.Errorf("Open(%s): %v, want %v", c.dir, err, c.err)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "inside buddy's own directories") {
				t.Errorf("Open(%s): %v, want it to say why", c.dir, err)
			}
			continue
		}
		if r.dirs[0].guarded != c.guarded {
			t.Errorf("Open(%s): guarded %v, want %v", c.dir, r.dirs[0].guarded, c.guarded)
		}
		r.Close()
	}
	// A private directory inside a shared one stays private.
	nested := filepath.Join(p.ws, "instructions")
	if err := os.Mkdir(nested, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(path string) error {
		r, err := Open([]string{p.ws}, Options{PrivateDirs: []string{p.data, nested}, Shared: []string{p.ws}})
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = r.Write(context.Background(), path, []byte("x"))
		return err
	}
	if err := write("instructions/SKILL.md"); !errors.Is(err, errs.ErrForbidden) {
		t.Errorf("a write into a private directory inside the workspace: %v", err)
	}
	if err := write("w2.txt"); err != nil {
		t.Errorf("a write beside it: %v", err)
	}
	// A private directory that does not exist yet still guards.
	r, err := Open([]string{other}, Options{PrivateDirs: []string{filepath.Join(other, "later")}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.dirs[0].guarded {
		t.Error("a missing private directory inside a grant does not guard it")
	}
	if _, err := r.Write(context.Background(), "later/x", []byte("x")); !errors.Is(err, errs.ErrForbidden) {
		t.Errorf("Write into a private directory created later: %v", err)
	}
	if _, err := Open([]string{other}, Options{PrivateDirs: []string{"relative"}}); !errors.Is(err, errs.ErrConfig) {
		t.Errorf("a relative private directory: %v", err)
	}
}

// FuzzPrivateDirs: whatever path a guest sends through a grant that holds
// buddy's data directory, a read never returns what is in it (but its
// workspace), and a write never changes or creates anything in it.
func FuzzPrivateDirs(f *testing.F) {
	p := newPrivateTree(f)
	r, err := Open([]string{p.home}, p.options())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { r.Close() })
	for _, s := range []string{
		"notes.txt", ".local/share/buddy/token", "link/token", "tok", "cache/wazero/x", "link/workspace/w.txt",
		"wslink/w.txt", ".local/share/buddy/cache/new/f", "link/sub/evil", "link/../link/token", "link//token",
		"./link/./token", ".local/share/buddy/workspace/../token", "wslink/../token", p.home + "/link/buddy.db",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	state := func() string {
		var b strings.Builder
		filepath.WalkDir(p.data, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if rel, _ := filepath.Rel(p.data, path); rel == "workspace" {
				return filepath.SkipDir
			}
			b.WriteString(path)
			if !d.IsDir() {
				content, _ := os.ReadFile(path)
				b.Write(content)
			}
			b.WriteByte('\n')
			return nil
		})
		return b.String()
	}
	before := state()
	f.Fuzz(func(t *testing.T, path string, write bool) {
		if write {
			r.Write(context.Background(), path, []byte("planted"))
			if after := state(); after != before {
				t.Fatalf("Write(%q) changed the data directory:\n%s\nwas\n%s", path, after, before)
			}
			return
		}
		data, err := r.Read(context.Background(), path)
		if err == nil && (string(data) == "t0ken" || string(data) == "db" || string(data) == "code") {
			t.Fatalf("Read(%q) = %q: a file of the data directory", path, data)
		}
	})
}
