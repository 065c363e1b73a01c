package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time all the process's threads have used so far.
func Process() (d time.Duration, ok bool) {
	self, err := syscall.GetCurrentProcess() // a pseudo-handle: nothing to close
	if err != nil {
		return 0, false
	}
	var creation, exit, kernel, user syscall.Filetime
	if err := syscall.GetProcessTimes(self, &creation, &exit, &kernel, &user); err != nil {
		return 0, false
	}
	return filetime(kernel) + filetime(user), true
}

// filetime is a FILETIME read as a duration (100 ns units).
func filetime(f syscall.Filetime) time.Duration {
	return time.Duration(int64(f.HighDateTime)<<32|int64(f.LowDateTime)) * 100
}
