// Package fuel rewrites a WebAssembly module so that it meters itself: it counts
// the original instructions it executes and asks the host for more fuel in
// chunks, so a host can stop a guest deterministically after a fixed amount of
// work and, at every refuel, check a deadline.
//
// The rewrite is a hand-written single-module pass over the binary (no third
// party wasm library): sections are copied byte for byte, and only what holds
// function indices or code is rewritten. Anything the pass does not understand
// is an error; it never guesses. It accepts the WebAssembly core spec plus the
// features of wazero's api.CoreFeaturesV2 (mutable-global, sign-extension,
// non-trapping float-to-int, multi-value, bulk-memory, reference-types, SIMD)
// and refuses (ErrUnsupported) start sections, tail calls, threads, exception
// handling, memory64, multi-memory and GC / typed function references.
//
// The instrumented module imports three functions from the host module
// "buddy:fuel" (Module):
//
//	refuel(fuel i64) (i64) // fuel went negative: return fuel + a grant, >= 0, or panic
//	settle(fuel i64)       // an exported function returned normally; fuel is what is left
//	oom()                  // memory.grow returned -1
//
// Fuel lives in a mutable i64 global that starts at 0 and is never exported,
// so the first check of the first call asks for fuel. A host that keeps the
// total it granted knows at every refuel and settle how much was consumed
// (granted - fuel). Failing the call once consumed > budget, and otherwise
// granting min(chunk, budget-granted) or the deficit -fuel if that is more,
// stops the guest at the same instruction whatever the chunk size:
//
//	info, err := fuel.Inspect(wasm) // cheap, and before wazero sees the bytes
//	out, _, err := fuel.Instrument(wasm, fuel.Options{
//		ImportCost: func(module, name string) int64 { return 100 },
//	})
//	// Link a host module fuel.Module with fuel.RefuelName, fuel.SettleName
//	// and fuel.OOMName, then compile and run out. refuel, per call state s:
//	func refuel(ctx context.Context, fuel int64) int64 {
//		s := stateOf(ctx)
//		if s.granted-fuel > s.budget {
//			panic(ErrFuelExhausted)
//		}
//		if err := ctx.Err(); err != nil {
//			panic(err) // the deadline, checked at least every chunk
//		}
//		g := max(min(s.chunk, s.budget-s.granted), -fuel)
//		s.granted += g
//		return fuel + g
//	}
//
// docs/RATIONALE.md ("The fuel cost model") says what is charged, what is not, and where
// the overshoot is bounded.
package fuel

import (
	"errors"
	"fmt"
)

// Names of the functions the instrumented module imports, and the cache key of
// the rewrite.
const (
	// Module is the import module of the added functions.
	Module = "buddy:fuel"
	// RefuelName is called with the (negative) fuel left and returns the new
	// fuel, which must be >= 0 (a loop header calls it again otherwise); it
	// fails the call by panicking: (i64) -> (i64).
	RefuelName = "refuel"
	// SettleName is called with the fuel left when an exported function returns
	// normally: (i64) -> ().
	SettleName = "settle"
	// OOMName is called when memory.grow returned -1: () -> ().
	OOMName = "oom"
	// Version changes whenever Instrument's output for the same input and options
	// changes. Use it in cache keys.
	Version = 2
)

// KernelModule is the module name reserved for host wrappers of kernel imports
// (see Options.Rename). An original module that imports from it, or from
// Module, is refused.
const KernelModule = "buddy:kernel"

// The sentinels. Every error returned by Inspect and Instrument is an *Error
// that unwraps to one of them, or to ErrTooLarge or ErrMemoryLimit (limits.go).
var (
	// ErrUnsupported: the module uses a feature that is refused on purpose
	// (start section, threads, tail calls, exception handling, memory64,
	// multi-memory, GC), an unknown opcode, section or type, or imports from a
	// reserved module.
	ErrUnsupported = errors.New("unsupported wasm feature")
	// ErrMalformed: the binary is not a well-formed module, or refers to an index
	// that does not exist.
	ErrMalformed = errors.New("malformed wasm")
	// ErrOptions: an Options value is out of range.
	ErrOptions = errors.New("invalid fuel options")
)

