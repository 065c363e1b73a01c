//go:build !unix

package store

import (
	"io/fs"
	"os"
)

// keyOpenFlags, headReadFlags and headOpenFlags open the audit key and head.
const (
	keyOpenFlags  = os.O_RDONLY
	headReadFlags = os.O_RDONLY
	headOpenFlags = os.O_RDWR
)

// checkKeyMode checks nothing where the platform has no Unix modes.
func checkKeyMode(string, fs.FileInfo) error { return nil }

// lockFile is a no-op where advisory file locks are not available: head
// updates by several processes may then race, which at worst makes the
// head lag, and a reader may see a record half written, and report it.
func lockFile(*os.File, bool) (unlock func()) { return func() {} }
