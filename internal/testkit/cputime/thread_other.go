//go:build !linux

package cputime

import "time"

// Thread is only implemented on Linux.
func Thread() (d time.Duration, ok bool) { return 0, false }
