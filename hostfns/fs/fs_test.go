//go:build unix

package fs

import (
	"bytes"
	"context"
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

func TestOpen(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	must(t, os.WriteFile(file, []byte("x"), 0o644))
	must(t, os.Symlink(file, filepath.Join(tmp, "link-to-file")))
	must(t, os.Symlink("missing", filepath.Join(tmp, "dangling")))
	cases := []struct {
		name string
		dirs []string
		opts Options
		want string // in the message
	}{
		{"relative", []string{"data"}, Options{}, `"data"`},
		{"dot relative", []string{"./data"}, Options{}, `"./data"`},
		{"empty string", []string{""}, Options{}, `""`},
		{"missing", []string{filepath.Join(tmp, "nope")}, Options{}, "nope"},
		{"regular file", []string{file}, Options{}, file},
		{"symlink to file", []string{filepath.Join(tmp, "link-to-file")}, Options{}, "link-to-file"},
		{"dangling symlink", []string{filepath.Join(tmp, "dangling")}, Options{}, "dangling"},
		{"nul", []string{tmp + "/a\x00b"}, Options{}, `a\x00b`},
		{"second is bad", []string{tmp, "rel"}, Options{}, `"rel"`},
		{"no dirs", nil, Options{}, "no allowed directories"},
		{"negative read cap", []string{tmp}, Options{MaxReadBytes: -1}, "negative"},
		{"negative write cap", []string{tmp}, Options{MaxWriteBytes: -1}, "negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Open(c.dirs, c.opts)
			if err == nil {
				r.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, errs.ErrConfig) {
				t.Fatalf("got %v, want a config error", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

func TestOpenCanonicalisesAndCloses(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	data := filepath.Join(tmp, "data")
	must(t, os.Mkdir(data, 0o755))
	must(t, os.WriteFile(filepath.Join(data, "f"), []byte("via link"), 0o644))
	link := filepath.Join(tmp, "link")
	must(t, os.Symlink("data", link))

	r, err := Open([]string{link + "/"}, Options{})
	must(t, err)
	if got := r.Dirs(); !slices.Equal(got, []string{link}) {
		t.Errorf("Dirs() = %q, want the configured form %q", got, link)
	}
	for _, p := range []string{"f", link + "/f", data + "/f"} {
		dir, rel, err := r.Resolve(p)
		if err != nil || dir != data || rel != "f" {
			t.Errorf("Resolve(%q) = %q, %q, %v; want %q, \"f\"", p, dir, rel, err, data)
		}
		got, err := r.Read(t.Context(), p)
		if err != nil || string(got) != "via link" {
			t.Errorf("Read(%q) = %q, %v", p, got, err)
		}
	}
	// The canonical directory was fixed at Open: repointing the link later
	// changes nothing.
	must(t, os.Remove(link))
	must(t, os.Symlink(t.TempDir(), link))
	if got, err := r.Read(t.Context(), link+"/f"); err != nil || string(got) != "via link" {
		t.Errorf("after repointing the link: Read = %q, %v", got, err)
	}

	must(t, r.Close())
	must(t, r.Close())
	_, err = r.Read(t.Context(), "f")
	wantKind(t, err, errs.KindUnavailable, "f")
	_, err = r.Write(t.Context(), "g", []byte("x"))
	wantKind(t, err, errs.KindUnavailable, "g")
}

func TestSeveralRoots(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	nested := filepath.Join(a, "nested")
	for _, d := range []string{a, b, nested} {
		must(t, os.MkdirAll(d, 0o755))
		must(t, os.WriteFile(filepath.Join(d, "who"), []byte(filepath.Base(d)), 0o644))
	}
	r, err := Open([]string{a, b, nested}, Options{})
	must(t, err)
	defer r.Close()
	cases := []struct {
		path, dir, rel, content string
	}{
		{"who", a, "who", "a"},                           // relative: the first directory
		{"nested/who", a, "nested/who", "nested"},        // relative, inside the first
		{b + "/who", b, "who", "b"},                      // absolute in the second
		{b, b, ".", ""},                                  // a directory itself
		{nested + "/who", nested, "who", "nested"},       // the most specific directory wins
		{a + "//./nested//who", nested, "who", "nested"}, // cleaned before matching
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			dir, rel, err := r.Resolve(c.path)
			if err != nil || dir != c.dir || rel != c.rel {
				t.Fatalf("Resolve = %q, %q, %v; want %q, %q", dir, rel, err, c.dir, c.rel)
			}
			if c.content == "" {
				return
			}
			got, err := r.Read(t.Context(), c.path)
			if err != nil || string(got) != c.content {
				t.Fatalf("Read = %q, %v; want %q", got, err, c.content)
			}
		})
	}
}

func TestAllowed(t *testing.T) {
	fx := newFixture(t)
	ctx := t.Context()
	reads := []struct {
		name, path, want string
	}{
		{"relative", "hello.txt", helloContent},
		{"dot relative", "./hello.txt", helloContent},
		{"absolute", fx.data + "/hello.txt", helloContent},
		{"absolute doubled slashes", fx.data + "//hello.txt", helloContent},
		{"subdirectory", "sub/inner.txt", "inner"},
		{"subdirectory absolute", fx.data + "/sub/inner.txt", "inner"},
		{"subdirectory doubled slash", "sub//inner.txt", "inner"},
		// Documented outcome: a relative symlink that stays inside is followed.
		{"final symlink inside", "inside_link", helloContent},
		{"intermediate symlink inside", "sub/up/hello.txt", helloContent},
		{"exactly the read cap", "exact.bin", strings.Repeat("e", fxMax)},
	}
	for _, c := range reads {
		t.Run("read "+c.name, func(t *testing.T) {
			got, err := fx.roots.Read(ctx, c.path)
			if err != nil || string(got) != c.want {
				t.Fatalf("Read(%q) = %q, %v; want %q", c.path, got, err, c.want)
			}
		})
	}

	writes := []struct {
		name, path string
		data       string
		at         string // where it lands, relative to data
	}{
		{"new file", "new.txt", "new", "new.txt"},
		{"creates parents", "a/b/c/new.txt", "deep", "a/b/c/new.txt"},
		{"absolute", fx.data + "/abs.txt", "abs", "abs.txt"},
		{"replaces", "hello.txt", "replaced", "hello.txt"},
		{"unicode", "ünïcødé/日本語 ✓.txt", "unicode", "ünïcødé/日本語 ✓.txt"},
		{"empty", "empty.txt", "", "empty.txt"},
		{"exactly the write cap", "exact-write.bin", strings.Repeat("x", fxMax), "exact-write.bin"},
		// An intermediate symlink that stays inside is followed.
		{"through inside symlink", "sub/up/via-up.txt", "up", "via-up.txt"},
	}
	for _, c := range writes {
		t.Run("write "+c.name, func(t *testing.T) {
			n, err := fx.roots.Write(ctx, c.path, []byte(c.data))
			if err != nil || n != len(c.data) {
				t.Fatalf("Write(%q) = %d, %v; want %d", c.path, n, err, len(c.data))
			}
			got, err := os.ReadFile(filepath.Join(fx.data, c.at))
			if err != nil || string(got) != c.data {
				t.Fatalf("on disk: %q, %v; want %q", got, err, c.data)
			}
			if got, err := fx.roots.Read(ctx, c.path); err != nil || string(got) != c.data {
				t.Fatalf("read back: %q, %v", got, err)
			}
		})
	}

	t.Run("modes", func(t *testing.T) {
		fi, err := os.Stat(filepath.Join(fx.data, "a/b/c/new.txt"))
		must(t, err)
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("new file mode %v, want 0644", fi.Mode().Perm())
		}
		fi, err = os.Stat(filepath.Join(fx.data, "a/b"))
		must(t, err)
		if want := 0o755 &^ umask(); fi.Mode().Perm() != want {
			t.Errorf("new directory mode %v, want %v", fi.Mode().Perm(), want)
		}
		// Replacing keeps the old permission bits.
		p := filepath.Join(fx.data, "private.txt")
		must(t, os.WriteFile(p, []byte("old"), 0o600))
		must(t, os.Chmod(p, 0o600))
		if _, err := fx.roots.Write(t.Context(), "private.txt", []byte("new")); err != nil {
			t.Fatal(err)
		}
		fi, err = os.Stat(p)
		must(t, err)
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("replaced file mode %v, want 0600", fi.Mode().Perm())
		}
	})

	t.Run("documented: write onto an inside symlink is refused", func(t *testing.T) {
		_, err := fx.roots.Write(t.Context(), "inside_link", []byte("x"))
		wantKind(t, err, errs.KindForbidden, "inside_link")
		if fi, err := os.Lstat(filepath.Join(fx.data, "inside_link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatal("the symlink was replaced")
		}
	})

	t.Run("boundaries", func(t *testing.T) {
		_, err := fx.roots.Read(t.Context(), "big.bin") // fxMax+1 bytes
		wantKind(t, err, errs.KindTooLarge, "big.bin")
		_, err = fx.roots.Write(t.Context(), "over.bin", make([]byte, fxMax+1))
		wantKind(t, err, errs.KindTooLarge, "over.bin")
		if _, err := os.Lstat(filepath.Join(fx.data, "over.bin")); !errors.Is(err, iofs.ErrNotExist) {
			t.Fatalf("an oversized write touched the disk: %v", err)
		}
	})

	t.Run("missing", func(t *testing.T) {
		for _, p := range []string{"nope.txt", "nope/deeper.txt", fx.data + "/nope"} {
			_, err := fx.roots.Read(t.Context(), p)
			wantKind(t, err, errs.KindNotFound, p)
			if !errors.Is(err, iofs.ErrNotExist) {
				t.Errorf("Read(%q): errors.Is(err, fs.ErrNotExist) is false", p)
			}
		}
	})

	if d := tempFiles(t, fx.tmp); len(d) > 0 {
		t.Errorf("temporary files left behind: %v", d)
	}
	fx.checkOutsideUnchanged(t)
}

func umask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}

func TestDefaultLimits(t *testing.T) {
	r, err := Open([]string{t.TempDir()}, Options{})
	must(t, err)
	defer r.Close()
	if r.maxRead != DefaultMaxBytes || r.maxWrite != DefaultMaxBytes {
		t.Fatalf("limits %d/%d, want %d", r.maxRead, r.maxWrite, DefaultMaxBytes)
	}
	_, err = r.Write(t.Context(), "big", make([]byte, DefaultMaxBytes+1))
	wantKind(t, err, errs.KindTooLarge, "big")
}

// TestReadSwaps swaps the target between Read's stat and its open, or between
// the fstat and the read, through the test hook: what was actually opened is
// what counts, and a FIFO never blocks.
func TestReadSwaps(t *testing.T) {
	cases := []struct {
		name  string
		stage string
		swap  func(fx *fixture, target string) error
		want  errs.Kind
	}{
		{"fifo after stat", stageOpen, func(fx *fixture, target string) error {
			if err := os.Remove(target); err != nil {
				return err
			}
			return syscall.Mkfifo(target, 0o644)
		}, forbidden},
		{"symlink out after stat", stageOpen, func(fx *fixture, target string) error {
			tmp := target + ".new"
			if err := os.Symlink(filepath.Join(fx.outside, "secret.txt"), tmp); err != nil {
				return err
			}
			return os.Rename(tmp, target)
		}, forbidden},
		{"directory after stat", stageOpen, func(fx *fixture, target string) error {
			if err := os.Remove(target); err != nil {
				return err
			}
			return os.Mkdir(target, 0o755)
		}, forbidden},
		{"bigger file after stat", stageOpen, func(fx *fixture, target string) error {
			return os.WriteFile(target, make([]byte, fxMax+10), 0o644)
		}, tooLarge},
		{"grows after fstat", stageRead, func(fx *fixture, target string) error {
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Write(make([]byte, 2*fxMax))
			return err
		}, tooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx := newFixture(t)
			target := filepath.Join(fx.data, "swapped")
			must(t, os.WriteFile(target, []byte("small"), 0o644))
			fx.roots.hook = func(stage string) error {
				if stage == c.stage {
					return c.swap(fx, target)
				}
				return nil
			}
			var data []byte
			var err error
			finishWithin(t, 5*time.Second, "Read", func() { data, err = fx.roots.Read(t.Context(), "swapped") })
			noSecret(t, "Read", data)
			wantKind(t, err, c.want, "swapped")
		})
	}
}

// TestReadChangesAfterFstat changes the file's content between Read's fstat
// and its read: Read returns what the open file holds when it reads, whole,
// whichever way the size moved (the read that stops at fstat's size ends
// there only when nothing follows it).
func TestReadChangesAfterFstat(t *testing.T) {
	const before = "0123456789"
	cases := []struct {
		name   string
		change func(f *os.File) error
		want   string
	}{
		{"unchanged", func(f *os.File) error { return nil }, before},
		{"grows by one byte", func(f *os.File) error { _, err := f.WriteAt([]byte("+"), 10); return err }, before + "+"},
		{"grows to the limit", func(f *os.File) error {
			_, err := f.WriteAt([]byte(strings.Repeat("x", fxMax-10)), 10)
			return err
		}, before + strings.Repeat("x", fxMax-10)},
		{"shrinks", func(f *os.File) error { return f.Truncate(4) }, before[:4]},
		{"emptied", func(f *os.File) error { return f.Truncate(0) }, ""},
		{"rewritten, same size", func(f *os.File) error { _, err := f.WriteAt([]byte("abcdefghij"), 0); return err }, "abcdefghij"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx := newFixture(t)
			target := filepath.Join(fx.data, "changing")
			must(t, os.WriteFile(target, []byte(before), 0o644))
			fx.roots.hook = func(stage string) error {
				if stage != stageRead {
					return nil
				}
				f, err := os.OpenFile(target, os.O_WRONLY, 0)
				if err != nil {
					return err
				}
				defer f.Close()
				return c.change(f)
			}
			data, err := fx.roots.Read(t.Context(), "changing")
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != c.want {
				t.Fatalf("read %q, want %q", data, c.want)
			}
		})
	}
}

