//go:build !unix

package store

import "os"

// stampFlags opens the stamp for appending (the Lstat before it refuses a
// symlink).
const stampFlags = os.O_WRONLY | os.O_APPEND | os.O_CREATE