// Error says what is wrong and where. It unwraps to ErrUnsupported,
// ErrMalformed, ErrOptions, ErrTooLarge or ErrMemoryLimit.
type Error struct {
	// Where is the part of the module, e.g. "import section" or "code of
	// function 12" (function indices are those of the original module).
	Where string
	// Offset is the byte offset in the original module, or -1.
	Offset int
	// Detail says what was found, e.g. "unknown opcode 0xfe 0x10".
	Detail string
	// Err is the sentinel.
	Err error
}

func (e *Error) Error() string {
	s := "fuel: "
	if e.Where != "" {
		s += e.Where
		if e.Offset >= 0 {
			s += fmt.Sprintf(", offset %#x", e.Offset)
		}
		s += ": "
	} else if e.Offset >= 0 {
		s += fmt.Sprintf("offset %#x: ", e.Offset)
	}
	return s + e.Detail + " (" + e.Err.Error() + ")"
}

func (e *Error) Unwrap() error { return e.Err }

// Options tunes the costs. The zero value is usable.
type Options struct {
	// ImportCost is the extra static fuel charged for each call to an imported
	// function (host work is otherwise unmetered), given the original module
	// and field name. nil means 0. It must return a value in [0, MaxImportCost].
	ImportCost func(module, name string) int64
	// Rename, if non-nil, may move a function import of the original module to
	// another module name (same field name, same signature), e.g.
	// extism:host/env.alloc -> buddy:kernel.alloc, so the host can wrap and meter
	// it. Return "" to keep the import where it is. The import keeps its index.
	// Renaming to Module is refused.
	Rename func(module, name string) string
	// GrowPageCost is the fuel charged per page asked of memory.grow, in
	// [0, MaxGrowPageCost]; 0 means 1024.
	GrowPageCost int64
	// BulkByteShift: memory.fill, memory.copy and memory.init cost
	// (len >> BulkByteShift) + 1, in [0, 32]; 0 means 6 (one unit per 64 bytes).
	BulkByteShift uint
	// ReentrantImports must be set if an imported function may call back
	// into this module's exports before it returns: the fuel kept in a local
	// is then stored before and reloaded after every call of an import.
	// Without it an import call costs no fuel bookkeeping, and re-entrant
	// work would go unmetered. Extism host functions cannot call the guest,
	// so buddy leaves it false.
	ReentrantImports bool

	// StartExport, if not empty, turns a start section into an export of that
	// name instead of refusing the module: the start function then runs when
	// the host calls that export (metered like any other) rather than inside
	// instantiation, where no call's limits apply. The module must not export
	// the name itself. Info.HasStart still reports the start section.
	StartExport string

	// GlobalExportPrefix, if not empty, exports every mutable global the
	// module defines under that prefix and its index ("__g" + "3"), so that a
	// host can read and set globals the module does not export itself (to
	// start a fresh instance from a snapshot). Exports are seen by the host
	// only: the guest gains nothing. The fuel global is never exported. The
	// module must not export a name with the prefix itself.
	GlobalExportPrefix string

	// allowStart keeps a start section (rewritten) instead of refusing it. Tests
	// only: the spec suite has modules with start functions.
	allowStart bool
}

// Limits of the options.
const (
	MaxImportCost   = 1 << 40
	MaxGrowPageCost = 1 << 30
)

// Defaults for zero Options fields.
const (
	DefaultGrowPageCost  = 1024
	DefaultBulkByteShift = 6
)

// ValueType is a wasm value type byte.
type ValueType byte

// The value types the pass accepts.
const (
	I32       ValueType = 0x7f
	I64       ValueType = 0x7e
	F32       ValueType = 0x7d
	F64       ValueType = 0x7c
	V128      ValueType = 0x7b
	FuncRef   ValueType = 0x70
	ExternRef ValueType = 0x6f
)

func (t ValueType) String() string {
	switch t {
	case I32:
		return "i32"
	case I64:
		return "i64"
	case F32:
		return "f32"
	case F64:
		return "f64"
	case V128:
		return "v128"
	case FuncRef:
		return "funcref"
	case ExternRef:
		return "externref"
	}
	return fmt.Sprintf("valtype(%#x)", byte(t))
}

// FuncType is a function signature.
type FuncType struct{ Params, Results []ValueType }

func (t FuncType) String() string {
	return fmt.Sprintf("%v -> %v", t.Params, t.Results)
}

// Equal reports whether t and u are the same signature.
func (t FuncType) Equal(u FuncType) bool {
	if len(t.Params) != len(u.Params) || len(t.Results) != len(u.Results) {
		return false
	}
	for i := range t.Params {
		if t.Params[i] != u.Params[i] {
			return false
		}
	}
	for i := range t.Results {
		if t.Results[i] != u.Results[i] {
			return false
		}
	}
	return true
}

