//go:build unix

package fs

import (
	"os"
	"syscall"
)

// readFlags open a file for Read: O_NONBLOCK so that a FIFO swapped in after
// the stat cannot block the open, O_NOCTTY so that a terminal never becomes
// buddy's controlling terminal. os.Root adds O_NOFOLLOW and O_CLOEXEC itself.
const readFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// dirFlags open a directory to learn where it is (privatedir.go).
const dirFlags = os.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NONBLOCK

// links is fi's number of hard links.
func links(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 2 // unknown: as if linked
}
