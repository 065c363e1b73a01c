//go:build !unix

package osfile

import (
	"io/fs"
	"os"
)

const readFlags = os.O_RDONLY

// unixModes is false: Windows reports synthetic permission bits and no owner
// uid, so PrivateDir and ReadPrivate check only the file type there.
const unixModes = false

func ownerOf(fs.FileInfo) (int, bool) { return 0, false }
