//go:build unix

package secrets

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// readPrivate reads a file of the store: a regular file (never through a
// symlink put in its place, never blocking on a FIFO), owned by the user
// running buddy (or root), that neither group nor others may read or write,
// of at most max bytes. An absent file is an error wrapping fs.ErrNotExist.
func readPrivate(path string, max int64, what string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if errors.Is(err, syscall.ELOOP) {
		return nil, errs.New(errs.ErrConfig, fmt.Sprintf("%s %s is a symbolic link: buddy reads it only as a regular file of its own", what, path))
	}
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, fmt.Sprintf("reading %s %s", what, path), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, fmt.Sprintf("reading %s %s", what, path), err)
	}
	if err := checkMode(path, fi, what); err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, errs.New(errs.ErrConfig, fmt.Sprintf("%s %s is %d bytes, over its %d-byte cap: it is not buddy's", what, path, fi.Size(), max))
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, fmt.Sprintf("reading %s %s", what, path), err)
	}
	if int64(len(data)) > max {
		clear(data)
		return nil, errs.New(errs.ErrConfig, fmt.Sprintf("%s %s is over its %d-byte cap: it is not buddy's", what, path, max))
	}
	return data, nil
}

// checkMode refuses a file that is not regular, that another user owns
// (root aside), or that group or others may read or write: whoever can read
// the key and the store has the secrets; whoever can write either can
// replace them.
func checkMode(path string, fi fs.FileInfo, what string) error {
	if !fi.Mode().IsRegular() {
		return errs.New(errs.ErrConfig, fmt.Sprintf("%s %s is not a regular file", what, path))
	}
	uid := os.Geteuid()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid && st.Uid != 0 {
		return errs.New(errs.ErrConfig, fmt.Sprintf(
			"%s %s is owned by uid %d, not by the user running buddy (uid %d): its owner can read or replace the secrets; take it over after checking it: chown %d %s && chmod 600 %s",
			what, path, st.Uid, uid, uid, path, path))
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return errs.New(errs.ErrConfig, fmt.Sprintf(
			"%s %s can be read or written by others (mode %04o): with it they have the secrets; fix: chmod 600 %s",
			what, path, perm, path))
	}
	return nil
}

// lock takes the store's lock file (created 0600), exclusively, waiting for
// it, and returns its release.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}
