package runtime_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/runtime"
)

// paths are the two ways a call can start: from the module's snapshot, and
// by running its initialiser itself (Options.NoSnapshots). Tests of isolation
// and fuel run over both.
var paths = []struct {
	name     string
	snapshot bool
}{
	{"snapshot", true},
	{"initialiser", false},
}

func snapshotRuntime(t *testing.T, snapshot bool, prepared int) *runtime.Runtime {
	return newRuntime(t, runtime.Options{NoSnapshots: !snapshot, Prepared: prepared})
}

// TestSnapshotIsolation: a call that dirties everything it can reach — guest
// memory, grown pages, globals, kernel blocks, vars — is never seen by the
// next, which finds exactly the initialised state (memory, its size, globals,
// tables), sequentially and concurrently, with and without prepared
// instances, starting from the snapshot or running the initialiser itself.
func TestSnapshotIsolation(t *testing.T) {
	for _, p := range paths {
		for _, prepared := range []int{-1, 3} {
			t.Run(fmt.Sprintf("%s/prepared=%d", p.name, prepared), func(t *testing.T) {
				rt := snapshotRuntime(t, p.snapshot, prepared)
				mod := load(t, rt, "snapshot/isolation.wasm", manifest("check", nil), nil)
				if ok, why := mod.Snapshot(); ok != p.snapshot {
					t.Fatalf("Snapshot() = %v (%s), want %v", ok, why, p.snapshot)
				}
				var wg sync.WaitGroup
				errc := make(chan error, 64)
				for g := 0; g < 4; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < 20; i++ {
							if _, err := mod.CallExport(t.Context(), "dirty", nil); err != nil {
								errc <- fmt.Errorf("dirty: %w", err)
								return
							}
							res, err := mod.CallExport(t.Context(), "check", nil)
							if err != nil || string(res.Output) != "42" {
								errc <- fmt.Errorf("check after dirty: %v, output %q (state leaked between calls?)", err, outputOf(res))
								return
							}
						}
					}()
				}
				wg.Wait()
				close(errc)
				for err := range errc {
					t.Error(err)
				}
			})
		}
	}
}

func outputOf(res *runtime.Result) []byte {
	if res == nil {
		return nil
	}
	return res.Output
}

// TestSnapshotFuel: a call charges the same fuel whether it starts from the
// snapshot or runs the initialiser itself (the initialiser's fuel is charged
// to every call), on every run; and a budget runs out at the same point.
func TestSnapshotFuel(t *testing.T) {
	used := map[bool]uint64{}
	for _, p := range paths {
		rt := snapshotRuntime(t, p.snapshot, -1)
		mod := load(t, rt, "snapshot/isolation.wasm", manifest("check", nil), nil)
		for i := 0; i < 3; i++ {
			res, err := mod.Call(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && res.Fuel != used[p.snapshot] {
				t.Fatalf("%s: fuel %d then %d", p.name, used[p.snapshot], res.Fuel)
			}
			used[p.snapshot] = res.Fuel
		}
	}
	if used[true] != used[false] {
		t.Fatalf("fuel from the snapshot %d, running the initialiser %d: want the same", used[true], used[false])
	}
	// Budgets around the call's fuel: the same outcome and the same fuel
	// reported on both paths.
	for _, budget := range []uint64{used[true] - 1000, used[true] - 1, used[true], used[true] + 1} {
		var got [2]string
		for i, p := range paths {
			rt := snapshotRuntime(t, p.snapshot, -1)
			mod := load(t, rt, "snapshot/isolation.wasm", manifest("check", func(r *runtime.Resources) { r.Fuel = budget }), nil)
			res, err := mod.Call(t.Context(), nil)
			var fe *runtime.FuelError
			switch {
			case errors.As(err, &fe):
				got[i] = fmt.Sprintf("fuel_exhausted used=%d", fe.Used)
			case err != nil:
				t.Fatalf("budget %d, %s: %v", budget, p.name, err)
			default:
				got[i] = fmt.Sprintf("ok fuel=%d", res.Fuel)
			}
		}
		if got[0] != got[1] {
			t.Errorf("budget %d: from the snapshot %s, running the initialiser %s", budget, got[0], got[1])
		}
	}
}

// TestSnapshotRule: an initialiser that calls any import — the input, the
// kernel, vars, config, WASI's clock or random source, a log, a host
// function — may depend on per-call state, so the module is not snapshotted
// (Snapshot says which import), and its calls run the initialiser themselves
// with the same result as with snapshots off. So is a module whose code can
// write a table.
func TestSnapshotRule(t *testing.T) {
	host, err := hostfns.Link(hostfns.Grants{Env: []string{"HOME"}}, hostfns.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(t.Context()) })
	cases := []struct {
		file, why, output string
	}{
		{"impure_input.wasm", "extism:host/env.input_length", "ok"},
		{"impure_var.wasm", "extism:host/env.alloc", "ok"},
		{"impure_config.wasm", "extism:host/env.config_get", "ok"},
		{"impure_clock.wasm", "wasi_snapshot_preview1.clock_time_get", "ok"},
		{"impure_random.wasm", "wasi_snapshot_preview1.random_get", "ok"},
		{"impure_log.wasm", "extism:host/env.alloc", "ok"},
		{"impure_host.wasm", "buddy:host/v1.env_get", "ok"},
		{"tables.wasm", "can change a table", "1"},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.file, ".wasm"), func(t *testing.T) {
			for _, p := range paths {
				rt := snapshotRuntime(t, p.snapshot, 2)
				mod := load(t, rt, "snapshot/"+c.file, nil, host)
				ok, why := mod.Snapshot()
				if ok {
					t.Fatalf("%s: snapshotted", p.name)
				}
				if p.snapshot && !strings.Contains(why, c.why) {
					t.Errorf("Snapshot() says %q, want it to name %q", why, c.why)
				}
				for i := 0; i < 3; i++ {
					res, err := mod.Call(t.Context(), []byte("input"))
					if err != nil {
						t.Fatalf("%s: call %d: %v", p.name, i, err)
					}
					if string(res.Output) != c.output {
						t.Fatalf("%s: call %d: output %q, want %q", p.name, i, res.Output, c.output)
					}
				}
			}
		})
	}
}

