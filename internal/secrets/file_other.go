//go:build !unix

package secrets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
)

// readPrivate reads a file of the store, at most max bytes (no Unix modes
// to check on this platform). An absent file is an error wrapping
// fs.ErrNotExist.
func readPrivate(path string, max int64, what string) ([]byte, error) {
	data, err := osfile.ReadBounded(path, max)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, fmt.Sprintf("reading %s %s", what, path), err)
	}
	return data, nil
}

// lock is a no-op without flock: concurrent writers race, the last wins.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}
