package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/runtime/internal/fuel"
)

// Post-initialisation snapshots.
//
// A module built by a language runtime has an initialiser (a reactor's
// _initialize, C's __wasm_call_ctors, Haskell's hs_init, a start section)
// that every call would run first, in its fresh instance, before the export.
// When that initialiser is pure — it calls no import at all, so it can
// depend on nothing but the module itself: no input, var, config, clock,
// random source, file or log — Load runs it once, in a throw-away instance,
// and records what it changed: the memory chunks that differ from a freshly
// instantiated memory (and the memory's new size), and the mutable globals
// whose values differ. Every call's fresh instance is then instantiated as
// before and brought to that state before the call (restore): the same
// bytes, the same globals, as if it had run the initialiser itself.
//
// Isolation is that of every fresh instance (docs/RATIONALE.md, "A snapshot
// of the initialised guest"): each call still gets a new instance with its own
// memory, globals, tables, kernel and vars; the snapshot is a set of byte
// slices and values the Module holds and only ever copies from; nothing a call
// writes reaches it.
//
// What a snapshot cannot hold, and so the rule for taking one:
//   - any import call during the initialiser (the kernel's blocks, vars and
//     input are per call; WASI's clocks and random source are per instance;
//     host functions reach outside): refused at the call, the attempt ends;
//   - tables: a module whose code can change a table or drop a segment
//     (fuel.Info.TableWrites, DataDrops) is not snapshotted, so its tables are
//     always what instantiation builds;
//   - globals that are not numbers (references, vectors): not snapshotted.
//
// Fuel: a restored call is charged the fuel the initialiser used when the
// snapshot was taken, before its first instruction, so Result.Fuel and the
// point where a budget runs out are the same with or without a snapshot.
type snapshot struct {
	memory  bool     // the module has a memory
	pages   uint32   // memory size after the initialiser, in 64 KiB pages
	runs    []memRun // memory the initialiser changed
	globals []globalValue
	fuel    int64 // what the initialiser used: charged to every restored call
}

// memRun is a range of memory and the bytes the initialiser left there.
type memRun struct {
	off  uint32
	data []byte
}

// globalValue is a mutable global the initialiser changed, by its export
// name (fuel.Options.GlobalExportPrefix).
type globalValue struct {
	name string
	v    uint64
}

// globalPrefix names the exports the instrumenter adds for the module's
// mutable globals: the host reads and sets them; the guest cannot see them.
const globalPrefix = "__buddy_global_"

// snapChunk is the granularity at which memory is compared and restored.
const snapChunk = 256

// Bounds of a snapshot attempt: an initialiser that needs more is run by
// every call instead (the same results, only slower).
const (
	snapshotMaxFuel = 100_000_000
	snapshotTimeout = 2 * time.Second
)

// errImpure ends a snapshot attempt at the initialiser's first import call.
var errImpure = errors.New("the initialiser called an import")

// Snapshot reports whether calls of the module start from a snapshot of its
// initialised state, and if not, why (empty when the module has no
// initialiser: there is nothing to run before a call).
func (m *Module) Snapshot() (bool, string) {
	return m.snap != nil, m.snapWhy
}

// hasInitializer reports whether a call of the module runs something before
// its export: a start section or a guest runtime's initialiser.
func (m *Module) hasInitializer() bool {
	if m.info.info.HasStart {
		return true
	}
	for _, e := range m.info.info.Exports {
		if e.Kind != fuel.KindFunc {
			continue
		}
		switch e.Name {
		case "hs_init":
			return true
		case "_initialize", "__wasm_call_ctors":
			if m.info.WASI && len(e.Type.Params) == 0 {
				return true
			}
		}
	}
	return false
}

