// Package fs is the filesystem gate behind buddy's read_file and write_file host
// functions: every path a guest supplies is checked lexically, then resolved by
// the kernel beneath one of the operator's allowed directories, each held open as
// an [os.Root] for the life of the [Roots].
//
//	roots, err := fs.Open([]string{"/home/user/sandbox"}, fs.Options{})
//	if err != nil {
//		return err // errs.ErrConfig, naming the directory
//	}
//	defer roots.Close()
//
//	n, err := roots.Write(ctx, "notes/today.md", []byte("hello")) // atomic
//	data, err := roots.Read(ctx, "notes/today.md")
//	_, err = roots.Read(ctx, "../etc/passwd") // errors.Is(err, errs.ErrForbidden)
//
// # Path rules
//
// A guest path is at most [MaxPathBytes] bytes and [MaxPathDepth] elements,
// and not empty ([errs.ErrInvalidInput]).
// It is refused with [errs.ErrForbidden] when it contains a NUL byte or any ".."
// element (even one that would stay inside), or when it is absolute and lies
// in none of the directories. An absolute path may name a directory by the form
// the operator configured or by its canonical form (symlinks resolved at [Open]);
// it must equal the directory or continue with a separator, so "/data-evil" is
// not inside "/data". When several directories contain an absolute path, the
// longest (most specific) one is used. A relative path is resolved against the
// first directory.
//
// Everything after that goes through the directory's os.Root, which resolves one
// component at a time with O_NOFOLLOW and refuses any step that would leave it;
// nothing is checked on a host path and then opened again, so a symlink or a
// directory swapped in during the call can never lead outside.
//
// # Symlinks
//
// A relative symlink whose target stays inside the directory is followed, in the
// middle of a path and (for Read) at its end, as os.Root does. A symlink with an
// absolute target is always refused, even if the target happens to be inside:
// os.Root cannot know where it is mounted. Symlinks leading outside, dangling
// absolute symlinks and symlink loops are refused with [errs.ErrForbidden]; a
// dangling relative symlink that stays inside reads as [errs.ErrNotFound].
// Write never writes through a symlink in the final component: the atomic
// rename would replace the link rather than its target, so an existing symlink
// at the final name is refused with [errs.ErrForbidden], wherever it points.
//
// Hard links are not symlinks: a hard link inside a directory to a file outside
// it (which only someone with access to both could create) is read and replaced
// like any other file. Guests cannot create links.
//
// # Files
//
// Read accepts regular files only. It stats the target first (refusing
// directories, FIFOs, sockets and devices without opening them), then opens it
// with O_NONBLOCK|O_NOCTTY, so that a FIFO swapped in meanwhile cannot block, and
// checks the opened file again with fstat. A file over [Options.MaxReadBytes]
// is refused with [errs.ErrTooLarge] from its size alone, and at most
// MaxReadBytes+1 bytes are ever read, in case it grows.
//
// Write is atomic: it creates missing parent directories (0o755) inside the
// directory, writes the data to a new temporary file in the target's directory
// (".NAME.buddy-tmp-RANDOM", O_CREATE|O_EXCL, mode 0o600 while written), fsyncs
// it, sets its mode (0o644, or the permission bits of the file it replaces,
// without setuid/setgid/sticky, regardless of the umask), renames it onto the
// final name and fsyncs the directory. The parent directory is opened once and
// every later step works inside that open directory. On any failure before the
// rename the temporary file is removed and the old content is left as it was.
// Data over [Options.MaxWriteBytes] is refused before anything touches the disk.
// A replaced file's owner is not preserved: the new file belongs to buddy's user.
//
// # Private files
//
// [Options.Private] names files no guest may read or replace whatever path
// leads to them (buddy's secret store and its key, its database and the
// files beside it, its configuration file, which a grant of a directory
// above them would otherwise expose): Read
// refuses a file that is one of them (the same file, by device and inode,
// however it is reached: a symlink inside the directory, a hard link), and
// Write refuses a name that is one, in the directory it is in, whether the
// file exists yet or not. Both are [errs.ErrForbidden].
//
// # Errors
//
// Every error wraps one of the kinds of internal/base/errs ([errs.ErrForbidden],
// [errs.ErrNotFound], [errs.ErrTooLarge], [errs.ErrInvalidInput],
// [errs.ErrUnavailable] for I/O failures, [errs.ErrCanceled] or [errs.ErrTimeout]
// for the context) and names the path as the guest supplied it, quoted, never
// the canonical directory behind it. OS errors keep their errno, so
// errors.Is(err, fs.ErrNotExist) also works.
package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// MaxPathBytes is the longest guest path accepted, in bytes (Linux's PATH_MAX).
const MaxPathBytes = 4096

