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
// watcher keeps it at least at twice the live heap plus what the runtime
// holds besides the heap (goroutine stacks, metadata): room for the heap to
// double, the pace of GOGC=100 and no slower, however large the live heap
// grows; it comes back down to Limit as the live heap shrinks. GOGC or GOMEMLIMIT set in the environment wins: then
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
// under LimitFor(live heap, the rest, Limit) by collecting earlier
// (GOMEMLIMIT).
type Policy struct {
	Percent int
	Limit   int64
	// Every is how often the watcher reads the live heap; 0 means a second.
	Every time.Duration
}

// Serve is buddy serve's policy. The limit keeps a server with 1,000 sessions
// under its 200 MiB resident target (its peak measured 146–180 MiB with it).
var Serve = Policy{Percent: 400, Limit: 180 << 20}

// The runtime metrics the watcher reads: the heap marked live by the last
// completed cycle, and the memory the limit counts (all the runtime mapped
// but what it released) less the heap's own (objects, unused and free
// spans), which leaves stacks, metadata and the like.
var metricNames = [...]string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
}

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
	m := newMeter()
	oldPercent := debug.SetGCPercent(p.Percent)
	oldLimit := debug.SetMemoryLimit(p.limit(m))
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
				if want := p.limit(m); want != debug.SetMemoryLimit(-1) {
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

// LimitFor is the memory limit for a live heap of live bytes and other bytes
// the runtime holds besides the heap, under a policy whose limit is floor:
// floor, or room for the live heap to double once that is larger.
func LimitFor(live, other, floor int64) int64 {
	live, other = max(live, 0), max(other, 0)
	if live > (math.MaxInt64-other)/2 {
		return math.MaxInt64
	}
	return max(floor, 2*live+other)
}

// limit is the memory limit for the runtime's memory now.
func (p Policy) limit(m *meter) int64 {
	live, other := m.usage()
	return LimitFor(live, other, p.Limit)
}

// meter reads metricNames into samples it keeps, so that the watcher
// allocates nothing per reading.
type meter struct{ s []metrics.Sample }

func newMeter() *meter {
	m := &meter{s: make([]metrics.Sample, len(metricNames))}
	for i, n := range metricNames {
		m.s[i].Name = n
	}
	return m
}

// usage reads the live heap (0 before the first cycle) and the memory the
// runtime holds besides the heap; a metric the runtime does not report
// counts as 0.
func (m *meter) usage() (live, other int64) {
	metrics.Read(m.s)
	var v [len(metricNames)]int64
	for i := range m.s {
		if m.s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = int64(min(m.s[i].Value.Uint64(), math.MaxInt64))
		}
	}
	return v[0], v[1] - v[2] - v[3] - v[4] - v[5]
}