// TestWriteSwaps swaps things under Write between its steps.
func TestWriteSwaps(t *testing.T) {
	t.Run("final name becomes a symlink out before the rename", func(t *testing.T) {
		fx := newFixture(t)
		target := filepath.Join(fx.data, "keep/f.txt")
		fx.roots.hook = func(stage string) error {
			if stage != stageRename {
				return nil
			}
			must(t, os.Remove(target))
			return os.Symlink(filepath.Join(fx.outside, "secret.txt"), target)
		}
		if _, err := fx.roots.Write(t.Context(), "keep/f.txt", []byte("new")); err != nil {
			t.Fatal(err)
		}
		// The rename replaced the link itself; nothing was written through it.
		fi, err := os.Lstat(target)
		must(t, err)
		if !fi.Mode().IsRegular() {
			t.Fatalf("target is %v, want a regular file", fi.Mode())
		}
		fx.checkOutsideUnchanged(t)
	})
	t.Run("final name becomes a directory before the rename", func(t *testing.T) {
		fx := newFixture(t)
		target := filepath.Join(fx.data, "keep/f.txt")
		fx.roots.hook = func(stage string) error {
			if stage != stageRename {
				return nil
			}
			must(t, os.Remove(target))
			return os.Mkdir(target, 0o755)
		}
		_, err := fx.roots.Write(t.Context(), "keep/f.txt", []byte("new"))
		wantKind(t, err, errs.KindForbidden, "keep/f.txt")
		if d := tempFiles(t, fx.data); len(d) > 0 {
			t.Fatalf("temporary files left behind: %v", d)
		}
	})
	t.Run("parent becomes a symlink out after it was opened", func(t *testing.T) {
		fx := newFixture(t)
		keep := filepath.Join(fx.data, "keep")
		fx.roots.hook = func(stage string) error {
			if stage != stageCreate {
				return nil
			}
			if err := os.Rename(keep, keep+".moved"); err != nil {
				return err
			}
			return os.Symlink(fx.outside, keep)
		}
		if _, err := fx.roots.Write(t.Context(), "keep/new.txt", []byte("new")); err != nil {
			t.Fatal(err)
		}
		// The write went into the directory that was opened, now keep.moved.
		if got, err := os.ReadFile(filepath.Join(keep+".moved", "new.txt")); err != nil || string(got) != "new" {
			t.Fatalf("keep.moved/new.txt: %q, %v", got, err)
		}
		fx.checkOutsideUnchanged(t)
	})
}

