package fs

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// # Private directories
//
// [Options.PrivateDirs] are directories no guest reads or writes anything
// in, however its path gets there (buddy's data directory: its database,
// token, keys, installed skills and compiled code; the directory its
// configuration is looked for in), except in the
// [Options.Shared] directories inside them (buddy's workspace). A granted
// directory inside one is refused at Open ([errs.ErrConfig]); a granted
// directory that holds one (a home directory holding buddy's data directory)
// is guarded: every Read, Write and Inspect in it checks where the kernel
// actually resolved the path — the open file's or directory's own path, read
// back from /proc/self/fd, so that a symlink inside the granted directory
// leads nowhere private either — and refuses a private one
// ([errs.ErrForbidden]) before reading, and before creating a directory or
// a file. A granted directory that neither holds nor lies in a private one
// costs nothing: os.Root keeps every path inside it. Not covered: a hard
// link or a bind mount that brings a private file into a granted directory
// from outside (the files named in [Options.Private] are still checked by
// device and inode).

// privateDirReason is why a guest may not touch a path in a private directory.
const privateDirReason = "is in buddy's own directories (its data: database, token, keys, skills, compiled code; its configuration): no skill reads or writes there"

// inPrivateDir reports whether the canonical path p is in a private
// directory and not in a shared one inside it: the innermost of the
// directories holding p decides (a private directory inside a shared one,
// SKILL.md skills kept in the workspace, stays private).
func (r *Roots) inPrivateDir(p string) bool {
	deepest := func(dirs []string) int {
		n := -1
		for _, d := range dirs {
			if _, ok := within(d, p); ok {
				n = max(n, len(d))
			}
		}
		return n
	}
	priv := deepest(r.privateDirs)
	return priv >= 0 && priv > deepest(r.shared)
}

// guard classifies a granted directory: an error when it lies in a private
// directory, else whether it holds one (and so needs checking per call).
func (r *Roots) guard(d *dir) (bool, error) {
	if r.inPrivateDir(d.canonical) {
		return false, errs.New(errs.ErrConfig, fmt.Sprintf("allowed directory %q is inside buddy's own directories (its data or its configuration): no skill may be granted buddy's files (grant its workspace, or a directory elsewhere)", d.configured))
	}
	for _, p := range r.privateDirs {
		if _, ok := within(d.canonical, p); ok {
			return true, nil
		}
	}
	return false, nil
}

// holdsPrivateFile reports whether d holds the directory of a private file.
func (r *Roots) holdsPrivateFile(d *dir) bool {
	for _, p := range r.private {
		dir, err := canonicalDir(filepath.Dir(p))
		if err != nil {
			return true // cannot tell: look them up
		}
		if _, ok := within(d.canonical, dir); ok {
			return true
		}
	}
	return false
}

// canonicalDir is filepath.EvalSymlinks of an absolute directory, or the
// path cleaned when it does not exist (yet).
func canonicalDir(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", errs.New(errs.ErrConfig, fmt.Sprintf("private directory %q is not an absolute path", p))
	}
	c, err := filepath.EvalSymlinks(p)
	if errors.Is(err, iofs.ErrNotExist) {
		return filepath.Clean(p), nil
	}
	if err != nil {
		return "", errs.Wrap(errs.ErrConfig, fmt.Sprintf("private directory %q", p), err)
	}
	return c, nil
}

// checkOpened refuses an open file (or directory) of a guarded directory
// that is private, by the path the kernel resolved for it; name, when not
// "", is a name inside the directory f that the call will create or
// replace.
func (r *Roots) checkOpened(op, path string, d *dir, f *os.File, name string) error {
	if !d.guarded {
		return nil
	}
	p, err := fdPath(f)
	if err != nil {
		return pathErr(op, path, errs.ErrUnavailable, "cannot tell where the path leads (needed next to buddy's data directory)", err)
	}
	if name != "" {
		p = filepath.Join(p, name)
	}
	if r.inPrivateDir(p) {
		return pathErr(op, path, errs.ErrForbidden, privateDirReason, nil)
	}
	return nil
}

// checkRootDir is checkOpened for a directory held as an os.Root.
func (r *Roots) checkRootDir(op, path string, d *dir, root *os.Root, name string) error {
	if !d.guarded {
		return nil
	}
	f, err := root.OpenFile(".", dirFlags, 0)
	if err != nil {
		return osErr(op, path, "opening parent directory", err)
	}
	defer f.Close()
	return r.checkOpened(op, path, d, f, name)
}

// checkDirPath refuses the name name in the directory path relDir of a
// guarded directory (which a write creates if missing) when it is or would
// be private: the deepest part of relDir that exists is opened, and its
// resolved path joined with the rest.
func (r *Roots) checkDirPath(op, path string, d *dir, relDir, name string) error {
	if !d.guarded {
		return nil
	}
	cur, rest := relDir, name
	for {
		f, err := d.root.OpenFile(cur, dirFlags, 0)
		if err == nil {
			defer f.Close()
			return r.checkOpened(op, path, d, f, rest)
		}
		if !errors.Is(err, iofs.ErrNotExist) || cur == "." {
			// Not a directory, or unreadable: the write fails on its own
			// when it gets there; nothing private is created meanwhile.
			if errors.Is(err, syscall.ENOTDIR) {
				return nil
			}
			return osErr(op, path, "opening parent directory", err)
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = filepath.Dir(cur)
	}
}
