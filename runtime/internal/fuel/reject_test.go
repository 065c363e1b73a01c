package fuel

import (
	"errors"
	"strings"
	"testing"
)

func build(f func(m *wmod)) []byte {
	m := &wmod{}
	f(m)
	return m.bytes()
}

// TestIndicesAreValidatedInTheOriginal: each case is a module that is invalid
// only because one index is one past the end, where the rewrite would make
// that index valid (it would name the fuel global, the scratch locals, an
// added import or type, or a wrapper). Instrument must refuse it with
// ErrMalformed, and accept the same module with the index one lower.
func TestIndicesAreValidatedInTheOriginal(t *testing.T) {
	cases := []struct {
		name string
		mod  func(m *wmod, idx uint32) // idx: the index under test
		bad  uint32                    // the out-of-range index; bad-1 is valid
		why  string                    // what the error must mention
	}{
		{"global.set past the globals (would reset fuel)", func(m *wmod, i uint32) {
			m.global(I64, true, i64c(0))
			m.exportFunc("f", m.fn(ft(nil, nil), nil, i64c(1<<40), gset(i)))
		}, 1, "global index 1"},
		{"global.get past the globals", func(m *wmod, i uint32) {
			m.importGlobal("env", "g", I64, true)
			m.exportFunc("f", m.fn(ft(nil, vt(I64)), nil, gget(i)))
		}, 1, "global index 1"},
		{"global.get in a global initializer", func(m *wmod, i uint32) {
			m.importGlobal("env", "g", I64, false)
			m.global(I64, false, gget(i))
		}, 1, "global index 1"},
		{"global.get in a data offset", func(m *wmod, i uint32) {
			m.importGlobal("env", "g", I32, false)
			m.memory(1, 0)
			m.datas = append(m.datas, asm(0, gget(i), opEnd, 0))
		}, 1, "global index 1"},
		{"local.get of the added fuel local", func(m *wmod, i uint32) {
			m.exportFunc("f", m.fn(ft(vt(I32), vt(I64)), vt(I64), lget(i)))
		}, 2, "local index 2"},
		{"local.set of the added scratch local", func(m *wmod, i uint32) {
			m.memory(1, 0)
			m.exportFunc("f", m.fn(ft(vt(I32), nil), nil, i32c(1), opMemoryGrow, 0, lset(i)))
		}, 1, "local index 1"},
		{"local.tee past the locals", func(m *wmod, i uint32) {
			m.exportFunc("f", m.fn(ft(nil, vt(I64)), vt(I64, I64), i64c(1), ltee(i)))
		}, 2, "local index 2"},
		{"call past the functions (would call a wrapper)", func(m *wmod, i uint32) {
			f := m.fn(ft(nil, nil), nil)
			m.exportFunc("f", f)
			m.fn(ft(nil, nil), nil, call(i))
		}, 2, "function index 2"},
		{"call of an import-sized index", func(m *wmod, i uint32) {
			m.importFunc("env", "h", ft(nil, nil))
			m.fn(ft(nil, nil), nil, call(i))
		}, 2, "function index 2"},
		{"ref.func in code past the functions", func(m *wmod, i uint32) {
			m.elems = append(m.elems, asm(3, 0, 1, 0)) // declare function 0
			m.fn(ft(nil, vt(FuncRef)), nil, refFunc(i))
		}, 1, "function index 1"},
		{"ref.func in a global initializer", func(m *wmod, i uint32) {
			m.fn(ft(nil, nil), nil)
			m.global(FuncRef, false, refFunc(i))
		}, 1, "function index 1"},
		{"element segment function index", func(m *wmod, i uint32) {
			m.fn(ft(nil, nil), nil)
			m.table(1)
			m.elemFuncs(0, i)
		}, 1, "function index 1"},
		{"element segment expression", func(m *wmod, i uint32) {
			m.fn(ft(nil, nil), nil)
			m.elems = append(m.elems, asm(7, FuncRef, 1, refFunc(i), opEnd))
		}, 1, "function index 1"},
		{"export past the functions", func(m *wmod, i uint32) {
			m.fn(ft(nil, nil), nil)
			m.exportFunc("f", i)
		}, 1, "index 1 out of range"},
		{"export past the globals", func(m *wmod, i uint32) {
			m.global(I32, false, i32c(0))
			m.export("g", KindGlobal, i)
		}, 1, "index 1 out of range"},
		{"call_indirect type past the types (would be refuel's type)", func(m *wmod, i uint32) {
			m.table(1)
			m.fn(ft(nil, nil), nil, i32c(0), callIndirect(i))
		}, 1, "type index 1"},
		{"block type past the types", func(m *wmod, i uint32) {
			m.fn(ft(nil, nil), nil, opBlock, byte(i), opEnd)
		}, 1, "block type index 1"},
		{"function type past the types", func(m *wmod, i uint32) {
			m.fn(ft(nil, nil), nil)
			m.funcs[0].typ = i
		}, 1, "type index 1"},
		{"import type past the types", func(m *wmod, i uint32) {
			m.typ(ft(nil, nil))
			m.imports = append(m.imports, wimport{"env", "h", 0, appendU32(nil, i)})
		}, 1, "type index 1"},
		{"branch depth past the labels", func(m *wmod, i uint32) {
			m.fn(ft(nil, nil), nil, opBlock, blockEmpty, br(i), opEnd)
		}, 2, "branch depth 2"},
		{"br_table depth past the labels", func(m *wmod, i uint32) {
			m.fn(ft(nil, nil), nil, i32c(0), brTable(0, i))
		}, 1, "branch depth 1"},
		{"elem.drop past the segments (a declarative segment may be added)", func(m *wmod, i uint32) {
			m.elems = append(m.elems, asm(3, 0, 1, 0)) // declares function 0
			m.exportFunc("f", m.fn(ft(nil, vt(FuncRef)), nil, misc(13, byte(i)), refFunc(0)))
		}, 1, "element segment index 1"},
		{"table.init past the segments", func(m *wmod, i uint32) {
			m.table(1)
			m.elems = append(m.elems, asm(1, 0, 0))
			m.exportFunc("f", m.fn(ft(nil, vt(FuncRef)), nil, i32c(0), i32c(0), i32c(0), misc(12, byte(i), 0), refFunc(0)))
		}, 1, "element segment index 1"},
		{"table index past the tables", func(m *wmod, i uint32) {
			m.table(1)
			m.fn(ft(nil, nil), nil, i32c(0), appendU32([]byte{opCallIndirect, 0}, i))
		}, 1, "table index 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := build(func(m *wmod) { c.mod(m, c.bad) })
			_, _, err := Instrument(bad, Options{})
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.why) {
				t.Errorf("Instrument = %v, want ErrMalformed mentioning %q", err, c.why)
			}
			if compileErr(bad) == nil {
				t.Errorf("wazero accepts the bad module: the case tests nothing")
			}
			good := build(func(m *wmod) { c.mod(m, c.bad-1) })
			out, _, err := Instrument(good, Options{})
			if err != nil {
				t.Fatalf("the valid variant: %v", err)
			}
			if compileErr(good) == nil {
				if err := compileErr(out); err != nil {
					t.Errorf("the valid variant does not compile after instrumenting: %v", err)
				}
			} else {
				t.Errorf("wazero refuses the valid variant: the case is wrong")
			}
		})
	}
}

