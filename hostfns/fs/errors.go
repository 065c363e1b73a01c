package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"strconv"
	"syscall"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// maxQuoted is how much of a guest path an error message repeats.
const maxQuoted = 256

// quotePath quotes a guest path for an error message, cut to maxQuoted bytes
// (on a rune boundary) so that a hostile path cannot make errors huge.
func quotePath(path string) string {
	if len(path) <= maxQuoted {
		return strconv.Quote(path)
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(path[n]) {
		n--
	}
	return strconv.Quote(path[:n]) + "..."
}

// pathErr is the error of every failed call: kind, then `op "path": reason`,
// then the cause, if any.
func pathErr(op, path string, kind error, reason string, cause error) error {
	return errs.Wrap(kind, fmt.Sprintf("%s %s: %s", op, quotePath(path), reason), cause)
}

func ctxErr(op, path string, err error) error {
	kind := errs.ErrCanceled
	if errors.Is(err, context.DeadlineExceeded) {
		kind = errs.ErrTimeout
	}
	return pathErr(op, path, kind, "stopped", err)
}

// errPathEscapes is the text of os.Root's unexported error for a path (or a
// symlink target) that leaves the root. The escape tests fail if it changes.
const errPathEscapes = "path escapes from parent"

// cause strips the *PathError and *LinkError wrappers of an os error, whose
// paths are relative to a root or name the canonical directory, down to the
// errno (or os.Root's own error).
func cause(err error) error {
	for {
		switch e := err.(type) {
		case *iofs.PathError:
			err = e.Err
		case *os.LinkError:
			err = e.Err
		default:
			return err
		}
	}
}

// osErr maps an error of an os.Root operation to buddy's kinds. what says
// which step failed ("opening", "creating parent directories", ...).
func osErr(op, path, what string, err error) error {
	c := cause(err)
	if c != nil && c.Error() == errPathEscapes {
		return pathErr(op, path, errs.ErrForbidden, "resolves outside the allowed directory", nil)
	}
	var errno syscall.Errno
	if !errors.As(c, &errno) {
		if errors.Is(c, os.ErrClosed) {
			return pathErr(op, path, errs.ErrUnavailable, "allowed directories are closed", nil)
		}
		return pathErr(op, path, errs.ErrUnavailable, what, c)
	}
	kind := errs.ErrUnavailable
	reason := what
	switch errno {
	case syscall.ENOENT:
		kind = errs.ErrNotFound
	case syscall.ENOTDIR:
		kind = errs.ErrNotFound
		if op == opWrite {
			// Nothing can be created below a file.
			kind = errs.ErrInvalidInput
		}
	case syscall.ELOOP, syscall.EISDIR, syscall.EACCES, syscall.EPERM, syscall.EROFS:
		kind = errs.ErrForbidden
	case syscall.EXDEV:
		kind, reason = errs.ErrForbidden, "resolves outside the allowed directory"
	case syscall.ENXIO, syscall.ENODEV:
		kind, reason = errs.ErrForbidden, "not a regular file"
	case syscall.ENAMETOOLONG:
		kind = errs.ErrInvalidInput
	}
	// Keep the errno as the cause, so errors.Is(err, fs.ErrNotExist) works too.
	return pathErr(op, path, kind, reason, errno)
}
