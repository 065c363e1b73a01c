package cputime

import "time"

// Thread returns the CPU time the calling OS thread has used so far. The
// caller must hold runtime.LockOSThread.
func Thread() (d time.Duration, ok bool) {
	const rusageThread = 1 // RUSAGE_THREAD, missing from package syscall
	return rusage(rusageThread)
}
