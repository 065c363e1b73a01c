package runtime

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/experimental"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestSnapshotRestoresTheInitialisedState: an instance restored from the
// snapshot holds, byte for byte and global for global, what an instance that
// ran the initialiser (and start function) itself holds — for every built-in
// and the fixtures with pure initialisers — and the snapshot's own bytes are
// never written by the calls made from it.
func TestSnapshotRestoresTheInitialisedState(t *testing.T) {
	ctx := t.Context()
	rt, err := New(ctx, Options{Prepared: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	type guest struct{ name, path, entry string }
	guests := []guest{
		{"isolation", filepath.Join("testdata", "snapshot", "isolation.wasm"), "check"},
		{"assemblyscript", filepath.Join("testdata", "as_plugin.wasm"), "greet"},
	}
	builtins, _ := filepath.Glob(filepath.Join("..", "builtins-wasm", "*.wasm"))
	if len(builtins) == 0 {
		t.Fatal("no built-ins")
	}
	for _, b := range builtins {
		guests = append(guests, guest{filepath.Base(b), b, "run"})
	}
	for _, g := range guests {
		t.Run(g.name, func(t *testing.T) {
			wasm, err := os.ReadFile(g.path)
			if err != nil {
				t.Fatal(err)
			}
			man := DefaultManifest("guest")
			man.Entrypoint = g.entry
			if toml, err := os.ReadFile(strings.TrimSuffix(g.path, ".wasm") + ".skill.toml"); err == nil {
				if man, err = ParseManifest(toml); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			host, err := hostfns.Link(hostfns.Grants{Read: []string{dir}, Write: []string{dir},
				Domains: allow.Intersect([]string{"*"}, []string{"127.0.0.1"}), Namespace: "t", Schedule: true},
				hostfns.Deps{KV: nopStore{}, Memories: nopStore{}, Jobs: nopStore{}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { host.Close(context.Background()) })
			mod, err := rt.Load(ctx, wasm, Spec{Manifest: man, Host: host, Name: g.name})
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(ctx)
			if mod.snap == nil {
				t.Fatalf("not snapshotted: %s", mod.snapWhy)
			}
			image := cloneSnapshot(mod.snap)

			// An instance that runs the initialiser (and start) itself.
			ran := initialisedByHand(t, mod)
			defer ran.close(ctx, nil)
			restored, err := mod.newInstance(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			defer restored.close(ctx, nil)
			if !restored.restored {
				t.Fatal("instance not restored")
			}
			a, b := ran.mod.Memory(), restored.mod.Memory()
			if a.Size() != b.Size() {
				t.Fatalf("memory %d bytes after the initialiser, %d restored", a.Size(), b.Size())
			}
			am, _ := a.Read(0, a.Size())
			bm, _ := b.Read(0, b.Size())
			if i := firstDiff(am, bm); i >= 0 {
				t.Fatalf("memory differs at %#x: %#x after the initialiser, %#x restored", i, am[i], bm[i])
			}
			ai, bi := ran.mod.(experimental.InternalModule), restored.mod.(experimental.InternalModule)
			if ai.NumGlobal() != bi.NumGlobal() {
				t.Fatalf("%d globals, %d restored", ai.NumGlobal(), bi.NumGlobal())
			}
			// The last global is the fuel counter: a fresh instance's is 0
			// and the initialiser's run spent from it.
			for i := 0; i < ai.NumGlobal()-1; i++ {
				if x, y := ai.Global(i).Get(), bi.Global(i).Get(); x != y {
					t.Errorf("global %d: %#x after the initialiser, %#x restored", i, x, y)
				}
			}
			// Calls (which write all over their memory) leave the snapshot
			// as it was.
			for i := 0; i < 3; i++ {
				_, _ = mod.Call(ctx, []byte(`{"path":"x","key":"k","value":"v","text":"t","query":"q","url":"http://127.0.0.1:1/","content":"c","action":"list"}`))
			}
			if !sameSnapshot(image, mod.snap) {
				t.Fatal("the snapshot changed under calls")
			}
		})
	}
}

// initialisedByHand instantiates mod without the snapshot and runs its
// initialiser and start function as a call would.
func initialisedByHand(t *testing.T, m *Module) *instance {
	t.Helper()
	ctx := t.Context()
	st := &callState{m: m, ctx: ctx, done: ctx.Done(), budget: MaxFuel, chunk: DefaultFuelChunk}
	st.k.init(m.r.mem, 16<<20)
	t.Cleanup(st.k.release)
	cctx := hostfns.WithCall(context.WithValue(ctx, stateKey{}, st), st)
	inst, err := m.newInstance(cctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.initialize(cctx); err != nil {
		t.Fatal(err)
	}
	if m.info.info.HasStart {
		if err := inst.mod.ExportedFunction(startExport).CallWithStack(cctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	return inst
}

// nopStore answers every key-value and memory request with nothing.
type nopStore struct{}

func (nopStore) KVGet(context.Context, string, string) ([]byte, error) {
	return nil, errs.New(errs.ErrNotFound, "no key")
}
func (nopStore) KVSet(context.Context, string, string, []byte) error { return nil }
func (nopStore) KVDelete(context.Context, string, string) error      { return nil }
func (nopStore) Remember(context.Context, string, string, []string) (int64, error) {
	return 1, nil
}
func (nopStore) Recall(context.Context, string, string, int) ([]hostfns.Memory, error) {
	return nil, nil
}
func (nopStore) Schedule(context.Context, []byte) ([]byte, error) { return []byte(`{"jobs":[]}`), nil }

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func cloneSnapshot(s *snapshot) *snapshot {
	c := *s
	c.runs = nil
	for _, r := range s.runs {
		c.runs = append(c.runs, memRun{off: r.off, data: bytes.Clone(r.data)})
	}
	c.globals = append([]globalValue(nil), s.globals...)
	return &c
}

func sameSnapshot(a, b *snapshot) bool {
	if a.pages != b.pages || a.fuel != b.fuel || len(a.runs) != len(b.runs) || len(a.globals) != len(b.globals) {
		return false
	}
	for i := range a.runs {
		if a.runs[i].off != b.runs[i].off || !bytes.Equal(a.runs[i].data, b.runs[i].data) {
			return false
		}
	}
	for i := range a.globals {
		if a.globals[i] != b.globals[i] {
			return false
		}
	}
	return true
}
