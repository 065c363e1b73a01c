//go:build unix

package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// setupLock takes an exclusive advisory lock on path+".lock" for the
// open-time setup: two processes creating the same new database at once
// (two terminals, a script running skills in parallel) would otherwise race
// through the header check, the switch to WAL and the migrations, where
// SQLite answers BUSY at once instead of waiting. The returned function
// releases it.
func setupLock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, "opening the lock file "+path+".lock", err)
	}
	deadline := time.Now().Add(busyTimeout)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, errs.Wrap(errs.ErrConfig, "locking "+path+".lock", err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, errs.New(errs.ErrUnavailable, fmt.Sprintf("database %s: another buddy process has held its setup lock for %s", path, busyTimeout))
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, errs.Wrap(errs.ErrCanceled, "waiting for the database setup lock", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