// takeSnapshot runs the initialiser in a throw-away instance and records its
// effect; a nil snapshot comes with the reason (empty: no initialiser). An
// error is only ctx's.
func (m *Module) takeSnapshot(ctx context.Context) (*snapshot, string, error) {
	if !m.hasInitializer() {
		return nil, "", nil
	}
	if m.r.opts.NoSnapshots {
		return nil, "snapshots are off (Options.NoSnapshots)", nil
	}
	fi := m.info.info
	if fi.TableWrites {
		return nil, "its code can change a table (table.set, grow, fill, copy, init or elem.drop): tables are not snapshotted", nil
	}
	if fi.DataDrops {
		return nil, "its code can drop a data segment (data.drop): segments are not snapshotted", nil
	}
	for i, g := range fi.Globals {
		switch g.Type {
		case fuel.I32, fuel.I64, fuel.F32, fuel.F64:
		default:
			if g.Mutable {
				return nil, fmt.Sprintf("global %d is a mutable %s: only numbers are snapshotted", i, g.Type), nil
			}
		}
	}

	res := m.manifest.Resources
	ctx, cancel := context.WithTimeout(ctx, min(res.Timeout, snapshotTimeout))
	defer cancel()
	st := &callState{
		m:            m,
		ctx:          ctx,
		done:         ctx.Done(),
		budget:       min(int64(res.Fuel), snapshotMaxFuel),
		chunk:        m.r.opts.FuelChunk,
		snapshotting: true,
	}
	st.k.init(m.r.mem, uint64(res.MemoryMB)<<20)
	cctx := hostfns.WithCall(context.WithValue(ctx, stateKey{}, st), st)

	inst, err := m.newInstance(cctx, false)
	if err != nil {
		return nil, "instantiating: " + err.Error(), ctx.Err()
	}
	inst.rand.st = st
	defer inst.close(context.WithoutCancel(ctx), st)

	var before []byte
	var mem api.Memory
	if fi.HasMemory { // (wazero answers a typed nil otherwise)
		mem = inst.mod.Memory()
		b, _ := mem.Read(0, mem.Size())
		before = bytes.Clone(b)
	}
	globals := m.snapshotGlobals(inst.mod)
	initial := make([]uint64, len(globals))
	for i, g := range globals {
		initial[i] = g.Get()
	}

	// The initialiser, then the start function, in the order a call runs
	// them (CallExport, instance.call).
	st.k.Reset()
	err = inst.initialize(cctx)
	if err == nil && fi.HasStart {
		f := inst.mod.ExportedFunction(startExport)
		if f == nil {
			return nil, "no start export", nil
		}
		err = f.CallWithStack(cctx, nil)
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && errors.Is(cerr, context.Canceled) {
			return nil, "", cerr
		}
		switch {
		case st.impure != "":
			return nil, "the initialiser calls " + st.impure + " (a snapshot holds no per-call state: only an initialiser that calls no import is run ahead)", nil
		case errors.Is(err, ErrFuelExhausted) || errors.As(err, new(*FuelError)):
			return nil, fmt.Sprintf("the initialiser needs more than %d fuel", st.budget), nil
		case errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Sprintf("the initialiser runs longer than %s", min(res.Timeout, snapshotTimeout)), nil
		}
		return nil, "the initialiser fails: " + firstLine(err.Error()), nil
	}
	if st.oom {
		return nil, "the initialiser ran out of memory", nil
	}

	s := &snapshot{fuel: int64(st.used())}
	if mem != nil {
		after, _ := mem.Read(0, mem.Size())
		s.memory, s.pages = true, mem.Size()/65536
		s.runs = diffRuns(before, after)
	}
	for i, g := range globals {
		if v := g.Get(); v != initial[i] {
			s.globals = append(s.globals, globalValue{name: g.name, v: v})
		}
	}
	return s, "", nil
}

// namedGlobal is a mutable global of an instance with its export name.
type namedGlobal struct {
	api.MutableGlobal
	name string
}

// snapshotGlobals are the instance's mutable globals the module defines.
func (m *Module) snapshotGlobals(mod api.Module) []namedGlobal {
	var out []namedGlobal
	for i, g := range m.info.info.Globals {
		if !g.Mutable || g.Imported {
			continue
		}
		name := fmt.Sprintf("%s%d", globalPrefix, i)
		if mg, ok := mod.ExportedGlobal(name).(api.MutableGlobal); ok {
			out = append(out, namedGlobal{mg, name})
		}
	}
	return out
}

// diffRuns returns the chunks of after that differ from before (bytes past
// the end of before compare with zeros: grown memory starts zeroed), merged
// into runs.
func diffRuns(before, after []byte) []memRun {
	var runs []memRun
	var zero [snapChunk]byte
	for off := 0; off < len(after); off += snapChunk {
		end := min(off+snapChunk, len(after))
		var was []byte
		switch {
		case end <= len(before):
			was = before[off:end]
		case off < len(before):
			was = append(bytes.Clone(before[off:]), zero[:end-len(before)]...)
		default:
			was = zero[:end-off]
		}
		if bytes.Equal(was, after[off:end]) {
			continue
		}
		if l := len(runs); l > 0 && int(runs[l-1].off)+len(runs[l-1].data) == off {
			runs[l-1].data = append(runs[l-1].data, after[off:end]...)
			continue
		}
		runs = append(runs, memRun{off: uint32(off), data: bytes.Clone(after[off:end])})
	}
	return runs
}

// restore brings a fresh instance to the snapshot's state.
func (s *snapshot) restore(mod api.Module) error {
	if s.memory {
		mem := mod.Memory()
		if have := mem.Size() / 65536; s.pages > have {
			if _, ok := mem.Grow(s.pages - have); !ok {
				return fmt.Errorf("growing memory to %d pages", s.pages)
			}
		}
		for _, r := range s.runs {
			if !mem.Write(r.off, r.data) {
				return fmt.Errorf("writing %d bytes at %#x", len(r.data), r.off)
			}
		}
	}
	for _, g := range s.globals {
		mg, ok := mod.ExportedGlobal(g.name).(api.MutableGlobal)
		if !ok {
			return fmt.Errorf("global %s is not exported", g.name)
		}
		mg.Set(g.v)
	}
	return nil
}

// pure is the start of every host function: while a snapshot is being taken
// no import may be called (only buddy:fuel's refuel and settle, which are the
// instrumentation's).
func (st *callState) pure(module, name string) {
	if st.snapshotting {
		st.impure = module + "." + name
		panic(errImpure)
	}
}
