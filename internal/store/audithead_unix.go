//go:build unix

package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// keyOpenFlags, headReadFlags and headOpenFlags open the audit key and head
// without following a symlink put in their place, nor blocking on a FIFO.
const (
	keyOpenFlags  = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	headReadFlags = keyOpenFlags
	headOpenFlags = os.O_RDWR | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
)

// checkKeyMode refuses an audit key owned by another user (root aside), or
// that group or others may read or write: whoever can read it can forge
// the audit log, whoever can write it can replace it.
func checkKeyMode(path string, fi fs.FileInfo) error {
	uid := os.Geteuid()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid && st.Uid != 0 {
		return errs.New(errs.ErrConfig, fmt.Sprintf(
			"the audit key %s is owned by uid %d, not by the user running buddy (uid %d): its owner could forge the audit log; take it over after checking it: chown %d %s && chmod 600 %s",
			path, st.Uid, uid, uid, path, path))
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return errs.New(errs.ErrConfig, fmt.Sprintf(
			"the audit key %s can be read or written by others (mode %04o): with it they could forge the audit log; fix: chmod 600 %s",
			path, perm, path))
	}
	return nil
}

// lockFile takes an advisory lock on f, exclusive or shared, waiting for it,
// and returns its release. A lock that cannot be taken is done without: a
// head update then races with other processes' updates (which at worst
// makes the head lag) and with readers (which may then see it torn, and
// report it).
func lockFile(f *os.File, exclusive bool) (unlock func()) {
	fd := int(f.Fd())
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err := unix.Flock(fd, how)
		if err == nil {
			return func() { unix.Flock(fd, unix.LOCK_UN) }
		}
		if !errors.Is(err, unix.EINTR) {
			return func() {}
		}
	}
}
