package cputime

import (
	"runtime"
	"testing"
)

// spin burns CPU until the reading moves past its start, or gives up.
func spin(t *testing.T, read func() (int64, bool)) {
	t.Helper()
	start, ok := read()
	if !ok {
		t.Skipf("not implemented on %s", runtime.GOOS)
	}
	x := 0
	for i := 0; i < 1<<30; i++ {
		x += i
		if i%(1<<20) == 0 {
			if now, _ := read(); now > start {
				return
			}
		}
	}
	t.Fatalf("CPU time did not move after 2^30 additions (%d)", x)
}

// TestProcessAndThreadMove: both readings grow while the caller computes.
func TestProcessAndThreadMove(t *testing.T) {
	spin(t, func() (int64, bool) { d, ok := Process(); return int64(d), ok })
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	spin(t, func() (int64, bool) { d, ok := Thread(); return int64(d), ok })
}
