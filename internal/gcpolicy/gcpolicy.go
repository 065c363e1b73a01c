// Package gcpolicy sets how a long-running buddy server trades memory for
// latency in Go's garbage collector.
//
// With Go's default (GOGC=100) the collector starts a cycle each time the
// heap has grown by as much as was live after the previous one. buddy serve
// keeps about 30 KiB live per connected session and allocates about 80 KiB
// per call (two 10 KiB wazero call stacks, the SQL, the frames), so a burst of
// 1,000 calls over 1,000 sessions ran two or three cycles, and the calls in
// flight during each one's mark phase (15–25 ms, a quarter of the CPUs plus
// the assists it charges to allocating goroutines) set most of the burst's
// p99 round trip (docs/BENCHMARKS.md, "The garbage collector and the burst's
// tail").
//
// Serve lets the heap grow to five times what is live (Percent 400) under a
// soft memory limit (Limit, 180 MiB) that the runtime enforces by collecting
// earlier. So that the limit never makes the collector run back to back, a
// watcher raises it to twice the live heap whenever the live heap outgrows
// half of it (the pace of GOGC=100, no slower) and lowers it again as the
// live heap shrinks. GOGC or GOMEMLIMIT set in the environment wins: then
// Apply changes nothing and the runtime is left as the user configured it.
//
//	restore, applied := gcpolicy.Apply(ctx, gcpolicy.Serve, os.Getenv)
//	defer restore()
package gcpolicy

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Policy is a collector setting: the heap may grow by Percent per cent of
// what is live before a cycle starts (GOGC), and the runtime keeps its memory
// under max(Limit, 2 × live heap) by collecting earlier (GOMEMLIMIT).
type Policy struct {
	Percent int
	Limit   int64
	// Every is how often the watcher reads the live heap; 0 means a second.
	Every time.Duration
}

// Serve is buddy serve's policy. The limit keeps a server with 1,000 sessions
// under issue 9's 200 MiB resident (its peak measured 163–180 MiB with it).
var Serve = Policy{Percent: 400, Limit: 180 << 20}

// liveHeap is the runtime metric the watcher reads: the heap marked live by
// the last completed cycle.
const liveHeap = "/gc/heap/live:bytes"

// Apply sets p unless getenv reports GOGC or GOMEMLIMIT set, and watches the
// live heap until ctx ends or restore is called. restore (safe to call more
// than once) stops the watcher and puts back the settings found; applied is
// false, and restore does nothing, when the environment's settings were kept.
func Apply(ctx context.Context, p Policy, getenv func(string) string) (restore func(), applied bool) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return func() {}, false
	}
	every := p.Every
	if every <= 0 {
		every = time.Second
	}
	oldPercent := debug.SetGCPercent(p.Percent)
	oldLimit := debug.SetMemoryLimit(LimitFor(live(), p.Limit))
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if want := LimitFor(live(), p.Limit); want != debug.SetMemoryLimit(-1) {
					debug.SetMemoryLimit(want)
				}
			}
		}
	}()
	return sync.OnceFunc(func() {
		cancel()
		<-done
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}), true
}

// LimitFor is the memory limit for a live heap of live bytes under a policy
// whose limit is floor: floor, or twice the live heap once that is larger.
func LimitFor(live, floor int64) int64 {
	if live > math.MaxInt64/2 {
		return math.MaxInt64
	}
	return max(floor, 2*live)
}

// live reads the live heap (0 before the first cycle, or if the runtime
// does not report it).
func live() int64 {
	s := []metrics.Sample{{Name: liveHeap}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	v := s[0].Value.Uint64()
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
