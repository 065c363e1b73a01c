package fuel

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Section ids.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// rank is the position a non-custom section must take in a module (tags sit
// between memory and global, the data count between element and code).
var rank = [...]int{
	secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5,
	secTag: 6, secGlobal: 7, secExport: 8, secStart: 9, secElement: 10,
	secDataCount: 11, secCode: 12, secData: 13,
}

var sectionNames = [...]string{
	secCustom: "custom section", secType: "type section", secImport: "import section",
	secFunction: "function section", secTable: "table section", secMemory: "memory section",
	secGlobal: "global section", secExport: "export section", secStart: "start section",
	secElement: "element section", secCode: "code section", secData: "data section",
	secDataCount: "data count section", secTag: "tag section",
}

// section is one section of the original module and what replaces it.
type section struct {
	id         byte
	start, end int    // content, after the size
	name       string // custom sections
	out        []byte // rewritten content (nil: copy as is)
	drop       bool
}

type importEntry struct {
	module, name string
	kind         byte
	typeIdx      uint32 // functions
	desc         []byte // descriptor bytes after the kind byte
}

type exportEntry struct {
	name string
	kind byte
	idx  uint32
}

// module holds what the pass knows about the original module.
type module struct {
	wasm     []byte
	o        *resolved // nil when only inspecting
	sections []section

	types      []FuncType
	typeBytes  [2]int // range of the type entries in the type section
	imports    []importEntry
	funcTypes  []uint32 // type index of every function, imports first
	numImports uint32   // function imports
	numDefined uint32   // function section entries
	funcBytes  [2]int   // range of the function section entries

	numTables, numMemories, numGlobals uint32
	globals                            []Global // every global, imports first
	memMin, memMax                     uint64
	hasMemMax                          bool

	exports []exportEntry
	// tableWrites: some instruction changes a table or drops an element
	// segment; dataDrops: some instruction drops a data segment.
	tableWrites, dataDrops bool
	hasStart               bool
	start                  uint32
	code                   int // index of the code section in sections, or -1

	// Filled for Instrument.
	importCost []int64  // static cost of calling each function import
	wrapped    []uint32 // original function index of each export wrapper
	wrapperOf  map[uint32]uint32
	thunkOf    map[uint32]uint32 // thunk ordinal of each metered import used as a reference
	thunked    []uint32          // the import behind each thunk
	elemCount  int               // element segments of the original
	elemOut    []byte            // rewritten element segments, without the count
	declare    map[uint32]bool   // output function indices ref.func in code needs declared

	numGlobalImports uint32

	// Totals checked against the limits (limits.go).
	tableEntries uint64 // initial entries of all tables
	elemEntries  uint64
	brTargets    uint64 // br_table targets of the module
	depthSum     uint64 // nesting weight of the module (code.go weigh)
}

func (m *module) numFuncs() uint32 { return uint32(len(m.funcTypes)) }

// Indices in the instrumented module.
func (m *module) refuelIdx() uint32 { return m.numImports }
func (m *module) settleIdx() uint32 { return m.numImports + 1 }
func (m *module) oomIdx() uint32    { return m.numImports + 2 }
func (m *module) fuelGlobal() uint32 {
	return m.numGlobals
}

// remap maps an original function index to the instrumented module.
func (m *module) remap(f uint32) uint32 {
	if f < m.numImports {
		return f
	}
	return f + 3
}

func (m *module) wrapperIdx(k uint32) uint32 {
	return m.numFuncs() + 3 + k
}

// remapRef maps an original function index used as a reference (ref.func,
// element segments): an import that costs fuel to call becomes a thunk that
// charges it, so calling it through a table costs the same as calling it
// directly.
func (m *module) remapRef(f uint32) uint32 {
	if f >= m.numImports || m.importCost[f] == 0 {
		return m.remap(f)
	}
	k, ok := m.thunkOf[f]
	if !ok {
		k = uint32(len(m.thunked))
		m.thunkOf[f] = k
		m.thunked = append(m.thunked, f)
	}
	return m.numFuncs() + 3 + uint32(len(m.wrapped)) + k
}

func (m *module) info() *Info {
	in := &Info{HasStart: m.hasStart, MemoryMin: m.memMin, MemoryMax: m.memMax,
		HasMemoryMax: m.hasMemMax, HasMemory: m.numMemories > 0,
		Tables: int(m.numTables), TableEntries: m.tableEntries,
		Globals: slices.Clone(m.globals), TableWrites: m.tableWrites, DataDrops: m.dataDrops}
	for _, im := range m.imports {
		x := Import{Module: im.module, Name: im.name, Kind: im.kind}
		if im.kind == KindFunc {
			x.Type = m.types[im.typeIdx]
		}
		in.Imports = append(in.Imports, x)
	}
	for _, ex := range m.exports {
		x := Export{Name: ex.name, Kind: ex.kind}
		if ex.kind == KindFunc {
			x.Type = m.types[m.funcTypes[ex.idx]]
		}
		in.Exports = append(in.Exports, x)
	}
	return in
}