// External kinds of imports and exports.
const (
	KindFunc   byte = 0
	KindTable  byte = 1
	KindMemory byte = 2
	KindGlobal byte = 3
)

// Import is one import of the original module.
type Import struct {
	Module, Name string
	Kind         byte     // KindFunc, KindTable, KindMemory or KindGlobal
	Type         FuncType // KindFunc only
}

// Export is one export of the original module.
type Export struct {
	Name string
	Kind byte
	Type FuncType // KindFunc only
}

// Info holds facts about the original module.
type Info struct {
	Imports []Import
	Exports []Export
	// HasStart: the module has a start section (Instrument refuses it).
	HasStart bool
	// MemoryMin and MemoryMax are the limits, in 64 KiB pages, of the module's
	// single memory, defined or imported; all zero if it has none.
	MemoryMin, MemoryMax uint64
	HasMemoryMax         bool
	// HasMemory: the module defines or imports a memory.
	HasMemory bool
	// Tables is the number of tables, defined or imported, and TableEntries
	// the sum of their initial sizes (each entry takes TableEntryBytes of
	// host memory per instance; all tables together never exceed
	// MaxTableEntries, table.grow included).
	Tables       int
	TableEntries uint64
	// Globals are the module's globals, imports first, in index order.
	Globals []Global
	// TableWrites: some instruction of the code changes a table (table.set,
	// table.grow, table.fill, table.copy, table.init) or drops an element
	// segment (elem.drop). Without them a table holds, for the life of an
	// instance, what its element segments put there at instantiation.
	TableWrites bool
	// DataDrops: some instruction drops a data segment (data.drop).
	DataDrops bool
}

// Global is the type of one global.
type Global struct {
	Type     ValueType
	Mutable  bool
	Imported bool
}

// Inspect parses wasm without rewriting it. It decodes every instruction but
// records nothing for a rewrite. It fails on malformed sections and code, on
// the features the pass refuses (memory64, threads, tags, GC types, unknown
// opcodes) and on a module over a limit (limits.go: ErrTooLarge,
// ErrMemoryLimit), but reports a start section (Info.HasStart) and imports
// from reserved modules rather than refusing them. Instrument may still fail
// on a module Inspect accepts.
//
// Call Inspect (or Instrument) before wazero sees untrusted bytes: it refuses
// vector counts larger than their section and more than 50,000 locals in a
// function, on which wazero v1.12.0's decoder allocates without bound (a
// 15-byte module can make CompileModule die with "out of memory"), and the
// declarations (tables, globals, segments, nesting, br_table targets) that
// make wazero allocate gigabytes or compile for minutes. Its time and
// allocations are linear in the size of the module.
func Inspect(wasm []byte) (*Info, error) {
	m, err := parseModule(wasm, false)
	if err != nil {
		return nil, err
	}
	return m.info(), nil
}

// Instrument returns the metered module and facts about the original. The
// output depends only on wasm, the options and Version.
func Instrument(wasm []byte, opts Options) ([]byte, *Info, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, nil, err
	}
	m, err := parseModule(wasm, true)
	if err != nil {
		return nil, nil, err
	}
	out, err := m.instrument(o)
	if err != nil {
		return nil, nil, err
	}
	return out, m.info(), nil
}

// resolved holds Options after defaults and range checks.
type resolved struct {
	Options
	growPageCost int64
	bulkShift    uint
}

func (o Options) resolve() (resolved, error) {
	r := resolved{Options: o, growPageCost: o.GrowPageCost, bulkShift: o.BulkByteShift}
	if r.growPageCost == 0 {
		r.growPageCost = DefaultGrowPageCost
	}
	if r.growPageCost < 0 || r.growPageCost > MaxGrowPageCost {
		return r, &Error{Offset: -1, Err: ErrOptions,
			Detail: fmt.Sprintf("GrowPageCost %d out of range [0, %d]", o.GrowPageCost, int64(MaxGrowPageCost))}
	}
	if r.bulkShift == 0 {
		r.bulkShift = DefaultBulkByteShift
	}
	if r.bulkShift > 32 {
		return r, &Error{Offset: -1, Err: ErrOptions,
			Detail: fmt.Sprintf("BulkByteShift %d out of range [0, 32]", o.BulkByteShift)}
	}
	return r, nil
}
