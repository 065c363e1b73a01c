//go:build unix

package osfile

import (
	"io/fs"
	"os"
	"syscall"
)

// readFlags: O_NONBLOCK so that a FIFO swapped in after the stat cannot block
// the open, O_NOCTTY so that a terminal never becomes buddy's controlling
// terminal. (os.OpenFile adds O_CLOEXEC.) O_NONBLOCK changes nothing for the
// regular file that is then read.
const readFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// unixModes: permission bits and owners mean what PrivateDir checks.
const unixModes = true

func ownerOf(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
