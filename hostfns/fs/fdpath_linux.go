//go:build linux

package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// fdPath is the path the kernel holds for an open file or directory
// (/proc/self/fd): symlinks resolved, as it was actually reached.
func fdPath(f *os.File) (string, error) {
	sc, err := f.SyscallConn()
	if err != nil {
		return "", err
	}
	var p string
	var rerr error
	if err := sc.Control(func(fd uintptr) {
		p, rerr = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil {
		return "", err
	}
	if rerr != nil {
		return "", rerr
	}
	if !filepath.IsAbs(p) { // a pipe, a socket, an anonymous inode
		return "", fmt.Errorf("%q is not a path", p)
	}
	return p, nil
}
