package gcpolicy

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// settings reads the collector's percent and memory limit without changing
// them.
func settings() (percent int, limit int64) {
	percent = debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	return percent, debug.SetMemoryLimit(-1)
}

func noEnv(string) string { return "" }

func TestLimitFor(t *testing.T) {
	const floor = 180 << 20
	for _, c := range []struct {
		name        string
		live, other int64
		want        int64
	}{
		{"nothing live yet", 0, 0, floor},
		{"well under the floor", 30 << 20, 20 << 20, floor},
		{"exactly the floor", 80 << 20, 20 << 20, floor},
		{"just over the floor", 80<<20 + 1, 20 << 20, floor + 2},
		{"stacks push it over", 60 << 20, 100 << 20, 220 << 20},
		{"live heap past the floor", 500 << 20, 0, 1000 << 20},
		{"negative figures count as 0", -5, -7, floor},
		{"would overflow", math.MaxInt64/2 + 1, 0, math.MaxInt64},
		{"would overflow with the rest", math.MaxInt64/4 + 1, math.MaxInt64/2 + 1, math.MaxInt64},
		{"just fits with the rest", math.MaxInt64 / 4, math.MaxInt64 / 2, math.MaxInt64/4*2 + math.MaxInt64/2},
		{"largest", math.MaxInt64, math.MaxInt64, math.MaxInt64},
	} {
		if got := LimitFor(c.live, c.other, floor); got != c.want {
			t.Errorf("%s: LimitFor(%d, %d, %d) = %d, want %d", c.name, c.live, c.other, floor, got, c.want)
		}
	}
}

// TestApplySetsAndRestores: the policy's percent and limit are in force
// after Apply, and the settings found before are back after restore (called
// twice: the second call does nothing).
func TestApplySetsAndRestores(t *testing.T) {
	percent0, limit0 := settings()
	restore, applied := Apply(t.Context(), Policy{Percent: 345, Limit: 1 << 40}, noEnv)
	if !applied {
		t.Fatal("Apply with no GOGC or GOMEMLIMIT in the environment did not apply the policy")
	}
	if p, l := settings(); p != 345 || l != 1<<40 {
		restore()
		t.Fatalf("after Apply: GC percent %d, memory limit %d; want 345, %d", p, l, int64(1<<40))
	}
	restore()
	restore()
	if p, l := settings(); p != percent0 || l != limit0 {
		t.Fatalf("after restore: GC percent %d, memory limit %d; want the original %d, %d", p, l, percent0, limit0)
	}
}

// TestEnvironmentWins: GOGC or GOMEMLIMIT in the environment, whatever its
// value, leaves the runtime as it is.
func TestEnvironmentWins(t *testing.T) {
	percent0, limit0 := settings()
	for _, env := range []map[string]string{
		{"GOGC": "200"},
		{"GOGC": "off"},
		{"GOMEMLIMIT": "1GiB"},
		{"GOGC": "50", "GOMEMLIMIT": "64MiB"},
	} {
		restore, applied := Apply(t.Context(), Policy{Percent: 345, Limit: 1 << 40}, func(k string) string { return env[k] })
		restore()
		if applied {
			t.Errorf("environment %v: Apply applied the policy", env)
		}
		if p, l := settings(); p != percent0 || l != limit0 {
			t.Errorf("environment %v: GC percent %d, memory limit %d; want them unchanged (%d, %d)", env, p, l, percent0, limit0)
		}
	}
}

// TestWatcherFollowsTheLiveHeap: with a floor below the live heap, the
// watcher raises the limit to at least twice the live heap, and lowers it
// back once the heap is released.
func TestWatcherFollowsTheLiveHeap(t *testing.T) {
	const floor = 8 << 20
	restore, applied := Apply(t.Context(), Policy{Percent: 100, Limit: floor, Every: 5 * time.Millisecond}, noEnv)
	defer restore()
	if !applied {
		t.Fatal("policy not applied")
	}
	held := make([][]byte, 64)
	for i := range held {
		held[i] = make([]byte, 256<<10) // 16 MiB live in all
	}
	waitLimit(t, "with 16 MiB live", func(l int64) bool { return l >= 2*(16<<20) })
	runtime.KeepAlive(held)
	held = nil
	waitLimit(t, "after the 16 MiB was released", func(l int64) bool { return l < 2*(16<<20) })
}

// waitLimit collects and waits (up to 10 s) for the memory limit to satisfy ok.
func waitLimit(t *testing.T, when string, ok func(int64) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		l := debug.SetMemoryLimit(-1)
		if ok(l) {
			return
		}
		if time.Now().After(deadline) {
			live, other := newMeter().usage()
			t.Fatalf("%s: memory limit still %d (live heap %d, other %d)", when, l, live, other)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMeterReadsWithoutAllocating: the watcher's reading, every tick of a
// server's life, allocates nothing, and sees a live heap once a cycle ran.
func TestMeterReadsWithoutAllocating(t *testing.T) {
	m := newMeter()
	runtime.GC()
	if live, _ := m.usage(); live <= 0 {
		t.Fatalf("live heap %d after a collection, want > 0", live)
	}
	if n := testing.AllocsPerRun(100, func() { m.usage() }); n != 0 {
		t.Fatalf("a reading allocates %v times, want 0", n)
	}
}