func TestRefusedFeatures(t *testing.T) {
	fn := func(code ...any) []byte {
		return build(func(m *wmod) { m.fn(ft(nil, nil), nil, code...) })
	}
	withSection := func(id byte, content []byte) []byte {
		return build(func(m *wmod) { m.extra = append(m.extra, appendSection(nil, id, content)) })
	}
	many := func(n uint32) []byte {
		return build(func(m *wmod) {
			m.rawFn(ft(nil, nil), asm(1, appendU32(nil, n), I32, opEnd))
		})
	}
	cases := []struct {
		name string
		wasm []byte
		why  string
	}{
		{"start section", build(func(m *wmod) {
			f := m.fn(ft(nil, nil), nil)
			m.start = &f
		}), "start"},
		{"return_call", fn(appendU32([]byte{0x12}, 0)), "tail call"},
		{"return_call_indirect", fn(0x13, 0, 0), "tail call"},
		{"call_ref", fn(0x14, 0), "typed function references"},
		{"atomics", fn(i32c(0), 0xfe, 0x10, 2, 0, opDrop), "0xfe 0x10"},
		{"try", fn(0x06, blockEmpty, opEnd), "exception handling"},
		{"throw", fn(0x08, 0), "exception handling"},
		{"try_table", fn(0x1f, blockEmpty, 0, opEnd), "exception handling"},
		{"tag section", withSection(secTag, []byte{0}), "tag section"},
		{"unknown section id", withSection(14, []byte{0}), "unknown section id 14"},
		{"unknown opcode", fn(0xc5), "unknown opcode 0xc5"},
		{"unknown 0xfc opcode", fn(misc(18)), "0xfc 18"},
		{"unassigned SIMD opcode", fn(appendU32([]byte{0xfd}, 0x9a)), "0xfd 154"},
		{"relaxed SIMD", fn(appendU32([]byte{0xfd}, 0x100)), "0xfd 256"},
		{"GC prefix", fn(0xfb, 0), "GC"},
		{"memory64", build(func(m *wmod) { m.mems = append(m.mems, []byte{4, 1}) }), "memory64"},
		{"shared memory", build(func(m *wmod) { m.mems = append(m.mems, []byte{3, 1, 2}) }), "shared memory"},
		{"two memories", build(func(m *wmod) { m.memory(1, 0); m.memory(1, 0) }), "multi-memory"},
		{"imported and defined memory", build(func(m *wmod) { m.importMemory("env", "m", 1); m.memory(1, 0) }), "multi-memory"},
		{"memarg with a memory index", build(func(m *wmod) {
			m.memory(1, 0)
			m.fn(ft(nil, nil), nil, i32c(0), opI32Load, 0x42, 0, 0, opDrop)
		}), "multi-memory"},
		{"memory.size of memory 1", build(func(m *wmod) {
			m.memory(1, 0)
			m.fn(ft(nil, nil), nil, opMemorySize, 1, opDrop)
		}), "multi-memory"},
		{"data segment for memory 1", build(func(m *wmod) {
			m.memory(1, 0)
			m.datas = append(m.datas, asm(2, 1, i32c(0), opEnd, 0))
		}), "multi-memory"},
		{"GC struct type", build(func(m *wmod) {
			m.extra = append(m.extra, appendSection(nil, secType, []byte{1, 0x5f, 0}))
		}), "GC"},
		{"typed reference param", build(func(m *wmod) {
			m.extra = append(m.extra, appendSection(nil, secType, []byte{1, 0x60, 2, 0x64, 0x70, 0}))
		}), "GC"},
		{"typed ref.null", fn(0xd0, 0, opDrop), "ref.null heap type"},
		{"table with an initializer", build(func(m *wmod) {
			m.tables = append(m.tables, []byte{0x40, 0, byte(FuncRef), 0, 1, 0xd0, byte(FuncRef), opEnd})
		}), "typed function references"},
		{"extended-const", build(func(m *wmod) { m.global(I32, false, i32c(1), i32c(2), opI32Add) }), "extended-const"},
		{"tag import", build(func(m *wmod) { m.imports = append(m.imports, wimport{"env", "t", 4, []byte{0, 0}}) }), "tag import"},
		{"import from buddy:fuel", build(func(m *wmod) { m.importFunc(Module, "refuel", ft(vt(I64), vt(I64))) }), "reserved module"},
		{"import from buddy:kernel", build(func(m *wmod) { m.importFunc(KernelModule, "alloc", ft(vt(I64), vt(I64))) }), "reserved module"},
		{"global import from buddy:fuel", build(func(m *wmod) { m.importGlobal(Module, "g", I64, true) }), "reserved module"},
		{"too many locals", many(maxLocals + 1), "locals"},
		{"component", []byte("\x00asm\x0d\x00\x01\x00"), "binary version"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Instrument(c.wasm, Options{})
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.why) {
				t.Errorf("Instrument = %v, want ErrUnsupported mentioning %q", err, c.why)
			}
		})
	}
	// The limit on locals is exact.
	if _, _, err := Instrument(many(maxLocals), Options{}); err != nil {
		t.Errorf("%d locals: %v", maxLocals, err)
	}
}