// parseModule reads and checks every section; the code section only shallowly
// unless instrument is set (Instrument decodes it while rewriting it).
func parseModule(wasm []byte, instrument bool) (*module, error) {
	if err := moduleSize(len(wasm)); err != nil {
		return nil, err
	}
	m := &module{wasm: wasm, code: -1}
	r := &reader{b: wasm, end: len(wasm), what: "module header", fn: -1}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, r.malformed(0, "not a wasm module (magic header)")
	}
	if string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return nil, r.unsupported(4, "binary version % x", wasm[4:8])
	}
	r.pos = 8
	lastRank := 0
	for r.pos < len(wasm) {
		off := r.pos
		r.what = "section header"
		r.end = len(wasm)
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		if int64(size) > int64(len(wasm)-r.pos) {
			return nil, r.malformed(off, "section size %d past the end of the module", size)
		}
		s := section{id: id, start: r.pos, end: r.pos + int(size)}
		if id != secCustom {
			if int(id) >= len(rank) {
				return nil, r.unsupported(off, "unknown section id %d", id)
			}
			if id == secTag {
				return nil, r.unsupported(off, "tag section (exception handling)")
			}
			if rank[id] <= lastRank {
				return nil, r.malformed(off, "%s out of order or repeated", sectionNames[id])
			}
			lastRank = rank[id]
		}
		m.sections = append(m.sections, s)
		r.pos = s.end
	}
	for i := range m.sections {
		s := &m.sections[i]
		sr := &reader{b: wasm, pos: s.start, end: s.end, what: sectionNames[s.id], fn: -1}
		var err error
		switch s.id {
		case secCustom:
			err = m.customSection(sr, s)
		case secType:
			err = m.typeSection(sr)
		case secImport:
			err = m.importSection(sr)
		case secFunction:
			err = m.functionSection(sr)
		case secTable:
			err = m.tableSection(sr)
		case secMemory:
			err = m.memorySection(sr)
		case secGlobal:
			err = m.globalSection(sr, nil)
		case secExport:
			err = m.exportSection(sr)
		case secStart:
			err = m.startSection(sr)
		case secElement:
			err = m.elementSection(sr, nil)
		case secDataCount:
			off := sr.pos
			var n uint32
			if n, err = sr.u32(); err == nil {
				err = sr.checkLimit(off, uint64(n), MaxDataSegments, "data count", "MaxDataSegments")
			}
		case secCode:
			m.code = i
			if instrument {
				continue // read while rewriting
			}
			err = m.codeShallow(sr)
		case secData:
			err = m.dataSection(sr, nil)
		}
		if err != nil {
			return nil, err
		}
		if s.id != secCustom && sr.pos != sr.end {
			return nil, sr.malformed(sr.pos, "%d unexpected bytes at the end of the section", sr.end-sr.pos)
		}
	}
	if m.code < 0 && m.numDefined > 0 {
		return nil, (&reader{fn: -1, what: "module"}).malformed(len(wasm), "%d functions declared but no code section", m.numDefined)
	}
	return m, nil
}

func (m *module) customSection(r *reader, s *section) error {
	name, err := r.name()
	if err != nil {
		return err
	}
	s.name = name
	if strings.HasPrefix(name, ".debug_") {
		s.drop = true
	}
	if name == "name" {
		r.what = "name section"
		_, err = m.nameSection(r, false)
	}
	return err
}

// codeShallow checks the code section without rewriting it: the body count,
// body sizes and local declarations (wazero's decoder allocates by these
// counts before checking them), and every instruction, for the limits on
// nesting and br_table targets (wazero's compile time grows faster than
// linearly with them).
func (m *module) codeShallow(r *reader) error {
	n, err := r.count(2)
	if err != nil {
		return err
	}
	if uint32(n) != m.numDefined {
		return r.malformed(r.pos, "%d function bodies for %d declared functions", n, m.numDefined)
	}
	// Decoding only: no import costs, exports or thunks.
	m.importCost = make([]int64, m.numImports)
	g := &codeGen{m: m, o: &resolved{}}
	for i := 0; i < n; i++ {
		off := r.pos
		size, err := r.u32()
		if err != nil {
			return err
		}
		if int64(size) > int64(r.end-r.pos) {
			return r.malformed(off, "body %d: size %d past the end of the section", i, size)
		}
		end := r.pos + int(size)
		br := &reader{b: r.b, pos: r.pos, end: end, fn: int(m.numImports) + i}
		if err := br.checkLimit(off, uint64(size), MaxBodyBytes, "body size", "MaxBodyBytes"); err != nil {
			return err
		}
		numLocals, err := m.locals(br, m.numImports+uint32(i))
		if err != nil {
			return err
		}
		if err := g.analyze(br, uint32(numLocals)); err != nil {
			return err
		}
		r.pos = end
	}
	return nil
}

