//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time all the process's threads have used so far.
func Process() (d time.Duration, ok bool) { return rusage(syscall.RUSAGE_SELF) }

func rusage(who int) (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