func TestMalformed(t *testing.T) {
	valid := build(func(m *wmod) { m.exportFunc("f", m.fn(ft(nil, vt(I32)), nil, i32c(1))) })
	body := func(raw ...any) []byte {
		return build(func(m *wmod) { m.rawFn(ft(nil, nil), asm(raw...)) })
	}
	cases := []struct {
		name string
		wasm []byte
		why  string
	}{
		{"empty", nil, "magic"},
		{"bad magic", []byte("\x00ASM\x01\x00\x00\x00"), "magic"},
		{"truncated section", valid[:len(valid)-1], "past the end"},
		{"section out of order", append(append([]byte{}, valid...), appendSection(nil, secType, []byte{0})...), "out of order"},
		{"repeated section", build(func(m *wmod) {
			m.memory(1, 0)
			m.extra = append(m.extra, appendSection(nil, secMemory, []byte{0}))
			m.extra = append(m.extra, appendSection(nil, secMemory, []byte{0}))
		}), "out of order"},
		{"trailing bytes in a section", withContent(secType, []byte{0, 0}), "unexpected bytes"},
		{"u32 too long", withContent(secType, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0}), "too long"},
		{"u32 too large", withContent(secType, []byte{0xff, 0xff, 0xff, 0xff, 0x1f}), "too large"},
		{"i32.const too large", body(0, i32c(0)[:1], 0xff, 0xff, 0xff, 0xff, 0x1f, opDrop, opEnd), "too large"},
		{"i64.const too long", body(0, opI64Const, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0, opDrop, opEnd), "too long"},
		{"body without end", body(0, opNop), "without end"},
		{"code after end", body(0, opEnd, opNop), "after the end"},
		{"else outside if", body(0, opElse, opEnd), "else outside"},
		{"double else", body(0, i32c(1), opIf, blockEmpty, opElse, opElse, opEnd, opEnd), "else outside"},
		{"function and code counts differ", build(func(m *wmod) {
			m.typ(ft(nil, nil))
			m.extra = append(m.extra,
				appendSection(nil, secType, []byte{1, 0x60, 0, 0}),
				appendSection(nil, secFunction, []byte{2, 0, 0}),
				appendSection(nil, secCode, []byte{1, 2, 0, opEnd}))
			m.types = nil
		}), "2 declared functions"},
		{"declared functions, no code", build(func(m *wmod) {
			m.extra = append(m.extra,
				appendSection(nil, secType, []byte{1, 0x60, 0, 0}),
				appendSection(nil, secFunction, []byte{1, 0}))
		}), "no code section"},
		{"invalid UTF-8 name", build(func(m *wmod) { m.importFunc("env\xff", "h", ft(nil, nil)) }), "UTF-8"},
		{"invalid value type", build(func(m *wmod) {
			m.extra = append(m.extra, appendSection(nil, secType, []byte{1, 0x60, 1, 0x40, 0}))
		}), "invalid value type"},
		{"invalid limits", build(func(m *wmod) { m.mems = append(m.mems, []byte{9, 1}) }), "limits flags"},
		{"invalid element flags", build(func(m *wmod) { m.elems = append(m.elems, []byte{8}) }), "invalid flags 8"},
		{"non-constant opcode in an initializer", build(func(m *wmod) { m.global(I32, false, opNop, i32c(1)) }), "constant expression"},
		{"huge vector count", withContent(secType, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}), "too large"},
		{"name section function entry truncated", build(func(m *wmod) {
			m.fn(ft(nil, nil), nil)
			m.customs = append(m.customs, wcustom{"name", []byte{1, 3, 1, 0, 5}})
		}), "unexpected end"},
		{"custom section without a name", append(append([]byte{}, valid...), 0, 0), "unexpected end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Instrument(c.wasm, Options{})
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.why) {
				t.Errorf("Instrument = %v, want ErrMalformed mentioning %q", err, c.why)
			}
			var e *Error
			if errors.As(err, &e) && e.Where == "" && e.Offset < 0 {
				t.Errorf("error says neither where nor at which offset: %v", err)
			}
		})
	}
	if _, _, err := Instrument(valid, Options{}); err != nil {
		t.Errorf("the valid base module: %v", err)
	}
}