// locals reads the local declarations of function f and returns the number
// of params and locals.
func (m *module) locals(r *reader, f uint32) (uint64, error) {
	n := uint64(len(m.types[m.funcTypes[f]].Params))
	decls, err := r.count(2)
	if err != nil {
		return 0, err
	}
	for i := 0; i < decls; i++ {
		off := r.pos
		c, err := r.u32()
		if err != nil {
			return 0, err
		}
		n += uint64(c)
		if n > maxLocals {
			return 0, r.unsupported(off, "more than %d locals", maxLocals)
		}
		if _, err := r.valType(); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (m *module) typeSection(r *reader) error {
	off0 := r.pos
	n, err := r.count(1)
	if err != nil {
		return err
	}
	if err := r.checkLimit(off0, uint64(n), MaxTypes, "types", "MaxTypes"); err != nil {
		return err
	}
	m.typeBytes[0] = r.pos
	m.types = make([]FuncType, 0, n)
	for i := 0; i < n; i++ {
		off := r.pos
		form, err := r.byte()
		if err != nil {
			return err
		}
		if form != 0x60 {
			if gcTypeByte(form) {
				return r.unsupported(off, "type %d: composite type form %#x (GC)", i, form)
			}
			return r.malformed(off, "type %d: form %#x is not a function type", i, form)
		}
		var ft FuncType
		for k := 0; k < 2; k++ {
			coff := r.pos
			c, err := r.count(1)
			if err != nil {
				return err
			}
			if err := r.checkLimit(coff, uint64(c), MaxTypeValues, fmt.Sprintf("type %d: %s", i, [2]string{"params", "results"}[k]), "MaxTypeValues"); err != nil {
				return err
			}
			vs := make([]ValueType, c)
			for j := range vs {
				if vs[j], err = r.valType(); err != nil {
					return err
				}
			}
			if k == 0 {
				ft.Params = vs
			} else {
				ft.Results = vs
			}
		}
		m.types = append(m.types, ft)
	}
	m.typeBytes[1] = r.pos
	return nil
}

func (m *module) typeIndex(r *reader) (uint32, error) {
	return r.index(uint64(len(m.types)), "type", "types")
}

// limits reads table or memory limits and returns them.
func (m *module) limits(r *reader, memory bool) (min, max uint64, hasMax bool, err error) {
	off := r.pos
	flags, err := r.byte()
	if err != nil {
		return
	}
	switch {
	case flags == 0 || flags == 1:
	case memory && (flags == 2 || flags == 3):
		err = r.unsupported(off, "shared memory (threads)")
		return
	case flags >= 4 && flags <= 7:
		err = r.unsupported(off, "64-bit limits (memory64 / table64)")
		return
	default:
		err = r.malformed(off, "invalid limits flags %#x", flags)
		return
	}
	v, err := r.u32()
	if err != nil {
		return
	}
	min = uint64(v)
	if flags == 1 {
		if v, err = r.u32(); err != nil {
			return
		}
		max, hasMax = uint64(v), true
	}
	return
}

func (m *module) tableType(r *reader) error {
	off := r.pos
	if r.pos < r.end && r.b[r.pos] == 0x40 {
		return r.unsupported(off, "table with an initializer (typed function references)")
	}
	if _, err := r.refType(); err != nil {
		return err
	}
	min, _, _, err := m.limits(r, false)
	if err != nil {
		return err
	}
	m.numTables++
	if err := r.checkLimit(off, uint64(m.numTables), MaxTables, "tables", "MaxTables"); err != nil {
		return err
	}
	m.tableEntries += min
	if m.tableEntries > MaxTableEntries {
		return r.overLimit(off, ErrMemoryLimit, fmt.Sprintf("initial entries of tables 0-%d (%d bytes each)", m.numTables-1, TableEntryBytes),
			m.tableEntries, MaxTableEntries, "MaxTableEntries")
	}
	return nil
}

func (m *module) memoryType(r *reader) error {
	off := r.pos
	min, max, hasMax, err := m.limits(r, true)
	if err != nil {
		return err
	}
	m.numMemories++
	if m.numMemories > 1 {
		return r.unsupported(off, "more than one memory (multi-memory)")
	}
	m.memMin, m.memMax, m.hasMemMax = min, max, hasMax
	return nil
}

// globalType reads a global's type; with record, it is added to m.globals.
func (m *module) globalType(r *reader, record, imported bool) error {
	t, err := r.valType()
	if err != nil {
		return err
	}
	off := r.pos
	mut, err := r.byte()
	if err != nil {
		return err
	}
	if mut > 1 {
		return r.malformed(off, "invalid global mutability %#x", mut)
	}
	if record {
		m.globals = append(m.globals, Global{Type: t, Mutable: mut == 1, Imported: imported})
	}
	return nil
}

func (m *module) importSection(r *reader) error {
	off0 := r.pos
	n, err := r.count(4)
	if err != nil {
		return err
	}
	if err := r.checkLimit(off0, uint64(n), MaxImports, "imports", "MaxImports"); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		var im importEntry
		if im.module, err = r.name(); err != nil {
			return err
		}
		if im.name, err = r.name(); err != nil {
			return err
		}
		off := r.pos
		if im.kind, err = r.byte(); err != nil {
			return err
		}
		descStart := r.pos
		switch im.kind {
		case KindFunc:
			if im.typeIdx, err = m.typeIndex(r); err != nil {
				return err
			}
			m.funcTypes = append(m.funcTypes, im.typeIdx)
			m.numImports++
		case KindTable:
			if err = m.tableType(r); err != nil {
				return err
			}
		case KindMemory:
			if err = m.memoryType(r); err != nil {
				return err
			}
		case KindGlobal:
			if err = m.globalType(r, true, true); err != nil {
				return err
			}
			m.numGlobals++
			if err = r.checkLimit(off, uint64(m.numGlobals), MaxGlobals, "globals", "MaxGlobals"); err != nil {
				return err
			}
		case 4:
			return r.unsupported(off, "tag import %q %q (exception handling)", im.module, im.name)
		default:
			return r.malformed(off, "invalid import kind %#x", im.kind)
		}
		im.desc = r.b[descStart:r.pos]
		m.imports = append(m.imports, im)
	}
	return nil
}

func (m *module) functionSection(r *reader) error {
	off0 := r.pos
	n, err := r.count(1)
	if err != nil {
		return err
	}
	if err := r.checkLimit(off0, uint64(m.numImports)+uint64(n), MaxFunctions, "functions (imported and defined)", "MaxFunctions"); err != nil {
		return err
	}
	m.funcBytes[0] = r.pos
	for i := 0; i < n; i++ {
		t, err := m.typeIndex(r)
		if err != nil {
			return err
		}
		m.funcTypes = append(m.funcTypes, t)
	}
	m.funcBytes[1] = r.pos
	m.numDefined = uint32(n)
	return nil
}

func (m *module) tableSection(r *reader) error {
	n, err := r.count(3)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := m.tableType(r); err != nil {
			return err
		}
	}
	return nil
}

