//go:build !unix

package instructions

import "time"

// processCPU is only implemented on Unix.
func processCPU() (time.Duration, bool) { return 0, false }
