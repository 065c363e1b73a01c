//go:build !unix

package cputime

import "time"

// Process is only implemented on Unix.
func Process() (d time.Duration, ok bool) { return 0, false }
