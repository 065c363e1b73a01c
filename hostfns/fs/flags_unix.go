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