// withContent is a module with one raw section.
func withContent(id byte, content []byte) []byte {
	return append([]byte("\x00asm\x01\x00\x00\x00"), appendSection(nil, id, content)...)
}

func TestErrorsSayWhereAndWhat(t *testing.T) {
	wasm := build(func(m *wmod) {
		m.importFunc("env", "h", ft(nil, nil))
		m.fn(ft(nil, nil), nil, opNop)
		m.fn(ft(nil, nil), nil, opNop, opNop, i32c(0), 0xfe, 0x10, 2, 0, opDrop)
	})
	_, _, err := Instrument(wasm, Options{})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("not an *Error: %v", err)
	}
	// The atomic opcode is in function 2 (one import, then two functions).
	off := strings.Index(string(wasm), "\xfe\x10")
	if e.Where != "code of function 2" || e.Offset != off || !errors.Is(err, ErrUnsupported) {
		t.Errorf("got %+v, want code of function 2 at offset %#x", e, off)
	}
	want := "fuel: code of function 2, offset "
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "atomic opcode 0xfe 0x10") {
		t.Errorf("message %q", err.Error())
	}
}

// TestRefusesWhatCrashesWazero: wazero v1.12.0's decoder allocates by vector
// counts before checking them against the input, so these few-byte modules
// make CompileModule die with "fatal error: runtime: out of memory" (not a
// recoverable panic) or run for minutes. Inspect and Instrument refuse every
// one of them; the runtime must call one of them before wazero sees
// untrusted bytes. (They are not run on wazero here, for that reason.)
func TestRefusesWhatCrashesWazero(t *testing.T) {
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0x0f}
	hdr := []byte("\x00asm\x01\x00\x00\x00")
	mod := func(sections ...[]byte) []byte {
		b := append([]byte{}, hdr...)
		for _, s := range sections {
			b = append(b, s...)
		}
		return b
	}
	oneFunc := [][]byte{
		appendSection(nil, secType, []byte{1, 0x60, 0, 0}),
		appendSection(nil, secFunction, []byte{1, 0}),
	}
	cases := map[string][]byte{
		"import count":      mod(appendSection(nil, secImport, huge)),
		"export count":      mod(appendSection(nil, secExport, huge)),
		"function count":    mod(appendSection(nil, secFunction, huge)),
		"global count":      mod(appendSection(nil, secGlobal, huge)),
		"table count":       mod(appendSection(nil, secTable, huge)),
		"element count":     mod(appendSection(nil, secElement, huge)),
		"element vector":    mod(appendSection(nil, secElement, asm(1, 1, 0, huge))),
		"data count":        mod(appendSection(nil, secData, huge)),
		"data segment size": mod(appendSection(nil, secMemory, []byte{1, 0, 1}), appendSection(nil, secData, asm(1, 1, huge))),
		"code count":        mod(appendSection(nil, secCode, huge)),
		"locals":            mod(oneFunc[0], oneFunc[1], appendSection(nil, secCode, asm(1, 8, 1, huge, I32, opEnd))),
		"section size":      append(mod(), 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 4, 'n', 'a', 'm', 'e'),
		"function names":    mod(appendSection(nil, secCustom, asm(appendName(nil, "name"), 1, 5, huge))),
		"local names":       mod(appendSection(nil, secCustom, asm(appendName(nil, "name"), 2, 7, 1, 0, huge))),
		"type params":       mod(appendSection(nil, secType, asm(1, 0x60, huge))),
	}
	for name, wasm := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Inspect(wasm); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
				t.Errorf("Inspect = %v, want an error", err)
			}
			if _, _, err := Instrument(wasm, Options{}); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
				t.Errorf("Instrument = %v, want an error", err)
			}
		})
	}
}
