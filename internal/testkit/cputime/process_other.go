//go:build !unix && !windows

package cputime

import "time"

// Process is only implemented on Unix and Windows.
func Process() (d time.Duration, ok bool) { return 0, false }
