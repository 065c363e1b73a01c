package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/runtime"
)

// u64 is an input that wasi_loop.wat reads as n.
func u64(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

// randomLoopBytes: the race detector makes the byte loop of random_get
// ~10× slower.
var randomLoopBytes uint64 = map[bool]uint64{false: 64 << 20, true: 16 << 20}[raceEnabled]

// deadlineSlack is how far past its deadline a call may still be running on
// this shared, noisy machine; the design target is ~100 ms (the longest
// stretch of host work between two deadline checks is about 1 ms).
const deadlineSlack = 1500 * time.Millisecond

// TestDeadlineHoldsThroughHostCalls: loops of WASI and kernel calls that burn
// almost no fuel per iteration, under a large fuel budget, end with timeout
// at their deadline. The time measured runs until the module's calls have
// really returned (Close waits for them), not only until the caller got its
// answer (which the watchdog gives 100 ms after the deadline in any case).
func TestDeadlineHoldsThroughHostCalls(t *testing.T) {
	const deadline = 300 * time.Millisecond
	cases := []struct {
		file, entry string
		input       []byte
		memoryMB    int
	}{
		// 64 MiB per random_get: ~0.1 s of filling per call (far more under -race).
		{"hostcalls/wasi_loop.wasm", "random_loop", u64(randomLoopBytes), 96},
		{"hostcalls/wasi_loop.wasm", "fd_write_loop", nil, 0},
		{"hostcalls/wasi_loop.wasm", "poll_loop", nil, 0},
		{"hostcalls/kernel_loop.wasm", "length_loop", nil, 0},
		{"hostcalls/kernel_loop.wasm", "load_loop", nil, 0},
		{"hostcalls/kernel_loop.wasm", "store_loop", nil, 0},
		{"hostcalls/kernel_loop.wasm", "input_loop", u64(1), 0},
		{"hostcalls/kernel_loop.wasm", "alloc_free_loop", nil, 0},
		{"hostcalls/kernel_loop.wasm", "config_loop", nil, 0},
		{"hostcalls/kernel_loop.wasm", "log_loop", nil, 0},
	}
	for _, c := range cases {
		t.Run(c.entry, func(t *testing.T) {
			rt := newRuntime(t, runtime.Options{Prepared: -1})
			mod := load(t, rt, c.file, manifest(c.entry, func(r *runtime.Resources) {
				r.Fuel = runtime.MaxFuel
				r.Timeout = deadline
				if c.memoryMB > 0 {
					r.MemoryMB = c.memoryMB
				}
			}), nil)
			start := time.Now()
			_, err := mod.Call(t.Context(), c.input)
			answered := time.Since(start)
			if err := mod.Close(context.Background()); err != nil {
				t.Fatalf("Close: %v (the call is still running)", err)
			}
			ran := time.Since(start)
			if !errors.Is(err, runtime.ErrTimeout) {
				t.Fatalf("err = %v (%T), want timeout", err, err)
			}
			if k := errs.KindOf(err); k != errs.KindOf(runtime.ErrTimeout) {
				t.Errorf("kind %s, want %s", k, errs.KindOf(runtime.ErrTimeout))
			}
			t.Logf("deadline %s: answered after %s, guest stopped after %s (%s past the deadline)",
				deadline, answered.Round(time.Millisecond), ran.Round(time.Millisecond), (ran - deadline).Round(time.Millisecond))
			if ran > deadline+deadlineSlack {
				t.Errorf("the guest ran %s, over its %s deadline + %s", ran, deadline, deadlineSlack)
			}
		})
	}
}

// TestHostCallsChargeByBytes: WASI calls cost fuel in proportion to the bytes
// they move, so the fuel budget bounds host work as it bounds instructions.
func TestHostCallsChargeByBytes(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	cases := []struct {
		entry   string
		perByte float64 // fuel per byte moved
	}{
		{"random_once", 1},
		{"fd_write_once", 1.0 / 64},
	}
	for _, c := range cases {
		t.Run(c.entry, func(t *testing.T) {
			mod := load(t, rt, "hostcalls/wasi_loop.wasm", manifest(c.entry, nil), nil)
			fuelFor := func(n uint64) uint64 {
				res, err := mod.Call(t.Context(), u64(n))
				if err != nil {
					t.Fatalf("n=%d: %v", n, err)
				}
				return res.Fuel
			}
			// (Within the module's initial 2 MiB: no memory.grow charge.)
			f0, f1, f2 := fuelFor(0), fuelFor(1<<19), fuelFor(1<<20)
			t.Logf("fuel: 0 B → %d, 512 KiB → %d, 1 MiB → %d", f0, f1, f2)
			want := uint64(c.perByte * (1 << 19))
			for _, d := range []uint64{f1 - f0, f2 - f1} {
				if d < want || d > want+want/100+64 {
					t.Errorf("512 KiB more costs %d fuel, want ~%d", d, want)
				}
			}
		})
	}
	// A budget below one call's bytes ends it before the work is done.
	mod := load(t, rt, "hostcalls/wasi_loop.wasm", manifest("random_once", func(r *runtime.Resources) { r.Fuel = 1 << 20 }), nil)
	if _, err := mod.Call(t.Context(), u64(2<<20)); !errors.Is(err, runtime.ErrFuelExhausted) {
		t.Errorf("random_get of 2 MiB under a 1 Mi budget: err = %v, want fuel_exhausted", err)
	}
}

// TestHostCallWorkIsCapped: one WASI call cannot be asked for unbounded work.
func TestHostCallWorkIsCapped(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	for _, c := range []struct{ entry, msg string }{
		{"fd_write_many", "over IOV_MAX"},
		{"poll_many", "subscriptions"},
	} {
		mod := load(t, rt, "hostcalls/wasi_loop.wasm", manifest(c.entry, nil), nil)
		_, err := mod.Call(t.Context(), nil)
		if !errors.Is(err, runtime.ErrTrap) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err = %v, want a trap mentioning %q", c.entry, err, c.msg)
		}
	}
	// The loops' single calls, under the caps, work.
	mod := load(t, rt, "hostcalls/wasi_loop.wasm", manifest("fd_write_once", nil), nil)
	if _, err := mod.Call(t.Context(), u64(100)); err != nil {
		t.Errorf("fd_write_once: %v", err)
	}
}

