//go:build !unix

package fs

import "os"

// readFlags open a file for Read. There are no FIFOs to block on here.
const readFlags = os.O_RDONLY

// dirFlags open a directory to learn where it is (privatedir.go).
const dirFlags = os.O_RDONLY

// links is fi's number of hard links: unknown here, so as if linked.
func links(os.FileInfo) uint64 { return 2 }