// MaxPathDepth is the most elements ("a/b/c" has three) a guest path may
// have: creating a file's parents costs the host work quadratic in their
// depth (os.Root resolves each from the root), and no real tree is this
// deep.
const MaxPathDepth = 128

// DefaultMaxBytes is the read and write cap used when an [Options] field is 0.
const DefaultMaxBytes int64 = 10 << 20

// Options are the limits of a [Roots]. The zero value means the defaults.
type Options struct {
	// MaxReadBytes caps the size of a file Read returns; 0 means DefaultMaxBytes.
	MaxReadBytes int64
	// MaxWriteBytes caps the data Write accepts; 0 means DefaultMaxBytes.
	MaxWriteBytes int64
	// Private are absolute paths of files no guest may read or replace
	// (see "Private files"); they need not exist yet.
	Private []string
	// PrivateDirs are absolute paths of directories no guest reads or
	// writes anything in, except in the Shared directories inside them (see
	// "Private directories" in privatedir.go); they need not exist yet.
	PrivateDirs []string
	Shared      []string
}

// Roots is a set of allowed directories, each held open as an os.Root. It is
// safe for concurrent use; Close it when done.
type Roots struct {
	dirs     []*dir
	maxRead  int64
	maxWrite int64
	private  []string

	privateDirs, shared []string // canonical

	closeOnce sync.Once
	closeErr  error

	// hook, when set (by tests only), is called at each stage of Read and Write;
	// a non-nil return fails the call there as an I/O error would.
	hook func(stage string) error
}

// dir is one allowed directory.
type dir struct {
	configured string // as the operator wrote it, cleaned
	canonical  string // symlinks resolved at Open
	root       *os.Root
	guarded    bool // it holds a private directory: calls check where they lead
	// filesGuarded: it holds the directory of a private file, which calls
	// then look up by name and by device and inode.
	filesGuarded bool
}

// Open opens each directory once as an os.Root. Every directory must be an
// absolute path to an existing directory; it is canonicalised with
// filepath.EvalSymlinks here, once. Errors wrap [errs.ErrConfig] and name the
// directory as given.
func Open(dirs []string, opts Options) (*Roots, error) {
	if opts.MaxReadBytes < 0 || opts.MaxWriteBytes < 0 {
		return nil, errs.New(errs.ErrConfig, fmt.Sprintf("negative file size limit (read %d, write %d)", opts.MaxReadBytes, opts.MaxWriteBytes))
	}
	if len(dirs) == 0 {
		return nil, errs.New(errs.ErrConfig, "no allowed directories")
	}
	r := &Roots{maxRead: opts.MaxReadBytes, maxWrite: opts.MaxWriteBytes}
	for _, p := range opts.Private {
		if !filepath.IsAbs(p) {
			return nil, errs.New(errs.ErrConfig, fmt.Sprintf("private file %q is not an absolute path", p))
		}
		r.private = append(r.private, filepath.Clean(p))
	}
	if r.maxRead == 0 {
		r.maxRead = DefaultMaxBytes
	}
	if r.maxWrite == 0 {
		r.maxWrite = DefaultMaxBytes
	}
	for _, list := range []struct {
		in  []string
		out *[]string
	}{{opts.PrivateDirs, &r.privateDirs}, {opts.Shared, &r.shared}} {
		for _, p := range list.in {
			c, err := canonicalDir(p)
			if err != nil {
				return nil, err
			}
			*list.out = append(*list.out, c)
		}
	}
	for _, name := range dirs {
		d, err := openDir(name)
		if err == nil {
			d.filesGuarded = r.holdsPrivateFile(d)
			d.guarded, err = r.guard(d)
			if err != nil {
				d.root.Close()
			}
		}
		if err != nil {
			r.Close()
			return nil, err
		}
		r.dirs = append(r.dirs, d)
	}
	return r, nil
}

