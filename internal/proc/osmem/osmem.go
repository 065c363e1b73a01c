// Package osmem gives memory a long-running buddy no longer needs back to the
// operating system.
//
// A Go program's resident set after start-up is mostly pages of its own
// executable that package initialization touched once: buddy serve's binary
// carries two LLM SDKs and an MCP SDK whose init functions register their
// types, and the kernel maps the already-read neighbours of every page that
// faults (fault-around, 64 KiB a fault), so an idle server showed 45 MiB
// resident of which 7 MiB was its own heap (docs/BENCHMARKS.md, "Idle memory").
// ReleaseStartup, called once the server is up, frees what start-up left
// behind: the heap's garbage (runtime/debug.FreeOSMemory) and, on Linux, the
// read-only pages of the executable (madvise MADV_PAGEOUT: clean pages,
// dropped, not swapped). The pages serving needs come back from the file on
// first use, once (the first request after start takes a few milliseconds
// more); nothing is lost, since those pages are never written.
//
//	if r, err := osmem.ReleaseStartup(); err == nil {
//		log.Info("start-up memory released", "rss_before", r.Before, "rss_after", r.After)
//	}
package osmem

import (
	"errors"
)

// ErrUnsupported is returned where the executable's pages cannot be released
// (not Linux, or a kernel before 5.4); the heap's garbage is still freed.
var ErrUnsupported = errors.New("releasing the executable's pages is not supported here")

// Report is the process's resident set around a release, in bytes (0 where
// it cannot be read).
type Report struct {
	Before, After int64
	// Mappings is the number of mappings of the executable released.
	Mappings int
}