// TestSnapshotRealGuests: what real toolchains build. The built-ins (TinyGo,
// wasm-unknown reactors through skillkit) and AssemblyScript (its start
// function exported as _initialize) have pure initialisers and are
// snapshotted; go-pdk on TinyGo's
// wasip1 reads WASI in its initialiser and is not. Either way the answers and
// the fuel are those of the initialiser run by the call.
func TestSnapshotRealGuests(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("hello \"snapshot\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host, err := hostfns.Link(hostfns.Grants{Read: []string{dir}}, hostfns.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(t.Context()) })
	builtin := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "builtins-wasm", name+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name     string
		wasm     []byte
		entry    string
		input    string
		snapshot bool
	}{
		{"read_file", builtin("read_file"), "run", `{"path":"f.txt"}`, true},
		{"read_file/missing", builtin("read_file"), "run", `{"path":"nope.txt"}`, true},
		{"read_file/bad input", builtin("read_file"), "run", `{"path":1}`, true},
		{"skillkit noop", readFixture(t, "skillkit_noop.wasm"), "run", `{"path":"x"}`, true},
		{"assemblyscript", readFixture(t, "as_plugin.wasm"), "greet", "buddy", true},
		{"go-pdk wasip1", readFixture(t, "pdkplugin.wasm"), "greet", "buddy", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var answers [2]string
			for i, p := range paths {
				rt := snapshotRuntime(t, p.snapshot, -1)
				m := runtime.DefaultManifest("guest")
				m.Entrypoint = c.entry
				mod, err := rt.Load(t.Context(), c.wasm, runtime.Spec{Manifest: m, Host: host})
				if err != nil {
					t.Fatal(err)
				}
				ok, why := mod.Snapshot()
				if want := p.snapshot && c.snapshot; ok != want {
					t.Fatalf("%s: Snapshot() = %v (%s), want %v", p.name, ok, why, want)
				}
				for j := 0; j < 2; j++ {
					res, err := mod.Call(t.Context(), []byte(c.input))
					a := fmt.Sprintf("err=%v", err)
					if err == nil {
						a = fmt.Sprintf("output=%q fuel=%d", res.Output, res.Fuel)
					}
					if j > 0 && a != answers[i] {
						t.Fatalf("%s: %s then %s", p.name, answers[i], a)
					}
					answers[i] = a
				}
			}
			if answers[0] != answers[1] {
				t.Errorf("from the snapshot: %s\nrunning the initialiser: %s", answers[0], answers[1])
			}
			if !bytes.Contains([]byte(answers[0]), []byte("fuel=")) && !strings.Contains(c.name, "/") {
				t.Errorf("call failed: %s", answers[0])
			}
		})
	}
}