func (m *module) memorySection(r *reader) error {
	n, err := r.count(2)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := m.memoryType(r); err != nil {
			return err
		}
	}
	return nil
}

func (m *module) funcIndex(r *reader) (uint32, error) {
	return r.index(uint64(m.numFuncs()), "function", "functions")
}

// constExpr reads a constant expression up to its end, checking indices, and
// appends it with function indices remapped to w (if non-nil).
func (m *module) constExpr(r *reader, w *[]byte, maxGlobal uint32) error {
	start := r.pos
	for {
		off := r.pos
		op, err := r.byte()
		if err != nil {
			return err
		}
		switch op {
		case 0x0b: // end
			if w != nil {
				*w = append(*w, r.b[start:r.pos]...)
			}
			return nil
		case 0x41, 0x42, 0x43, 0x44:
			_, err = r.numConst(op)
		case 0x23: // global.get
			g, err2 := r.u32()
			if err2 != nil {
				return err2
			}
			if g >= maxGlobal {
				return r.malformed(off+1, "global index %d out of range (%d globals visible)", g, maxGlobal)
			}
		case 0xd0: // ref.null
			c, err2 := r.byte()
			if err2 != nil {
				return err2
			}
			if c != byte(FuncRef) && c != byte(ExternRef) {
				return r.unsupported(off+1, "ref.null heap type %#x", c)
			}
		case 0xd2: // ref.func
			f, err2 := m.funcIndex(r)
			if err2 != nil {
				return err2
			}
			if w != nil {
				*w = append(*w, r.b[start:off]...)
				*w = append(*w, 0xd2)
				*w = appendU32(*w, m.remapRef(f))
				start = r.pos
			}
		case 0xfd: // v128.const
			sub, err2 := r.u32()
			if err2 != nil {
				return err2
			}
			if sub != 12 {
				return r.malformed(off, "opcode 0xfd %d in a constant expression", sub)
			}
			err = r.skip(16)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e:
			return r.unsupported(off, "arithmetic opcode %#x in a constant expression (extended-const)", op)
		default:
			return r.malformed(off, "opcode %#x in a constant expression", op)
		}
		if err != nil {
			return err
		}
	}
}

