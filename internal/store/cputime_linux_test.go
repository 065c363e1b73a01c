package store

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling OS thread has used, so that a
// benchmark on a shared machine can report what a query costs rather than
// how long it waited for a CPU. The caller must hold runtime.LockOSThread.
func threadCPU() (time.Duration, bool) {
	const rusageThread = 1 // RUSAGE_THREAD, missing from package syscall on Linux
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
