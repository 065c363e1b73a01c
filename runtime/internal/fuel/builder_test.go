package fuel

// A tiny wasm module builder for tests: enough to write small modules in Go
// without a text-format assembler.

// Opcodes used by tests.
const (
	opUnreachable  = 0x00
	opNop          = 0x01
	opBlock        = 0x02
	opLoop         = 0x03
	opIf           = 0x04
	opElse         = 0x05
	opEnd          = 0x0b
	opBr           = 0x0c
	opBrIf         = 0x0d
	opBrTable      = 0x0e
	opReturn       = 0x0f
	opCall         = 0x10
	opCallIndirect = 0x11
	opDrop         = 0x1a
	opSelect       = 0x1b
	opLocalGet     = 0x20
	opLocalSet     = 0x21
	opLocalTee     = 0x22
	opGlobalGet    = 0x23
	opGlobalSet    = 0x24
	opI32Load      = 0x28
	opI32Store     = 0x36
	opMemorySize   = 0x3f
	opMemoryGrow   = 0x40
	opI32Const     = 0x41
	opI64Const     = 0x42
	opI32Eqz       = 0x45
	opI32Eq        = 0x46
	opI32Ne        = 0x47
	opI32LtU       = 0x49
	opI32GeU       = 0x4f
	opI32Add       = 0x6a
	opI32Sub       = 0x6b
	opI32Mul       = 0x6c
	opI32And       = 0x71
	opI32Xor       = 0x73
	opI32Shl       = 0x74
	opI32ShrU      = 0x76
	opI64Add       = 0x7c
	opRefFunc      = 0xd2
	opMisc         = 0xfc
	blockEmpty     = 0x40
)

type wfunc struct {
	typ    uint32
	locals []ValueType
	body   []byte
}

type wimport struct {
	module, name string
	kind         byte
	desc         []byte
}

type wexport struct {
	name string
	kind byte
	idx  uint32
}

type wcustom struct {
	name    string
	payload []byte
}

type wmod struct {
	types     []FuncType
	imports   []wimport
	numFImp   uint32
	numGImp   uint32
	funcs     []wfunc
	tables    [][]byte // raw table types
	mems      [][]byte // raw memory types
	globals   [][]byte // raw: type, mut, init expr
	exports   []wexport
	start     *uint32
	elems     [][]byte // raw segments
	datas     [][]byte // raw segments
	dataCount bool
	customs   []wcustom // appended at the end
	// raw sections inserted verbatim before the type section (for malformed tests)
	extra [][]byte
}

func ft(params, results []ValueType) FuncType { return FuncType{Params: params, Results: results} }

func vt(ts ...ValueType) []ValueType { return ts }

func (m *wmod) typ(t FuncType) uint32 {
	for i, u := range m.types {
		if u.Equal(t) {
			return uint32(i)
		}
	}
	m.types = append(m.types, t)
	return uint32(len(m.types) - 1)
}

// importFunc must be called before fn.
func (m *wmod) importFunc(module, name string, t FuncType) uint32 {
	m.imports = append(m.imports, wimport{module, name, 0, appendU32(nil, m.typ(t))})
	m.numFImp++
	return m.numFImp - 1
}

func (m *wmod) importMemory(module, name string, min uint32) {
	m.imports = append(m.imports, wimport{module, name, 2, appendU32([]byte{0}, min)})
}

func (m *wmod) importGlobal(module, name string, t ValueType, mut bool) uint32 {
	mb := byte(0)
	if mut {
		mb = 1
	}
	m.imports = append(m.imports, wimport{module, name, 3, []byte{byte(t), mb}})
	m.numGImp++
	return m.numGImp - 1
}

// fn adds a function whose body is the concatenated code plus a final end.
func (m *wmod) fn(t FuncType, locals []ValueType, code ...any) uint32 {
	m.funcs = append(m.funcs, wfunc{typ: m.typ(t), locals: locals, body: append(asm(code...), opEnd)})
	return m.numFImp + uint32(len(m.funcs)) - 1
}

// rawFn adds a function with a raw body (locals vector and instructions,
// without the size).
func (m *wmod) rawFn(t FuncType, body []byte) uint32 {
	m.funcs = append(m.funcs, wfunc{typ: m.typ(t), locals: nil, body: body})
	m.funcs[len(m.funcs)-1].locals = []ValueType{0xff} // marker: raw
	return m.numFImp + uint32(len(m.funcs)) - 1
}

func (m *wmod) export(name string, kind byte, idx uint32) {
	m.exports = append(m.exports, wexport{name, kind, idx})
}

func (m *wmod) exportFunc(name string, idx uint32) { m.export(name, KindFunc, idx) }

func (m *wmod) memory(min, max uint32) {
	if max == 0 {
		m.mems = append(m.mems, appendU32([]byte{0}, min))
		return
	}
	m.mems = append(m.mems, appendU32(appendU32([]byte{1}, min), max))
}

func (m *wmod) table(min uint32) {
	m.tables = append(m.tables, appendU32([]byte{byte(FuncRef), 0}, min))
}

func (m *wmod) global(t ValueType, mut bool, init ...any) uint32 {
	mb := byte(0)
	if mut {
		mb = 1
	}
	m.globals = append(m.globals, append([]byte{byte(t), mb}, append(asm(init...), opEnd)...))
	return m.numGImp + uint32(len(m.globals)) - 1
}

// elemFuncs adds an active segment for table 0 at offset off (flags 0).
func (m *wmod) elemFuncs(off int32, funcs ...uint32) {
	b := append([]byte{0}, asm(i32c(off), opEnd)...)
	b = appendU32(b, uint32(len(funcs)))
	for _, f := range funcs {
		b = appendU32(b, f)
	}
	m.elems = append(m.elems, b)
}

