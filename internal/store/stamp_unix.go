//go:build unix

package store

import (
	"os"
	"syscall"
)

// stampFlags opens the stamp for appending without following a symlink put
// in its place, nor blocking on a FIFO.
const stampFlags = os.O_WRONLY | os.O_APPEND | os.O_CREATE | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
