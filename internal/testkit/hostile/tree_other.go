//go:build !unix

package hostile

import "testing"

// The tree's secrets (see tree.go; the tree itself needs unix).
const (
	SecretOutside = "SECRET-outside-9f2c41"
	SecretEvil    = "SECRET-data-evil-77ab"
	HelloContent  = "hello, inside"
)

// Secrets lists the contents that live outside the root.
var Secrets = []string{SecretOutside, SecretEvil}

// BuildTree needs FIFOs, sockets and POSIX symlinks: it skips the test here.
func BuildTree(tb testing.TB, base string) (root string) {
	tb.Helper()
	tb.Skip("hostile.BuildTree needs a unix file system")
	return ""
}

// HasDevice is false where BuildTree cannot run.
func HasDevice(root string) bool { return false }