// TestInitKeepsErrorKinds: a start section or a reactor's _initialize that
// runs out of fuel, passes its deadline, traps, hits the memory cap or gets a
// host function's typed error is reported with that kind.
func TestInitKeepsErrorKinds(t *testing.T) {
	fuel := func(r *runtime.Resources) { r.Fuel = 10_000_000 }
	deadline := func(r *runtime.Resources) { r.Fuel = runtime.MaxFuel; r.Timeout = 300 * time.Millisecond }
	cases := []struct {
		name, file, entry, input string
		res                      func(*runtime.Resources)
		want                     error
		msg                      string
	}{
		{"start/fuel", "start_forever.wasm", "run", "", fuel, runtime.ErrFuelExhausted, "fuel"},
		{"start/deadline", "start_forever.wasm", "run", "", deadline, runtime.ErrTimeout, ""},
		{"start/trap", "hostcalls/start_trap.wasm", "run", "", nil, runtime.ErrTrap, "unreachable"},
		{"start/memory", "hostcalls/start_grow.wasm", "run", "", nil, runtime.ErrMemoryLimit, "MiB"},
		{"initialize/fuel", "hostcalls/init_modes.wasm", "run", "l", fuel, runtime.ErrFuelExhausted, "fuel"},
		{"initialize/deadline", "hostcalls/init_modes.wasm", "run", "l", deadline, runtime.ErrTimeout, ""},
		{"initialize/trap", "hostcalls/init_modes.wasm", "run", "t", nil, runtime.ErrTrap, "unreachable"},
		{"initialize/memory", "hostcalls/init_modes.wasm", "run", "m", nil, runtime.ErrMemoryLimit, "MiB"},
		// A host function's typed panic (not raised through the call state).
		{"initialize/too-large", "hostcalls/init_modes.wasm", "run", "o", nil, runtime.ErrTooLarge, "over the"},
		// _initialize returned (and settled its fuel); the export then traps.
		{"initialize/then-trap", "hostcalls/init_modes.wasm", "trap_after_init", "", nil, runtime.ErrTrap, "unreachable"},
		{"initialize/ok", "hostcalls/init_modes.wasm", "run", "", nil, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rt := newRuntime(t, runtime.Options{Prepared: -1})
			mod := load(t, rt, c.file, manifest(c.entry, c.res), nil)
			start := time.Now()
			_, err := mod.Call(t.Context(), []byte(c.input))
			if c.want == nil {
				if err != nil {
					t.Fatalf("err = %v, want success", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v (%T, kind %s), want %v", err, err, errs.KindOf(err), c.want)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("err = %q, want it to mention %q", err, c.msg)
			}
			if took := time.Since(start); c.want == runtime.ErrTimeout && took > 300*time.Millisecond+deadlineSlack {
				t.Errorf("took %s", took)
			}
		})
	}
}

// TestHostcallsFixturesUpToDate: the committed .wasm files in
// testdata/hostcalls and testdata/snapshot are what their .wat sources build
// to (needs wat2wasm).
func TestHostcallsFixturesUpToDate(t *testing.T) {
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Skip("wat2wasm not installed (apt-get install wabt)")
	}
	for _, sub := range []string{"hostcalls", "snapshot"} {
		t.Run(sub, func(t *testing.T) {
			srcs, err := filepath.Glob(filepath.Join("testdata", sub, "*.wat"))
			if err != nil || len(srcs) == 0 {
				t.Fatalf("no sources: %v", err)
			}
			dir := t.TempDir()
			for _, src := range srcs {
				name := strings.TrimSuffix(filepath.Base(src), ".wat") + ".wasm"
				out := filepath.Join(dir, name)
				if b, err := exec.CommandContext(t.Context(), wat2wasm, src, "-o", out).CombinedOutput(); err != nil {
					t.Fatalf("wat2wasm %s: %v\n%s", src, err, b)
				}
				want, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join("testdata", sub, name))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("testdata/%s/%s is stale: run wat2wasm %s -o testdata/%s/%s", sub, name, filepath.Base(src), sub, name)
				}
			}
		})
	}
}

