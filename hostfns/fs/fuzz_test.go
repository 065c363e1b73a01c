//go:build unix

package fs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// FuzzResolvePath checks, for any path: if Resolve accepts it, the location is
// inside the directory; if Read or Write accepts it, Resolve did too, the file
// really is inside (canonical paths compared with filepath.Rel), no secret was
// read and nothing outside changed. Refusals are of a guest-facing kind and
// name the path.
func FuzzResolvePath(f *testing.F) {
	fx := newFixture(f)
	for _, c := range hostileCases(fx) {
		f.Add(c.path)
	}
	for _, p := range []string{
		"hello.txt", "sub/inner.txt", "./hello.txt", fx.data + "/hello.txt",
		"inside_link", "sub/up/hello.txt", "sub/up/sub/up/new.txt", "new/dir/file.txt",
		"...", ".../x", "..a", "a..", `..\x`, "~/x", "C:\\x", "sub/./inner.txt",
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		dir, rel, rerr := fx.roots.Resolve(p)
		if rerr == nil {
			if dir != fx.data {
				t.Fatalf("Resolve(%q) dir = %q, not the root", p, dir)
			}
			// Lexically inside: Resolve touches no file, so symlinks are
			// for os.Root (and for checkInside below) to judge.
			r, err := filepath.Rel(dir, filepath.Join(dir, rel))
			if err != nil || r == ".." || strings.HasPrefix(r, "../") || filepath.IsAbs(rel) || hasDotDot(rel) {
				t.Fatalf("Resolve(%q) = %q, %q: outside the root", p, dir, rel)
			}
		} else {
			checkRefusal(t, rerr, p)
		}

		data, err := fx.roots.Read(t.Context(), p)
		noSecret(t, "Read", data)
		if err == nil {
			if rerr != nil {
				t.Fatalf("Read(%q) succeeded but Resolve refused: %v", p, rerr)
			}
			checkInside(t, fx, rel)
		} else {
			checkRefusal(t, err, p)
		}

		_, err = fx.roots.Write(t.Context(), p, []byte("fuzz"))
		if err == nil {
			if rerr != nil {
				t.Fatalf("Write(%q) succeeded but Resolve refused: %v", p, rerr)
			}
			checkInside(t, fx, rel)
			root, err := os.OpenRoot(fx.data)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			if got, err := root.ReadFile(rel); err != nil || string(got) != "fuzz" {
				t.Fatalf("Write(%q) succeeded but %q inside holds %q, %v", p, rel, got, err)
			}
		} else {
			checkRefusal(t, err, p)
		}
		fx.checkOutsideUnchanged(t)
	})
}

// hostPathMax is Linux's PATH_MAX: host paths at least this long cannot be
// resolved with filepath.EvalSymlinks.
const hostPathMax = 4096

// escapes reports whether p, canonicalised as far as it exists, is outside dir.
func escapes(dir, p string) bool {
	// Canonicalise the longest existing prefix; the rest is lexical.
	rest := ""
	for {
		if c, err := filepath.EvalSymlinks(p); err == nil {
			p = filepath.Join(c, rest)
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			return true
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
	r, err := filepath.Rel(dir, p)
	return err != nil || r == ".." || strings.HasPrefix(r, "../") || filepath.IsAbs(r)
}

// checkInside fails unless the existing file at rel is inside the root.
func checkInside(t *testing.T, fx *fixture, rel string) {
	t.Helper()
	if len(fx.data)+1+len(rel) >= hostPathMax {
		// Too long for the host's own path functions (EvalSymlinks would fail
		// with ENAMETOOLONG): only os.Root can look at it. The outside
		// snapshot still checks that nothing escaped.
		return
	}
	c, err := filepath.EvalSymlinks(filepath.Join(fx.data, rel))
	if err != nil {
		t.Fatalf("accepted %q but cannot find it: %v", rel, err)
	}
	if escapes(fx.data, c) {
		t.Fatalf("accepted %q, which is %q, outside the root", rel, c)
	}
}

// checkRefusal fails unless err is a kind a guest may see for a path and names it.
func checkRefusal(t *testing.T, err error, p string) {
	t.Helper()
	switch k := errs.KindOf(err); k {
	case errs.KindForbidden, errs.KindNotFound, errs.KindInvalidInput, errs.KindTooLarge:
	default:
		t.Fatalf("path %q: unexpected kind %s: %v", p, k, err)
	}
	if !strings.Contains(err.Error(), quotePath(p)) {
		t.Fatalf("error %q does not name the path", err)
	}
}
