//go:build !unix

package fs

import "os"

// readFlags open a file for Read. There are no FIFOs to block on here.
const readFlags = os.O_RDONLY
