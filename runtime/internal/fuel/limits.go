package fuel

import (
	"errors"
	"fmt"
)

// Limits on what a module may declare. wazero allocates host memory for
// every table entry, global, segment, name and type a module declares, and
// its compile time grows faster than linearly with block nesting and br_table
// targets within one function: without these caps a few kilobytes of wasm can
// make the host allocate gigabytes (1,000 tables of 2^27 entries) or compile
// for minutes (8,000 nested blocks). Inspect and Instrument check all of them
// before wazero sees the bytes; each refusal names the limit and the value.
//
// Counts and sizes fail with ErrTooLarge; table entries, which become host
// memory at every instantiation, fail with ErrMemoryLimit.
const (
	// MaxModuleBytes caps the size of the module itself.
	MaxModuleBytes = 32 << 20
	// MaxTypes caps the type section; MaxTypeValues the params, and the
	// results, of one function type.
	MaxTypes      = 100_000
	MaxTypeValues = 1_000
	// MaxImports and MaxExports cap the import and export sections.
	MaxImports = 100_000
	MaxExports = 100_000
	// MaxFunctions caps functions, imported and defined.
	MaxFunctions = 100_000
	// MaxBodyBytes caps one function body (locals and code).
	MaxBodyBytes = 4 << 20
	// MaxNesting caps the depth of nested block, loop and if in a function
	// (GHC's output reaches 1,706; a metered chain of 4,000 loops took 4 s
	// to compile, 8,000 took 20 s).
	MaxNesting = 3_000
	// MaxFunctionNestingWeight caps the sum, over every block, loop and if
	// and every metered block the instrumentation starts (after a branch,
	// at an else, after an end that something inside branches past), of its
	// nesting depth in the metered output (where each loop is wrapped in
	// three more structures), for one function; MaxNestingWeight for the
	// whole module. Compile time grows faster than linearly with it, and
	// MaxNesting alone leaves it quadratic in the size of a function: a
	// chain of 1,000 nested loops with a branch in each (weight 6M) took
	// 0.85 s to load, 2,000 (24M) took 7 s. GHC's output reaches 4.4M in
	// one function; Go's wasip1 output weighs about 2 per byte of module.
	MaxFunctionNestingWeight = 8 << 20
	MaxNestingWeight         = 32 << 20
	// MaxBrTableTargets caps the targets (with the default) of one br_table
	// and of all br_tables of one function (compile time is superlinear in
	// them: 65,536 took 1 s, 200,000 took 7 s and 530 MB).
	MaxBrTableTargets = 65_536
	// MaxModuleBrTableTargets caps the br_table targets of the whole module
	// (Go's wasip1 output has about 50,000 in 2 MB).
	MaxModuleBrTableTargets = 512 << 10
	// MaxTables caps tables, imported and defined.
	MaxTables = 100
	// MaxTableEntries caps the entries of all tables together, at
	// instantiation and after every table.grow (a grow past it returns -1,
	// as a grow past a table's maximum does). Each entry takes
	// TableEntryBytes of host memory in every instance.
	MaxTableEntries = 1 << 20
	// TableEntryBytes is what wazero allocates per table entry (a uintptr).
	TableEntryBytes = 8
	// MaxGlobals caps globals, imported and defined (wazero allocates about
	// 90 bytes per global and instance).
	MaxGlobals = 100_000
	// MaxElemSegments and MaxDataSegments cap the segments;
	// MaxElemEntries the entries of all element segments together (each is
	// decoded into a constant expression, and copied into every instance
	// for passive segments). Data bytes are bounded by MaxModuleBytes.
	MaxElemSegments = 100_000
	MaxElemEntries  = 1 << 20
	MaxDataSegments = 100_000
	// MaxNameEntries caps the function and local names of the "name"
	// section together (wazero decodes each into a 24-byte entry).
	MaxNameEntries = 1 << 20
)

// The sentinels of the limits.
var (
	// ErrTooLarge: the module is over a size or count limit.
	ErrTooLarge = errors.New("module over a size limit")
	// ErrMemoryLimit: the module declares more host memory than allowed.
	ErrMemoryLimit = errors.New("module over a memory limit")
)

// overLimit is the error for a value over a limit: "element segments: 200000
// is over the limit of 100000 (MaxElemSegments)".
func (r *reader) overLimit(off int, sentinel error, what string, value uint64, limit uint64, name string) error {
	return r.errAt(off, sentinel, "%s: %d is over the limit of %d (%s)", what, value, limit, name)
}

// checkLimit returns overLimit when value > limit.
func (r *reader) checkLimit(off int, value, limit uint64, what, name string) error {
	if value > limit {
		return r.overLimit(off, ErrTooLarge, what, value, limit, name)
	}
	return nil
}

// moduleSize refuses a module over MaxModuleBytes before anything is read.
func moduleSize(n int) error {
	if n > MaxModuleBytes {
		return &Error{Where: "module", Offset: -1, Err: ErrTooLarge,
			Detail: fmt.Sprintf("size: %d bytes is over the limit of %d (MaxModuleBytes)", n, MaxModuleBytes)}
	}
	return nil
}