// globalSection checks the global section, or with w != nil appends it
// rewritten (references remapped, the fuel global added) to *w.
func (m *module) globalSection(r *reader, w *[]byte) error {
	off0 := r.pos
	n, err := r.count(3)
	if err != nil {
		return err
	}
	if w == nil {
		if err := r.checkLimit(off0, uint64(m.numGlobals)+uint64(n), MaxGlobals, "globals (imported and defined)", "MaxGlobals"); err != nil {
			return err
		}
	}
	if w != nil {
		*w = appendU32(*w, uint32(n)+1)
	} else {
		m.numGlobalImports = m.numGlobals
	}
	for i := 0; i < n; i++ {
		start := r.pos
		if err := m.globalType(r, w == nil, false); err != nil {
			return err
		}
		if w != nil {
			*w = append(*w, r.b[start:r.pos]...)
		}
		if err := m.constExpr(r, w, m.numGlobalImports+uint32(i)); err != nil {
			return err
		}
	}
	if w != nil {
		*w = append(*w, fuelGlobalDecl...)
	} else {
		m.numGlobals += uint32(n)
	}
	return nil
}

// fuelGlobalDecl is (global (mut i64) (i64.const 0)).
var fuelGlobalDecl = []byte{byte(I64), 1, 0x42, 0, 0x0b}

func (m *module) exportSection(r *reader) error {
	off0 := r.pos
	n, err := r.count(3)
	if err != nil {
		return err
	}
	if err := r.checkLimit(off0, uint64(n), MaxExports, "exports", "MaxExports"); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		var ex exportEntry
		if ex.name, err = r.name(); err != nil {
			return err
		}
		off := r.pos
		if ex.kind, err = r.byte(); err != nil {
			return err
		}
		idxOff := r.pos
		if ex.idx, err = r.u32(); err != nil {
			return err
		}
		var limit uint32
		switch ex.kind {
		case KindFunc:
			limit = m.numFuncs()
		case KindTable:
			limit = m.numTables
		case KindMemory:
			limit = m.numMemories
		case KindGlobal:
			limit = m.numGlobals
		case 4:
			return r.unsupported(off, "tag export %q (exception handling)", ex.name)
		default:
			return r.malformed(off, "invalid export kind %#x", ex.kind)
		}
		if ex.idx >= limit {
			return r.malformed(idxOff, "export %q: index %d out of range (%d)", ex.name, ex.idx, limit)
		}
		m.exports = append(m.exports, ex)
	}
	return nil
}

func (m *module) startSection(r *reader) error {
	f, err := m.funcIndex(r)
	if err != nil {
		return err
	}
	m.hasStart, m.start = true, f
	return nil
}

// elementSection checks the element section, or with wp != nil appends its
// segments (without the count) rewritten to *wp.
func (m *module) elementSection(r *reader, wp *[]byte) error {
	off0 := r.pos
	n, err := r.count(1)
	if err != nil {
		return err
	}
	if err := r.checkLimit(off0, uint64(n), MaxElemSegments, "element segments", "MaxElemSegments"); err != nil {
		return err
	}
	var entries uint64
	emit := func(from int) {
		if wp != nil {
			*wp = append(*wp, r.b[from:r.pos]...)
		}
	}
	for i := 0; i < n; i++ {
		off := r.pos
		flags, err := r.u32()
		if err != nil {
			return err
		}
		if flags > 7 {
			return r.malformed(off, "element segment %d: invalid flags %d", i, flags)
		}
		emit(off)
		if flags&3 == 2 { // explicit table index
			from := r.pos
			if _, err := r.u32(); err != nil {
				return err
			}
			emit(from)
		}
		if flags&1 == 0 { // active: offset expression
			if err := m.constExpr(r, wp, m.numGlobals); err != nil {
				return err
			}
		}
		if flags&3 != 0 { // element kind or reference type
			from := r.pos
			if flags&4 == 0 {
				k, err := r.byte()
				if err != nil {
					return err
				}
				if k != 0 {
					return r.malformed(from, "element segment %d: invalid element kind %#x", i, k)
				}
			} else if _, err := r.refType(); err != nil {
				return err
			}
			emit(from)
		}
		coff := r.pos
		cnt, err := r.count(1)
		if err != nil {
			return err
		}
		entries += uint64(cnt)
		if err := r.checkLimit(coff, entries, MaxElemEntries, "entries of element segments", "MaxElemEntries"); err != nil {
			return err
		}
		if wp != nil {
			*wp = appendU32(*wp, uint32(cnt))
		}
		for j := 0; j < cnt; j++ {
			if flags&4 == 0 {
				f, err := m.funcIndex(r)
				if err != nil {
					return err
				}
				if wp != nil {
					*wp = appendU32(*wp, m.remapRef(f))
				}
			} else if err := m.constExpr(r, wp, m.numGlobals); err != nil {
				return err
			}
		}
	}
	m.elemCount = n
	m.elemEntries = entries
	return nil
}

// elementSectionOut is the rewritten element section plus, if code takes
// ref.func of exported functions, a declarative segment naming them: exports
// now name the wrappers, so the export no longer declares the original.
func (m *module) elementSectionOut() []byte {
	var decl []uint32
	for f := range m.declare {
		decl = append(decl, f)
	}
	slices.Sort(decl)
	n := m.elemCount
	if len(decl) > 0 {
		n++
	}
	w := appendU32(nil, uint32(n))
	w = append(w, m.elemOut...)
	if len(decl) > 0 {
		w = append(w, 3, 0) // declarative, elemkind funcref
		w = appendU32(w, uint32(len(decl)))
		for _, f := range decl {
			w = appendU32(w, f)
		}
	}
	return w
}

