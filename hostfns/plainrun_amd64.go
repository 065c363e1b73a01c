//go:build !purego

package hostfns

import "golang.org/x/sys/cpu"

// useAVX2: plainRun finds plain runs 32 bytes per instruction sequence.
var useAVX2 = cpu.X86.HasAVX2

// plainRunAVX2 is in plainrun_amd64.s.
//
//go:noescape
func plainRunAVX2(s []byte) int
