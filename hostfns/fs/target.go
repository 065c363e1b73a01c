package fs

import (
	"bytes"
	"context"
	"errors"
	"io"
	iofs "io/fs"
	"path/filepath"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// MaxDiffBytes is the largest old or new content Inspect compares line by
// line for a diff summary; larger files get none.
const MaxDiffBytes = 1 << 20

// Target is what a Read or a Write of one guest path would touch, found by
// Inspect without writing anything: the same lexical rules and the same
// os.Root resolution as Read and Write.
type Target struct {
	// Path is the canonical location: the canonical allowed directory joined
	// with the cleaned path inside it (symlinks inside the directory are
	// followed by the kernel at call time, beneath the directory).
	Path string
	// Dir is the canonical allowed directory Path is in.
	Dir string
	// Exists says a file is there now; Size is its size.
	Exists bool
	Size   int64
	// Write targets: Create is true when the file will be created, false
	// when it will be overwritten; Bytes is how many bytes will be written.
	Write  bool
	Create bool
	Bytes  int64
	// Diffed says Added and Removed count the lines the write adds and
	// removes (by content, as a multiset): set when an existing UTF-8 text
	// file of at most MaxDiffBytes is overwritten with UTF-8 text.
	Diffed         bool
	Added, Removed int
	// Refused, when not "", is why the call would be refused (forbidden):
	// the path leaves the directories, names a directory, a symlink, a FIFO.
	Refused string
}

// Inspect resolves the guest path a Read (write false) or a Write of data
// (write true) would touch, without side effects: it stats the target and,
// for a diff summary, reads an existing text file that a write would replace.
// Policy refusals are reported in Target.Refused, not as errors; an error is
// returned only for a canceled ctx.
func (r *Roots) Inspect(ctx context.Context, path string, write bool, data []byte) (Target, error) {
	op := opRead
	if write {
		op = opWrite
	}
	t := Target{Write: write, Bytes: int64(len(data))}
	if err := ctx.Err(); err != nil {
		return t, ctxErr(op, path, err)
	}
	refuse := func(err error) (Target, error) {
		if errors.Is(err, errs.ErrForbidden) {
			t.Refused = err.Error()
		}
		return t, nil
	}
	d, rel, err := r.resolve(op, path)
	if err != nil {
		return refuse(err)
	}
	t.Dir, t.Path = d.canonical, filepath.Join(d.canonical, rel)
	if rel == "." || namesDirectory(path) {
		return refuse(pathErr(op, path, errs.ErrForbidden, "is a directory", nil))
	}
	if !write {
		fi, err := d.root.Stat(rel)
		if err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				return t, nil
			}
			return refuse(osErr(op, path, "stat", err))
		}
		t.Exists, t.Size = true, fi.Size()
		if err := r.checkReadable(path, fi); err != nil {
			return refuse(err)
		}
		if r.isPrivate(d, fi) {
			return refuse(pathErr(op, path, errs.ErrForbidden, privateReason, nil))
		}
		if d.guarded {
			f, err := d.root.OpenFile(rel, readFlags, 0)
			if err != nil {
				return refuse(osErr(op, path, "opening", err))
			}
			err = r.checkOpened(op, path, d, f, "")
			f.Close()
			if err != nil {
				return refuse(err)
			}
		}
		return t, nil
	}
	if err := r.checkDirPath(op, path, d, filepath.Dir(rel), filepath.Base(rel)); err != nil {
		return refuse(err)
	}
	if len(r.private) > 0 {
		if parent, err := d.root.OpenRoot(filepath.Dir(rel)); err == nil {
			private := r.privateName(d, parent, filepath.Base(rel))
			parent.Close()
			if private {
				return refuse(pathErr(op, path, errs.ErrForbidden, privateReason, nil))
			}
		}
	}
	fi, err := d.root.Lstat(rel)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		t.Create = true
		return t, nil
	case err != nil:
		return refuse(osErr(op, path, "stat", err))
	}
	t.Exists, t.Size = true, fi.Size()
	if err := checkWritable(path, fi); err != nil {
		return refuse(err)
	}
	if fi.Size() <= MaxDiffBytes && len(data) <= MaxDiffBytes && utf8.Valid(data) {
		if old, ok := readSmall(d, rel); ok && utf8.Valid(old) {
			t.Diffed = true
			t.Added, t.Removed = lineDiff(old, data)
		}
	}
	return t, nil
}

// readSmall reads a regular file of at most MaxDiffBytes through the root.
func readSmall(d *dir, rel string) ([]byte, bool) {
	f, err := d.root.OpenFile(rel, readFlags, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxDiffBytes+1))
	if err != nil || len(b) > MaxDiffBytes {
		return nil, false
	}
	return b, true
}

// lineDiff counts the lines of new that old lacks (added) and the lines of
// old that new lacks (removed), each line counted as often as it occurs.
func lineDiff(old, new []byte) (added, removed int) {
	count := map[string]int{}
	for _, l := range lines(old) {
		count[string(l)]++
	}
	for _, l := range lines(new) {
		if count[string(l)] > 0 {
			count[string(l)]--
		} else {
			added++
		}
	}
	for _, n := range count {
		removed += n
	}
	return added, removed
}

func lines(b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

// Canonical returns the canonical location of a guest path (see
// Target.Path), or "" when the lexical rules refuse it.
func (r *Roots) Canonical(path string) string {
	d, rel, err := r.resolve("resolve", path)
	if err != nil {
		return ""
	}
	return filepath.Join(d.canonical, rel)
}