// TestWriteAtomic fails a write at each step and checks that the old content
// survives and no temporary file is left.
func TestWriteAtomic(t *testing.T) {
	const path = "keep/f.txt"
	stages := []string{stageStart, stageMkdir, stageCreate, stageWrite, stageSync, stageRename}
	check := func(t *testing.T, fx *fixture) {
		t.Helper()
		if got, err := os.ReadFile(filepath.Join(fx.data, path)); err != nil || string(got) != "old" {
			t.Fatalf("old content: %q, %v; want \"old\"", got, err)
		}
		if d := tempFiles(t, fx.tmp); len(d) > 0 {
			t.Fatalf("temporary files left behind: %v", d)
		}
	}
	for _, stage := range stages {
		t.Run("canceled before "+stage, func(t *testing.T) {
			fx := newFixture(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			seen := false
			fx.roots.hook = func(s string) error {
				if s == stage {
					seen = true
					cancel()
				}
				return nil
			}
			_, err := fx.roots.Write(ctx, path, []byte("new content"))
			if !seen {
				t.Fatalf("stage %q never ran", stage)
			}
			wantKind(t, err, errs.KindCanceled, path)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("errors.Is(%v, context.Canceled) is false", err)
			}
			check(t, fx)
		})
		t.Run("I/O failure before "+stage, func(t *testing.T) {
			fx := newFixture(t)
			boom := errors.New("injected failure")
			fx.roots.hook = func(s string) error {
				if s == stage {
					return boom
				}
				return nil
			}
			_, err := fx.roots.Write(t.Context(), path, []byte("new content"))
			wantKind(t, err, errs.KindUnavailable, path)
			if !errors.Is(err, boom) {
				t.Fatalf("errors.Is(%v, boom) is false", err)
			}
			check(t, fx)
		})
	}
	t.Run("deadline already passed", func(t *testing.T) {
		fx := newFixture(t)
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel()
		_, err := fx.roots.Write(ctx, path, []byte("new content"))
		wantKind(t, err, errs.KindTimeout, path)
		_, err = fx.roots.Read(ctx, path)
		wantKind(t, err, errs.KindTimeout, path)
		check(t, fx)
	})
	t.Run("over the write cap", func(t *testing.T) {
		fx := newFixture(t)
		_, err := fx.roots.Write(t.Context(), path, make([]byte, fxMax+1))
		wantKind(t, err, errs.KindTooLarge, path)
		check(t, fx)
	})
	t.Run("read-only directory", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("running as root: root ignores directory permissions, so the write would succeed")
		}
		fx := newFixture(t)
		keep := filepath.Join(fx.data, "keep")
		must(t, os.Chmod(keep, 0o555))
		t.Cleanup(func() { os.Chmod(keep, 0o755) })
		_, err := fx.roots.Write(t.Context(), path, []byte("new content"))
		wantKind(t, err, errs.KindForbidden, path)
		check(t, fx)
	})
	t.Run("success leaves no temporary file", func(t *testing.T) {
		fx := newFixture(t)
		for i := range 5 {
			if _, err := fx.roots.Write(t.Context(), path, []byte{byte('a' + i)}); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := os.ReadFile(filepath.Join(fx.data, path)); !bytes.Equal(got, []byte("e")) {
			t.Fatalf("content %q, want \"e\"", got)
		}
		if d := tempFiles(t, fx.tmp); len(d) > 0 {
			t.Fatalf("temporary files left behind: %v", d)
		}
	})
	t.Run("read canceled", func(t *testing.T) {
		fx := newFixture(t)
		ctx, cancel := context.WithCancel(t.Context())
		fx.roots.hook = func(s string) error {
			if s == stageRead {
				cancel()
			}
			return nil
		}
		_, err := fx.roots.Read(ctx, path)
		wantKind(t, err, errs.KindCanceled, path)
	})
}