// dataSection checks the data section, or with wp != nil appends it rewritten
// to *wp.
func (m *module) dataSection(r *reader, wp *[]byte) error {
	off0 := r.pos
	n, err := r.count(1)
	if err != nil {
		return err
	}
	if err := r.checkLimit(off0, uint64(n), MaxDataSegments, "data segments", "MaxDataSegments"); err != nil {
		return err
	}
	if wp != nil {
		*wp = appendU32(*wp, uint32(n))
	}
	for i := 0; i < n; i++ {
		off := r.pos
		flags, err := r.u32()
		if err != nil {
			return err
		}
		if wp != nil {
			*wp = append(*wp, r.b[off:r.pos]...)
		}
		switch flags {
		case 0:
		case 1:
		case 2:
			memOff := r.pos
			mem, err := r.u32()
			if err != nil {
				return err
			}
			if mem != 0 {
				return r.unsupported(memOff, "data segment %d: memory index %d (multi-memory)", i, mem)
			}
			if wp != nil {
				*wp = append(*wp, r.b[memOff:r.pos]...)
			}
		default:
			return r.malformed(off, "data segment %d: invalid flags %d", i, flags)
		}
		if flags != 1 {
			if err := m.constExpr(r, wp, m.numGlobals); err != nil {
				return err
			}
		}
		from := r.pos
		size, err := r.u32()
		if err != nil {
			return err
		}
		if err := r.skip(int(size)); err != nil {
			return err
		}
		if wp != nil {
			*wp = append(*wp, r.b[from:r.pos]...)
		}
	}
	return nil
}

// nameSection rewrites the "name" custom section: function indices in the
// function (1) and local (2) names move with the functions; module (0), type,
// table, memory, global, element and data names (4-9) stay correct and are
// kept; label (3) names and anything else are dropped. Entries naming a
// function that does not exist are dropped.
//
// Without emit it only checks the structure and the UTF-8 of the names it
// reads (module, function and local names), as wazero does.
func (m *module) nameSection(r *reader, emit bool) ([]byte, error) {
	w := appendName(nil, "name")
	var entries uint64
	for !r.done() {
		off := r.pos
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		start := r.pos
		if err := r.skip(int(size)); err != nil {
			return nil, err
		}
		sub := &reader{b: r.b, pos: start, end: start + int(size), what: r.what, fn: -1}
		switch id {
		case 0:
			if _, err := sub.name(); err != nil {
				return nil, err
			}
			if !sub.done() {
				return nil, sub.malformed(sub.pos, "name subsection 0: %d unexpected bytes", sub.end-sub.pos)
			}
			w = append(w, r.b[off:r.pos]...)
			continue
		case 4, 5, 6, 7, 8, 9:
			w = append(w, r.b[off:r.pos]...)
			continue
		case 1, 2:
		default:
			continue
		}
		var body []byte
		noff := sub.pos
		n, err := sub.count(2)
		if err != nil {
			return nil, err
		}
		entries += uint64(n)
		if err := sub.checkLimit(noff, entries, MaxNameEntries, "function and local names", "MaxNameEntries"); err != nil {
			return nil, err
		}
		var kept uint32
		for i := 0; i < n; i++ {
			f, err := sub.u32()
			if err != nil {
				return nil, err
			}
			mid := sub.pos
			if id == 1 {
				_, err = sub.name()
			} else {
				var k int
				k, err = sub.nameMap()
				entries += uint64(k)
				if err == nil {
					err = sub.checkLimit(mid, entries, MaxNameEntries, "function and local names", "MaxNameEntries")
				}
			}
			if err != nil {
				return nil, err
			}
			if !emit || f >= m.numFuncs() {
				continue
			}
			kept++
			body = appendU32(body, m.remap(f))
			body = append(body, sub.b[mid:sub.pos]...)
		}
		if !sub.done() {
			return nil, sub.malformed(sub.pos, "name subsection %d: %d unexpected bytes", id, sub.end-sub.pos)
		}
		content := appendU32(nil, kept)
		content = append(content, body...)
		w = append(w, id)
		w = appendU32(w, uint32(len(content)))
		w = append(w, content...)
	}
	return w, nil
}

