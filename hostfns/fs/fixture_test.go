//go:build unix

package fs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/errs"
)

// The fixture's secrets: no successful Read may ever return them.
const (
	secretOutside = "SECRET-outside-9f2c41"
	secretEvil    = "SECRET-data-evil-77ab"
	helloContent  = "hello, inside"
	fxMax         = 64 // the fixture's read and write caps
)

// fixture is a tree in a temporary directory:
//
//	tmp/data/         the allowed directory (hello.txt, sub/, dir/, symlinks, a FIFO, ...)
//	tmp/data-evil/    a sibling whose name starts with "data"
//	tmp/data2/        another sibling
//	tmp/outside/      secrets
type fixture struct {
	tmp, data, outside, evil string
	roots                    *Roots
	hasDevice                bool // data/zero_dev is a character device (needs CAP_MKNOD)
	before                   map[string]string
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	tmp, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	fx := &fixture{
		tmp:     tmp,
		data:    filepath.Join(tmp, "data"),
		outside: filepath.Join(tmp, "outside"),
		evil:    filepath.Join(tmp, "data-evil"),
	}
	for _, d := range []string{"data/sub", "data/dir", "data/keep", "outside/dir", "data-evil", "data2"} {
		must(tb, os.MkdirAll(filepath.Join(tmp, d), 0o755))
	}
	files := map[string]string{
		"data/hello.txt":       helloContent,
		"data/sub/inner.txt":   "inner",
		"data/keep/f.txt":      "old",
		"data/big.bin":         strings.Repeat("b", fxMax+1),
		"data/exact.bin":       strings.Repeat("e", fxMax),
		"outside/secret.txt":   secretOutside,
		"outside/dir/deep.txt": secretOutside,
		"data-evil/secret":     secretEvil,
		"data2/x":              secretEvil,
	}
	for name, content := range files {
		must(tb, os.WriteFile(filepath.Join(tmp, name), []byte(content), 0o644))
	}
	links := map[string]string{
		"link_out_abs":     filepath.Join(tmp, "outside/secret.txt"),
		"link_out_rel":     "../outside/secret.txt",
		"link_dir_out":     fx.outside,
		"link_dir_out_rel": "../outside",
		"chain1":           "chain2",
		"chain2":           "chain3",
		"chain3":           "../outside/secret.txt",
		"chain_dir":        "link_dir_out_rel",
		"link_root":        "/",
		"link_root_rel":    strings.Repeat("../", 40),
		"loop_a":           "loop_b",
		"loop_b":           "loop_a",
		"self_loop":        "self_loop",
		"dangling":         "missing-target",
		"dangling_out":     "/nonexistent-buddy-target",
		"dangling_out_rel": "../outside/missing",
		"dev_zero":         "/dev/zero",
		"dev_zero_rel":     strings.Repeat("../", 40) + "dev/zero",
		"proc_environ":     "/proc/self/environ",
		"link_evil":        "../data-evil/secret",
		"link_evil_abs":    filepath.Join(fx.evil, "secret"),
		"link_fifo":        "fifo",
		"inside_link":      "hello.txt",
		"abs_inside":       filepath.Join(fx.data, "hello.txt"), // absolute: refused even though inside
		"sub/upup":         "../..",
		"sub/link_up_out":  "../../outside/secret.txt",
		"sub/up":           "..",
	}
	for name, target := range links {
		must(tb, os.Symlink(target, filepath.Join(fx.data, name)))
	}
	must(tb, syscall.Mkfifo(filepath.Join(fx.data, "fifo"), 0o644))
	// A socket inode without binding: mknod(S_IFSOCK) needs no privilege, and
	// avoids the 108-byte sun_path limit of long temporary paths.
	must(tb, syscall.Mknod(filepath.Join(fx.data, "sock"), syscall.S_IFSOCK|0o644, 0))
	// /dev/zero's numbers (1, 5), in Linux's encoding; only with CAP_MKNOD.
	if err := syscall.Mknod(filepath.Join(fx.data, "zero_dev"), syscall.S_IFCHR|0o666, 1<<8|5); err == nil {
		fx.hasDevice = true
	}
	fx.roots, err = Open([]string{fx.data}, Options{MaxReadBytes: fxMax, MaxWriteBytes: fxMax})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fx.roots.Close() })
	fx.before = snapshot(tb, tmp)
	return fx
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// snapshot describes every entry under dir: type, link target or content, and
// permission bits. It never opens anything but regular files.
func snapshot(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	return snapshotExcept(tb, dir, nil)
}

// snapshotExcept is snapshot without the entries (and subtrees) skip selects.
func snapshotExcept(tb testing.TB, dir string, skip func(rel string) bool) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + t
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + strconv.Quote(string(b))
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// diffSnapshots lists what differs between two snapshots.
func diffSnapshots(before, after map[string]string, skip func(string) bool) []string {
	var diffs []string
	for k, v := range before {
		if skip != nil && skip(k) {
			continue
		}
		if w, ok := after[k]; !ok {
			diffs = append(diffs, "removed "+k)
		} else if w != v {
			diffs = append(diffs, "changed "+k+": "+v+" => "+w)
		}
	}
	for k := range after {
		if skip != nil && skip(k) {
			continue
		}
		if _, ok := before[k]; !ok {
			diffs = append(diffs, "created "+k)
		}
	}
	return diffs
}

// outsideOnly skips the allowed directory: what is outside it must never change.
func (fx *fixture) outsideOnly(rel string) bool {
	return rel == "data" || strings.HasPrefix(rel, "data"+string(filepath.Separator))
}

// checkOutsideUnchanged fails if anything outside data was created, removed or
// modified since the fixture was built.
func (fx *fixture) checkOutsideUnchanged(tb testing.TB) {
	tb.Helper()
	if d := diffSnapshots(fx.before, snapshotExcept(tb, fx.tmp, fx.outsideOnly), fx.outsideOnly); len(d) > 0 {
		tb.Fatalf("outside the allowed directory changed: %v", d)
	}
}

// noSecret fails if data holds any of the fixture's secrets.
func noSecret(tb testing.TB, what string, data []byte) {
	tb.Helper()
	for _, s := range []string{secretOutside, secretEvil} {
		if bytes.Contains(data, []byte(s)) {
			tb.Fatalf("%s returned a secret from outside the allowed directory: %q", what, data)
		}
	}
}

// tempFiles lists the temporary files Write left under dir.
func tempFiles(tb testing.TB, dir string) []string {
	tb.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), tempMarker) {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// finishWithin runs f, failing the test if it does not return within d (a FIFO
// opened the wrong way blocks forever).
func finishWithin(tb testing.TB, d time.Duration, what string, f func()) {
	tb.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		tb.Fatalf("%s did not return within %v (blocked?)", what, d)
	}
}

// wantKind fails unless err is of kind want and names the guest path.
func wantKind(tb testing.TB, err error, want errs.Kind, path string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("got no error, want %s", want)
	}
	if got := errs.KindOf(err); got != want {
		tb.Fatalf("got kind %s (%v), want %s", got, err, want)
	}
	if !errors.Is(err, errs.Sentinel(want)) {
		tb.Fatalf("errors.Is(%v, %v) is false", err, errs.Sentinel(want))
	}
	quoted := strconv.Quote(path)
	if len(quoted) > 200 {
		quoted = quoted[:200]
	}
	if !strings.Contains(err.Error(), quoted) {
		tb.Fatalf("error %q does not name the path %s", err, quoted)
	}
}