// TestGuestCopy: buddy:host/v1.kernel_read and kernel_write copy between the
// kernel and the guest's own memory, and refuse every range outside either
// (kernel_write, like store_u64, only inside a live block); output_write
// outputs a range of the guest's memory, refuses one outside it, and it and
// output_set replace each other; input_read copies the input (where
// input_set put it) and refuses more than it, or a range outside the guest.
func TestGuestCopy(t *testing.T) {
	rt := newRuntime(t, runtime.Options{Prepared: -1})
	patterned := make([]byte, 60<<10)
	for i := range patterned {
		patterned[i] = byte(i*7 + i>>8)
	}
	cases := []struct {
		entry string
		input []byte
		want  []byte // output on success
		msg   string // trap message otherwise
	}{
		{"run", []byte("hello, kernel"), []byte("hello, kernel"), ""},
		{"run", []byte{}, []byte{}, ""},
		{"run", patterned, patterned, ""},
		{"read_kernel_oob", nil, nil, "outside kernel memory"},
		{"read_guest_oob", []byte("0123456789abcdef"), nil, "outside the guest's memory"},
		{"write_guest_oob", nil, nil, "outside the guest's memory"},
		{"write_past_block", nil, nil, "outside every block"},
		{"write_freed", nil, nil, "outside every block"},
		{"zero", nil, []byte{}, ""},
		{"out_write", []byte("hello, guest"), []byte("hello, guest"), ""},
		{"out_write", patterned, patterned, ""},
		{"out_write_oob", nil, nil, "outside the guest's memory"},
		{"out_write_then_set", nil, []byte("kernel"), ""},
		{"out_set_then_write", nil, []byte("guest"), ""},
		{"out_write_empty", nil, []byte{}, ""},
		{"in_read", []byte("hello, input"), []byte("hello, input"), ""},
		{"in_read", patterned, patterned, ""},
		{"in_read", []byte{}, []byte{}, ""},
		{"in_read_over", []byte("abc"), nil, "input_read of 4 bytes: the input is 3"},
		{"in_read_oob", []byte("0123456789abcdef"), nil, "outside the guest's memory"},
		{"in_read_after_set", []byte("the input"), []byte("kernel"), ""},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%d", c.entry, len(c.input)), func(t *testing.T) {
			mod := load(t, rt, "hostcalls/guest_copy.wasm", manifest(c.entry, nil), nil)
			res, err := mod.Call(t.Context(), c.input)
			if c.msg != "" {
				if !errors.Is(err, runtime.ErrTrap) || !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("err = %v, want a trap mentioning %q", err, c.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(res.Output, c.want) {
				t.Fatalf("output %d bytes, want %d (equal: %v)", len(res.Output), len(c.want), bytes.Equal(res.Output, c.want))
			}
		})
	}
}

// TestOutputWriteCap: output_write of more than the output cap ends the
// call with too_large, as output_set does, before copying it.
func TestOutputWriteCap(t *testing.T) {
	rt := newRuntime(t, runtime.Options{Prepared: -1, MaxOutputBytes: 1000})
	mod := load(t, rt, "hostcalls/guest_copy.wasm", manifest("out_write", nil), nil)
	if _, err := mod.Call(t.Context(), make([]byte, 1001)); !errors.Is(err, runtime.ErrTooLarge) || !strings.Contains(err.Error(), "1000-byte cap") {
		t.Fatalf("1,001 bytes: %v, want too_large naming the cap", err)
	}
	if res, err := mod.Call(t.Context(), make([]byte, 1000)); err != nil || len(res.Output) != 1000 {
		t.Fatalf("1,000 bytes: %v", err)
	}
}