// nameMap skips vec(idx name) and returns its length.
func (r *reader) nameMap() (int, error) {
	n, err := r.count(2)
	if err != nil {
		return 0, err
	}
	for i := 0; i < n; i++ {
		if _, err := r.u32(); err != nil {
			return 0, err
		}
		if _, err := r.name(); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// instrument assembles the output module.
func (m *module) instrument(o resolved) ([]byte, error) {
	m.o = &o
	addedExport := false
	if m.hasStart && !o.allowStart {
		if o.StartExport == "" {
			return nil, (&reader{fn: -1, what: "start section"}).unsupported(-1,
				"start function %d (start sections are refused)", m.start)
		}
		if !validUTF8(o.StartExport) {
			return nil, &Error{Where: "start section", Offset: -1, Err: ErrOptions,
				Detail: fmt.Sprintf("StartExport %q is not valid UTF-8", o.StartExport)}
		}
		for _, ex := range m.exports {
			if ex.name == o.StartExport {
				return nil, (&reader{fn: -1, what: "export section"}).unsupported(-1,
					"the module exports %q, the name reserved for its start function", o.StartExport)
			}
		}
		// The start function becomes an export (wrapped like the others) and
		// the start section goes.
		m.exports = append(m.exports, exportEntry{name: o.StartExport, kind: KindFunc, idx: m.start})
		for i := range m.sections {
			if m.sections[i].id == secStart {
				m.sections[i].drop = true
			}
		}
		addedExport = true
	}
	if p := o.GlobalExportPrefix; p != "" {
		if !validUTF8(p) {
			return nil, &Error{Where: "global section", Offset: -1, Err: ErrOptions,
				Detail: fmt.Sprintf("GlobalExportPrefix %q is not valid UTF-8", p)}
		}
		for _, ex := range m.exports {
			if strings.HasPrefix(ex.name, p) {
				return nil, (&reader{fn: -1, what: "export section"}).unsupported(-1,
					"the module exports %q, a name reserved for its globals (prefix %q)", ex.name, p)
			}
		}
		for i, g := range m.globals {
			if g.Mutable && !g.Imported {
				m.exports = append(m.exports, exportEntry{name: p + strconv.Itoa(i), kind: KindGlobal, idx: uint32(i)})
				addedExport = true
			}
		}
	}
	// Imports: refuse reserved modules, apply Rename, compute call costs.
	m.importCost = make([]int64, m.numImports)
	renamed := make([]string, len(m.imports))
	fi := 0
	for i, im := range m.imports {
		if im.module == Module || im.module == KernelModule {
			return nil, (&reader{fn: -1, what: "import section"}).unsupported(-1,
				"import %q %q from a reserved module", im.module, im.name)
		}
		renamed[i] = im.module
		if im.kind != KindFunc {
			continue
		}
		if o.Rename != nil {
			if to := o.Rename(im.module, im.name); to != "" {
				if to == Module || !validUTF8(to) {
					return nil, &Error{Where: "import section", Offset: -1, Err: ErrOptions,
						Detail: fmt.Sprintf("Rename(%q, %q) = %q is not allowed", im.module, im.name, to)}
				}
				renamed[i] = to
			}
		}
		if o.ImportCost != nil {
			c := o.ImportCost(im.module, im.name)
			if c < 0 || c > MaxImportCost {
				return nil, &Error{Where: "import section", Offset: -1, Err: ErrOptions,
					Detail: fmt.Sprintf("ImportCost(%q, %q) = %d out of range [0, %d]", im.module, im.name, c, int64(MaxImportCost))}
			}
			m.importCost[fi] = c
		}
		fi++
	}
	// One wrapper per exported function, in order of first export.
	m.wrapperOf = map[uint32]uint32{}
	for _, ex := range m.exports {
		if ex.kind != KindFunc {
			continue
		}
		if _, ok := m.wrapperOf[ex.idx]; !ok {
			m.wrapperOf[ex.idx] = uint32(len(m.wrapped))
			m.wrapped = append(m.wrapped, ex.idx)
		}
	}
	m.thunkOf = map[uint32]uint32{}
	m.declare = map[uint32]bool{}

	// Rewrite code, globals, elements and data first: they decide which
	// thunks exist, and the function, element and code sections list them.
	var bodies []byte
	if m.code >= 0 {
		s := &m.sections[m.code]
		var err error
		bodies, err = m.codeSection(&reader{b: m.wasm, pos: s.start, end: s.end, what: "code section", fn: -1})
		if err != nil {
			return nil, err
		}
	}
	for i := range m.sections {
		s := &m.sections[i]
		r := &reader{b: m.wasm, pos: s.start, end: s.end, what: sectionNames[s.id], fn: -1}
		var err error
		switch s.id {
		case secGlobal:
			w := make([]byte, 0, s.end-s.start+16)
			err = m.globalSection(r, &w)
			s.out = w
		case secElement:
			m.elemOut = make([]byte, 0, s.end-s.start+16)
			err = m.elementSection(r, &m.elemOut)
		case secData:
			w := make([]byte, 0, s.end-s.start+16)
			err = m.dataSection(r, &w)
			s.out = w
		}
		if err != nil {
			return nil, err
		}
	}
	var code []byte
	if m.code >= 0 || len(m.wrapped)+len(m.thunked) > 0 {
		code = m.codeSectionOut(bodies)
	}

	// The other rewritten sections.
	for i := range m.sections {
		s := &m.sections[i]
		r := &reader{b: m.wasm, pos: s.start, end: s.end, what: sectionNames[s.id], fn: -1}
		switch s.id {
		case secCustom:
			if s.name == "name" && !s.drop {
				r.what = "name section"
				if _, err := r.name(); err != nil {
					return nil, err
				}
				out, err := m.nameSection(r, true)
				if err != nil {
					return nil, err
				}
				s.out = out
			}
		case secType:
			s.out = m.typeSectionOut()
		case secImport:
			s.out = m.importSectionOut(renamed)
		case secFunction:
			s.out = m.functionSectionOut()
		case secExport:
			s.out = m.exportSectionOut()
		case secStart:
			s.out = appendU32(nil, m.remap(m.start))
		case secElement:
			s.out = m.elementSectionOut()
		case secCode:
			s.out = code
		}
	}

	// Sections the original lacks but the output needs, by rank.
	type synth struct {
		id  byte
		out []byte
	}
	var missing []synth
	have := map[byte]bool{}
	for _, s := range m.sections {
		have[s.id] = true
	}
	added := len(m.wrapped) + len(m.thunked)
	if !have[secType] {
		missing = append(missing, synth{secType, m.typeSectionOut()})
	}
	if !have[secImport] {
		missing = append(missing, synth{secImport, m.importSectionOut(renamed)})
	}
	if !have[secFunction] && added > 0 {
		missing = append(missing, synth{secFunction, m.functionSectionOut()})
	}
	if !have[secGlobal] {
		missing = append(missing, synth{secGlobal, append([]byte{1}, fuelGlobalDecl...)})
	}
	if !have[secExport] && addedExport {
		missing = append(missing, synth{secExport, m.exportSectionOut()})
	}
	if !have[secElement] && len(m.declare) > 0 {
		missing = append(missing, synth{secElement, m.elementSectionOut()})
	}
	if !have[secCode] && added > 0 {
		missing = append(missing, synth{secCode, code})
	}

	size := len(m.wasm) + 64
	for _, s := range m.sections {
		if s.out != nil {
			size += len(s.out) - (s.end - s.start)
		}
	}
	for _, s := range missing {
		size += len(s.out) + 6
	}
	out := make([]byte, 0, size)
	out = append(out, m.wasm[:8]...)
	emitMissing := func(before int) {
		for len(missing) > 0 && rank[missing[0].id] < before {
			out = appendSection(out, missing[0].id, missing[0].out)
			missing = missing[1:]
		}
	}
	for _, s := range m.sections {
		if s.id != secCustom {
			emitMissing(rank[s.id])
		}
		switch {
		case s.drop:
		case s.out != nil:
			out = appendSection(out, s.id, s.out)
		default:
			out = appendSection(out, s.id, m.wasm[s.start:s.end])
		}
	}
	emitMissing(1 << 30)
	return out, nil
}

func validUTF8(s string) bool { return utf8.ValidString(s) }

// The three added function types: refuel (i64)->(i64), settle (i64)->(),
// oom ()->().
var addedTypes = []byte{
	0x60, 1, byte(I64), 1, byte(I64),
	0x60, 1, byte(I64), 0,
	0x60, 0, 0,
}

func (m *module) typeSectionOut() []byte {
	w := appendU32(nil, uint32(len(m.types))+3)
	w = append(w, m.wasm[m.typeBytes[0]:m.typeBytes[1]]...)
	return append(w, addedTypes...)
}

func (m *module) importSectionOut(renamed []string) []byte {
	w := appendU32(nil, uint32(len(m.imports))+3)
	for i, im := range m.imports {
		w = appendName(w, renamed[i])
		w = appendName(w, im.name)
		w = append(w, im.kind)
		w = append(w, im.desc...)
	}
	t := uint32(len(m.types))
	for i, name := range []string{RefuelName, SettleName, OOMName} {
		w = appendName(w, Module)
		w = appendName(w, name)
		w = append(w, KindFunc)
		w = appendU32(w, t+uint32(i))
	}
	return w
}

func (m *module) functionSectionOut() []byte {
	w := appendU32(nil, m.numDefined+uint32(len(m.wrapped)+len(m.thunked)))
	if m.funcBytes[1] > 0 {
		w = append(w, m.wasm[m.funcBytes[0]:m.funcBytes[1]]...)
	}
	for _, f := range m.wrapped {
		w = appendU32(w, m.funcTypes[f])
	}
	for _, f := range m.thunked {
		w = appendU32(w, m.funcTypes[f])
	}
	return w
}

func (m *module) exportSectionOut() []byte {
	w := appendU32(nil, uint32(len(m.exports)))
	for _, ex := range m.exports {
		w = appendName(w, ex.name)
		w = append(w, ex.kind)
		if ex.kind == KindFunc {
			w = appendU32(w, m.wrapperIdx(m.wrapperOf[ex.idx]))
		} else {
			w = appendU32(w, ex.idx)
		}
	}
	return w
}