func (m *wmod) data(off int32, payload []byte) {
	b := append([]byte{0}, asm(i32c(off), opEnd)...)
	b = appendU32(b, uint32(len(payload)))
	m.datas = append(m.datas, append(b, payload...))
}

func vec(items [][]byte) []byte {
	b := appendU32(nil, uint32(len(items)))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

func (m *wmod) bytes() []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, x := range m.extra {
		out = append(out, x...)
	}
	if len(m.types) > 0 {
		var items [][]byte
		for _, t := range m.types {
			b := []byte{0x60}
			b = appendU32(b, uint32(len(t.Params)))
			for _, p := range t.Params {
				b = append(b, byte(p))
			}
			b = appendU32(b, uint32(len(t.Results)))
			for _, p := range t.Results {
				b = append(b, byte(p))
			}
			items = append(items, b)
		}
		out = appendSection(out, secType, vec(items))
	}
	if len(m.imports) > 0 {
		var items [][]byte
		for _, im := range m.imports {
			b := appendName(nil, im.module)
			b = appendName(b, im.name)
			b = append(b, im.kind)
			items = append(items, append(b, im.desc...))
		}
		out = appendSection(out, secImport, vec(items))
	}
	if len(m.funcs) > 0 {
		var items [][]byte
		for _, f := range m.funcs {
			items = append(items, appendU32(nil, f.typ))
		}
		out = appendSection(out, secFunction, vec(items))
	}
	if len(m.tables) > 0 {
		out = appendSection(out, secTable, vec(m.tables))
	}
	if len(m.mems) > 0 {
		out = appendSection(out, secMemory, vec(m.mems))
	}
	if len(m.globals) > 0 {
		out = appendSection(out, secGlobal, vec(m.globals))
	}
	if len(m.exports) > 0 {
		var items [][]byte
		for _, e := range m.exports {
			b := appendName(nil, e.name)
			b = append(b, e.kind)
			items = append(items, appendU32(b, e.idx))
		}
		out = appendSection(out, secExport, vec(items))
	}
	if m.start != nil {
		out = appendSection(out, secStart, appendU32(nil, *m.start))
	}
	if len(m.elems) > 0 {
		out = appendSection(out, secElement, vec(m.elems))
	}
	if m.dataCount {
		out = appendSection(out, secDataCount, appendU32(nil, uint32(len(m.datas))))
	}
	if len(m.funcs) > 0 {
		var items [][]byte
		for _, f := range m.funcs {
			var b []byte
			if len(f.locals) == 1 && f.locals[0] == 0xff {
				b = f.body
			} else {
				b = appendU32(nil, uint32(len(f.locals)))
				for _, l := range f.locals {
					b = append(b, 1, byte(l))
				}
				b = append(b, f.body...)
			}
			items = append(items, append(appendU32(nil, uint32(len(b))), b...))
		}
		out = appendSection(out, secCode, vec(items))
	}
	if len(m.datas) > 0 {
		out = appendSection(out, secData, vec(m.datas))
	}
	for _, c := range m.customs {
		out = appendSection(out, secCustom, append(appendName(nil, c.name), c.payload...))
	}
	return out
}

// asm flattens bytes, ints (as single bytes) and byte slices.
func asm(code ...any) []byte {
	var b []byte
	for _, c := range code {
		switch v := c.(type) {
		case byte:
			b = append(b, v)
		case int:
			if v < 0 || v > 255 {
				panic("asm: int out of byte range")
			}
			b = append(b, byte(v))
		case ValueType:
			b = append(b, byte(v))
		case []byte:
			b = append(b, v...)
		case [][]byte:
			for _, x := range v {
				b = append(b, x...)
			}
		default:
			panic("asm: unsupported item")
		}
	}
	return b
}

func i32c(v int32) []byte  { return appendS64([]byte{opI32Const}, int64(v)) }
func i64c(v int64) []byte  { return appendS64([]byte{opI64Const}, v) }
func lget(i uint32) []byte { return appendU32([]byte{opLocalGet}, i) }
func lset(i uint32) []byte { return appendU32([]byte{opLocalSet}, i) }
func ltee(i uint32) []byte { return appendU32([]byte{opLocalTee}, i) }
func gget(i uint32) []byte { return appendU32([]byte{opGlobalGet}, i) }
func gset(i uint32) []byte { return appendU32([]byte{opGlobalSet}, i) }
func call(f uint32) []byte { return appendU32([]byte{opCall}, f) }
func br(l uint32) []byte   { return appendU32([]byte{opBr}, l) }
func brIf(l uint32) []byte { return appendU32([]byte{opBrIf}, l) }
func refFunc(f uint32) []byte {
	return appendU32([]byte{opRefFunc}, f)
}
func callIndirect(typ uint32) []byte { return appendU32(appendU32([]byte{opCallIndirect}, typ), 0) }
func brTable(def uint32, labels ...uint32) []byte {
	b := appendU32([]byte{opBrTable}, uint32(len(labels)))
	for _, l := range labels {
		b = appendU32(b, l)
	}
	return appendU32(b, def)
}
func misc(sub uint32, imm ...byte) []byte { return append(appendU32([]byte{opMisc}, sub), imm...) }

var (
	memoryFill = misc(11, 0)
	memoryCopy = misc(10, 0, 0)
)

func memarg(op byte, align, offset uint32) []byte {
	return appendU32(appendU32([]byte{op}, align), offset)
}