func TestQuotePath(t *testing.T) {
	long := strings.Repeat("é", 300) // 600 bytes
	got := quotePath(long)
	if len(got) > maxQuoted+10 || !strings.HasSuffix(got, "...") || !strings.HasPrefix(got, `"éé`) {
		t.Fatalf("quotePath(long) = %s", got)
	}
	if got := quotePath("a\x00b"); got != `"a\x00b"` {
		t.Fatalf("quotePath = %s", got)
	}
}

func TestTempNameOfLongName(t *testing.T) {
	fx := newFixture(t)
	name := strings.Repeat("ß", 127) // 254 bytes: a temporary name must still fit NAME_MAX
	if _, err := fx.roots.Write(t.Context(), name, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(fx.data, name)); err != nil || string(got) != "x" {
		t.Fatalf("%q, %v", got, err)
	}
}

// TestPathDepth: a path of MaxPathDepth elements is written and read; one
// more element is refused before any directory is made.
func TestPathDepth(t *testing.T) {
	dir := t.TempDir()
	r, err := Open([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	deep := strings.Repeat("d/", MaxPathDepth-1) + "f"
	if _, err := r.Write(t.Context(), deep, []byte("x")); err != nil {
		t.Fatalf("a path of %d elements: %v", MaxPathDepth, err)
	}
	if got, err := r.Read(t.Context(), deep); err != nil || string(got) != "x" {
		t.Fatalf("read back %q, %v", got, err)
	}
	for _, p := range []string{"e/" + deep, strings.Repeat("n/", MaxPathDepth) + "f"} {
		_, err := r.Write(t.Context(), p, []byte("x"))
		if !errors.Is(err, errs.ErrInvalidInput) || !strings.Contains(err.Error(), "129 elements, over the 128-element limit") {
			t.Errorf("a path of 129 elements: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "n")); !os.IsNotExist(err) {
		t.Errorf("a refused path made a directory: %v", err)
	}
}