func openDir(name string) (*dir, error) {
	bad := func(reason string, err error) error {
		return errs.Wrap(errs.ErrConfig, fmt.Sprintf("allowed directory %q: %s", name, reason), cause(err))
	}
	switch {
	case name == "":
		return nil, bad("empty path", nil)
	case strings.IndexByte(name, 0) >= 0:
		return nil, bad("contains a NUL byte", nil)
	case !filepath.IsAbs(name):
		return nil, bad("not an absolute path", nil)
	}
	configured := filepath.Clean(name)
	canonical, err := filepath.EvalSymlinks(configured)
	if errors.Is(err, os.ErrNotExist) {
		return nil, bad("does not exist", err)
	} else if err != nil {
		return nil, bad("resolving symlinks", err)
	}
	fi, err := os.Stat(canonical)
	if err != nil {
		return nil, bad("stat", err)
	}
	if !fi.IsDir() {
		return nil, bad("not a directory", nil)
	}
	root, err := os.OpenRoot(canonical)
	if err != nil {
		return nil, bad("opening", err)
	}
	return &dir{configured: configured, canonical: canonical, root: root}, nil
}

// Close closes every directory. Calls after the first return the first
// result; Read and Write after Close fail with [errs.ErrUnavailable].
func (r *Roots) Close() error {
	r.closeOnce.Do(func() {
		var all []error
		for _, d := range r.dirs {
			if err := d.root.Close(); err != nil {
				all = append(all, fmt.Errorf("closing allowed directory %q: %w", d.configured, err))
			}
		}
		r.closeErr = errors.Join(all...)
	})
	return r.closeErr
}

// Dirs returns the allowed directories as the operator configured them
// (cleaned), in order; the first one is where relative paths are resolved.
func (r *Roots) Dirs() []string {
	out := make([]string, len(r.dirs))
	for i, d := range r.dirs {
		out[i] = d.configured
	}
	return out
}

// Resolve applies the lexical rules to a guest path and returns the canonical
// directory it falls in and the cleaned path relative to that directory ("."
// for the directory itself). It touches no file: symlinks inside the path are
// resolved later, by the kernel, beneath dir. filepath.Join(dir, rel) is the
// canonical location to show an approver, up to symlinks inside the directory.
func (r *Roots) Resolve(path string) (dir string, rel string, err error) {
	d, rel, err := r.resolve("resolve", path)
	if err != nil {
		return "", "", err
	}
	return d.canonical, rel, nil
}

func (r *Roots) resolve(op, path string) (*dir, string, error) {
	switch {
	case path == "":
		return nil, "", pathErr(op, path, errs.ErrInvalidInput, "empty path", nil)
	case len(path) > MaxPathBytes:
		return nil, "", pathErr(op, path, errs.ErrInvalidInput, fmt.Sprintf("path is %d bytes, over the %d-byte limit", len(path), MaxPathBytes), nil)
	case depth(path) > MaxPathDepth:
		return nil, "", pathErr(op, path, errs.ErrInvalidInput, fmt.Sprintf("path has %d elements, over the %d-element limit", depth(path), MaxPathDepth), nil)
	case strings.IndexByte(path, 0) >= 0:
		return nil, "", pathErr(op, path, errs.ErrForbidden, "path contains a NUL byte", nil)
	case hasDotDot(path):
		return nil, "", pathErr(op, path, errs.ErrForbidden, `path contains a ".." element`, nil)
	}
	if len(r.dirs) == 0 {
		return nil, "", pathErr(op, path, errs.ErrForbidden, "no allowed directories", nil)
	}
	if !filepath.IsAbs(path) {
		// Also refuses volume-relative forms on Windows ("C:x", `\x`): IsAbs is
		// false for them, and os.Root refuses them below as escapes.
		return r.dirs[0], filepath.Clean(path), nil
	}
	clean := filepath.Clean(path)
	var best *dir
	var bestRel string
	bestLen := -1
	for _, d := range r.dirs {
		for _, form := range [2]string{d.configured, d.canonical} {
			if rel, ok := within(form, clean); ok && len(form) > bestLen {
				best, bestRel, bestLen = d, rel, len(form)
			}
		}
	}
	if best == nil {
		return nil, "", pathErr(op, path, errs.ErrForbidden, "outside the allowed directories", nil)
	}
	return best, bestRel, nil
}

