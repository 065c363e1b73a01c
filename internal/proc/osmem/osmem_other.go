//go:build !linux

package osmem

import "runtime/debug"

// ReleaseStartup frees the heap's garbage; the executable's pages stay
// (ErrUnsupported).
func ReleaseStartup() (Report, error) {
	debug.FreeOSMemory()
	return Report{}, ErrUnsupported
}