// hasDotDot reports whether any element of path is "..".
func hasDotDot(path string) bool {
	start := 0
	for i := 0; i <= len(path); i++ {
		if i == len(path) || os.IsPathSeparator(path[i]) {
			if path[start:i] == ".." {
				return true
			}
			start = i + 1
		}
	}
	return false
}

// namesDirectory reports whether path ends in a separator or a "." element,
// i.e. can only name a directory.
func namesDirectory(path string) bool {
	last := path[len(path)-1]
	if os.IsPathSeparator(last) {
		return true
	}
	return path == "." || (last == '.' && len(path) >= 2 && os.IsPathSeparator(path[len(path)-2]))
}

// within reports whether the clean absolute path p is dir or below it, and
// returns p relative to dir.
func within(dir, p string) (string, bool) {
	if p == dir {
		return ".", true
	}
	if os.IsPathSeparator(dir[len(dir)-1]) { // "/" itself, or a volume root
		if strings.HasPrefix(p, dir) {
			return p[len(dir):], true
		}
		return "", false
	}
	if len(p) > len(dir) && strings.HasPrefix(p, dir) && os.IsPathSeparator(p[len(dir)]) {
		return p[len(dir)+1:], true
	}
	return "", false
}

func (r *Roots) step(ctx context.Context, op, path, stage string) error {
	if err := ctx.Err(); err != nil {
		return ctxErr(op, path, err)
	}
	if r.hook != nil {
		if err := r.hook(stage); err != nil {
			return pathErr(op, path, errs.ErrUnavailable, stage, err)
		}
		if err := ctx.Err(); err != nil {
			return ctxErr(op, path, err)
		}
	}
	return nil
}

// depth counts a path's elements: the non-empty parts between slashes.
func depth(path string) int {
	n := 0
	for _, part := range strings.Split(path, "/") {
		if part != "" {
			n++
		}
	}
	return n
}

// privateReason is why a guest may not touch a private file.
const privateReason = "is one of buddy's private files (its secret store, database, keys or configuration): no skill reads or replaces them"

// isPrivate reports whether fi, found in d, is one of the private files.
// Only a directory that holds a private file's directory, or a hard link,
// can lead to one (os.Root keeps every path inside d): elsewhere the
// private files are not looked up.
func (r *Roots) isPrivate(d *dir, fi os.FileInfo) bool {
	if len(r.private) == 0 || !d.filesGuarded && links(fi) <= 1 {
		return false
	}
	for _, p := range r.private {
		if pfi, err := os.Stat(p); err == nil && os.SameFile(fi, pfi) {
			return true
		}
	}
	return false
}

// privateName reports whether the name base in the directory parent of d
// (as the guest's path resolved it) is one of the private files, existing
// or not, or is a link to one.
func (r *Roots) privateName(d *dir, parent *os.Root, base string) bool {
	if len(r.private) == 0 {
		return false
	}
	if fi, err := parent.Lstat(base); err == nil && r.isPrivate(d, fi) {
		return true
	}
	if !d.filesGuarded {
		return false
	}
	dfi, err := parent.Stat(".")
	if err != nil {
		return false
	}
	for _, p := range r.private {
		if !strings.EqualFold(filepath.Base(p), base) {
			continue
		}
		if pfi, err := os.Stat(filepath.Dir(p)); err == nil && os.SameFile(dfi, pfi) {
			return true
		}
	}
	return false
}
