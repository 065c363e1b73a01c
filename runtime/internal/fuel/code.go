package fuel

import "math"

// Function bodies are rewritten in two passes. The first decodes every
// instruction, checks the indices the rewrite depends on, splits the body into
// metered blocks and records events (where to charge, where to sync the fuel
// local with the global, which calls to renumber). The second copies the body
// and inserts code at the events.
//
// A metered block is a run of instructions that, once its first one runs, all
// run unless the guest traps. Its cost is charged before its first
// instruction. A block starts at the function entry, at a loop header, at the
// start of each arm of an if, after a br_if, and after the end of a nested
// block, loop or if that something inside leaves early (a branch to a label
// outside it, or a return). Code after the end of a nested structure that is
// always left through its end belongs to the block that was active before it
// opened, as in wasm-instrument's determine_metered_blocks; unlike there, a
// branch to an enclosing loop also counts as leaving early, so the charge is
// exact rather than an upper bound.
//
// Fuel is kept in a local: loaded from the global at entry and after every
// call of a wasm function, stored to it before such calls and before every
// way out of the function. Where a charge is checked depends on where it is:
//
//   - at the function entry, in blocks outside loops that call no wasm
//     function, and in blocks that call an import with an ImportCost:
//     fuel -= cost; if fuel < 0 { fuel = refuel(fuel) }
//   - at the header of a loop without params, the check branches out of the
//     loop to a refill path that calls refuel and re-enters the loop:
//
//     block $after (bt)           ;; added
//       loop $outer               ;; added
//         block $refill           ;; added
//           loop (bt)             ;; the original loop
//             fuel -= cost; br_if $refill (fuel < 0)
//             ...                 ;; branches out of the loop: depth + 3
//           end
//           br $after
//         end
//         fuel = refuel(fuel) + cost; br $outer
//       end
//       unreachable
//     end
//
//     so the loop itself contains no call (wazero's compiler spills loop
//     values around any call in a loop, even one never taken: an inline
//     check cost 1.5-1.75x on a load/store loop, the refill path 1.15x);
//   - elsewhere (inside loops, or before a call of a wasm function, which
//     checks at its entry): fuel -= cost only; the next loop header, function
//     entry, checked block or export return checks it.

// Event kinds.
const (
	evCharge       uint8 = iota // charge block arg before pos
	evSync                      // store the fuel local to the global before pos
	evCall                      // [pos,end) is call arg
	evCallIndirect              // [pos,end) is call_indirect
	evRefFunc                   // [pos,end) is ref.func arg
	evBulkMem                   // before pos: charge (len >> shift) + 1
	evBulkTable                 // before pos: charge len + 1
	evGrow                      // [pos,end) is memory.grow: charge pages * K, then oom check
	evLoopOpen                  // [pos,end) is loop bt: wrap it (block bt, loop, block)
	evLoopClose                 // [pos,end) is the end of a wrapped loop; arg: its header block
	evBranch                    // [pos,end) is br/br_if (arg: new depth) or br_table (labels[arg:arg+n])
	evTableGrow                 // [pos,end) is table.grow: cap the tables' total size, charge by bytes
)

type event struct {
	pos, end int
	arg, n   uint32
	kind     uint8
}

// How a metered block's charge is checked.
const (
	modeCheck  uint8 = iota // fuel -= cost; if fuel < 0 { fuel = refuel(fuel) }
	modeSub                 // fuel -= cost
	modeHeader              // fuel -= cost; br_if $refill (fuel < 0)
)

type meteredBlock struct {
	cost   int64
	dead   bool
	forced bool // checked whatever else it contains
	mode   uint8
}

// Control frame kinds.
const (
	frFunc uint8 = iota
	frBlock
	frLoop
	frIf
)

type frame struct {
	kind       uint8
	hasElse    bool
	deadAtOpen bool
	wrapped    bool  // a loop given a refill path (3 frames added around it)
	parent     int32 // metered block active when the frame opened
	header     int32 // wrapped loops: the header block
	lowest     int   // lowest frame index a branch inside targets
	wrappedUp  int   // wrapped loops among frames[0..this]
	loopsUp    int   // loops among frames[0..this]
}

// maxLocals bounds params + locals of one function (as wasmtime and V8 do), so
// a tiny module cannot make the runtime allocate gigabytes of locals.
const maxLocals = 50000

// maxBlockCost bounds the static cost of one metered block.
const maxBlockCost = 1 << 62

type codeGen struct {
	m       *module
	o       *resolved
	events  []event
	blocks  []meteredBlock
	frames  []frame
	cur     int32
	dead    bool
	scratch bool
	buf     []byte
	labels  []uint32 // new br_table depths

	// Per-function encodings.
	fuelLocal, scratchLocal uint32

	targets  uint64 // br_table targets in this function
	depthSum uint64 // weight of the metered blocks started since weigh
	fnWeight uint64 // nesting weight of this function
}

// weigh adds the depth of a block opening, and of the metered blocks started
// since the last call, to the module's nesting weight, refused over
// MaxNestingWeight: wazero's compile time grows with the number of blocks
// times their depth (4,000 nested loops took 4 s to compile once metered,
// 8,000 took 20 s), which MaxNesting alone bounds only per block.
func (g *codeGen) weigh(r *reader, off int) error {
	w := g.depthSum + g.outDepth()
	g.depthSum = 0
	g.fnWeight += w
	g.m.depthSum += w
	if err := r.checkLimit(off, g.fnWeight, MaxFunctionNestingWeight, "nesting weight (blocks times their depth) of the function", "MaxFunctionNestingWeight"); err != nil {
		return err
	}
	return r.checkLimit(off, g.m.depthSum, MaxNestingWeight, "nesting weight (blocks times their depth) of the module", "MaxNestingWeight")
}

// outDepth is the nesting depth in the output: a metered loop is wrapped in
// three more structures.
func (g *codeGen) outDepth() uint64 {
	return uint64(len(g.frames) + 3*g.frames[len(g.frames)-1].wrappedUp)
}

// brTargets counts the n targets of a br_table against MaxBrTableTargets
// (per function) and MaxModuleBrTableTargets.
func (g *codeGen) brTargets(r *reader, off int, n uint64) error {
	g.targets += n
	g.m.brTargets += n
	if g.targets > MaxBrTableTargets {
		what := "br_table targets of the function"
		if g.targets == n {
			what = "br_table targets"
		}
		return r.overLimit(off, ErrTooLarge, what, g.targets, MaxBrTableTargets, "MaxBrTableTargets")
	}
	return r.checkLimit(off, g.m.brTargets, MaxModuleBrTableTargets, "br_table targets of the module", "MaxModuleBrTableTargets")
}

// codeSection rewrites the function bodies of the code section read by r
// and returns them without the count.
func (m *module) codeSection(r *reader) ([]byte, error) {
	n, err := r.count(2)
	if err != nil {
		return nil, err
	}
	if uint32(n) != m.numDefined {
		return nil, r.malformed(r.pos, "%d function bodies for %d declared functions", n, m.numDefined)
	}
	g := &codeGen{m: m, o: m.o}
	out := make([]byte, 0, 2*(r.end-r.pos)+16)
	for i := 0; i < n; i++ {
		off := r.pos
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		if int64(size) > int64(r.end-r.pos) {
			return nil, r.malformed(off, "body %d: size %d past the end of the section", i, size)
		}
		fr := &reader{b: r.b, pos: r.pos, end: r.pos + int(size), fn: int(m.numImports) + i}
		if err := fr.checkLimit(off, uint64(size), MaxBodyBytes, "body size", "MaxBodyBytes"); err != nil {
			return nil, err
		}
		if out, err = g.function(fr, m.numImports+uint32(i), out); err != nil {
			return nil, err
		}
		r.pos += int(size)
	}
	if r.pos != r.end {
		return nil, r.malformed(r.pos, "%d unexpected bytes at the end of the section", r.end-r.pos)
	}
	return out, nil
}

// codeSectionOut is the code section: the rewritten bodies, the export
// wrappers and the import thunks.
func (m *module) codeSectionOut(bodies []byte) []byte {
	g := &codeGen{m: m, o: m.o}
	out := make([]byte, 0, len(bodies)+64*(len(m.wrapped)+len(m.thunked))+8)
	out = appendU32(out, m.numDefined+uint32(len(m.wrapped)+len(m.thunked)))
	out = append(out, bodies...)
	for _, f := range m.wrapped {
		out = g.wrapper(f, out, true)
	}
	for _, f := range m.thunked {
		out = g.wrapper(f, out, false)
	}
	return out
}

// function rewrites one body and appends it (with its size) to out.
func (g *codeGen) function(r *reader, fidx uint32, out []byte) ([]byte, error) {
	m := g.m
	declStart := r.pos
	numLocals, err := m.locals(r, fidx)
	if err != nil {
		return nil, err
	}
	localsEnd := r.pos
	dr := &reader{b: r.b, pos: declStart, end: localsEnd, fn: -1}
	decls, _ := dr.u32()
	localsStart := dr.pos
	g.fuelLocal = uint32(numLocals)
	g.scratchLocal = g.fuelLocal + 1
	if err := g.analyze(r, uint32(numLocals)); err != nil {
		return nil, err
	}

	// Emit.
	b := g.buf[:0]
	extra := 1
	if g.scratch {
		extra = 2
	}
	b = appendU32(b, decls+uint32(extra))
	b = append(b, r.b[localsStart:localsEnd]...)
	b = append(b, 1, byte(I64))
	if g.scratch {
		b = append(b, 1, byte(I32))
	}
	wasm := r.b
	last := localsEnd
	for _, ev := range g.events {
		b = append(b, wasm[last:ev.pos]...)
		last = ev.pos
		switch ev.kind {
		case evCharge:
			blk := g.blocks[ev.arg]
			switch {
			case ev.arg == 0:
				b = g.entryCharge(b, max(blk.cost, 1))
			case blk.dead || blk.cost == 0:
			case blk.mode == modeCheck:
				b = g.charge(b, blk.cost)
			case blk.mode == modeSub:
				b = g.subtract(b, blk.cost)
				b = append(b, 0x21) // local.set
				b = appendU32(b, g.fuelLocal)
			case blk.mode == modeHeader:
				b = g.subtract(b, blk.cost)
				b = append(b, 0x22) // local.tee
				b = appendU32(b, g.fuelLocal)
				b = append(b, 0x42, 0, 0x53, 0x0d, 1) // i64.const 0, i64.lt_s, br_if $refill
			}
		case evLoopOpen:
			// block bt; loop; block; then the original loop bt.
			b = append(b, 0x02)
			b = append(b, wasm[ev.pos+1:ev.end]...)
			b = append(b, 0x03, 0x40, 0x02, 0x40)
			b = append(b, wasm[ev.pos:ev.end]...)
			last = ev.end
		case evLoopClose:
			// end; br $after; end $refill; fuel = refuel(fuel) + cost;
			// br $outer; end $outer; unreachable; end $after
			b = append(b, 0x0b, 0x0c, 2, 0x0b, 0x20)
			b = appendU32(b, g.fuelLocal)
			b = append(b, 0x10)
			b = appendU32(b, m.refuelIdx())
			b = append(b, 0x42)
			b = appendS64(b, g.blocks[ev.arg].cost)
			b = append(b, 0x7c, 0x21) // i64.add, local.set
			b = appendU32(b, g.fuelLocal)
			b = append(b, 0x0c, 0, 0x0b, 0x00, 0x0b)
			last = ev.end
		case evBranch:
			op := wasm[ev.pos]
			b = append(b, op)
			if op == 0x0e {
				b = appendU32(b, ev.n-1)
				for _, l := range g.labels[ev.arg : ev.arg+ev.n] {
					b = appendU32(b, l)
				}
			} else {
				b = appendU32(b, ev.arg)
			}
			last = ev.end
		case evSync:
			b = g.store(b)
		case evCall:
			// An import does not see the fuel global unless it can call back
			// into this module (Options.ReentrantImports).
			sync := ev.arg >= m.numImports || g.o.ReentrantImports
			if sync {
				b = g.store(b)
			}
			b = append(b, 0x10)
			b = appendU32(b, m.remap(ev.arg))
			if sync {
				b = g.reload(b)
			}
			last = ev.end
		case evCallIndirect:
			b = g.store(b)
			b = append(b, wasm[ev.pos:ev.end]...)
			b = g.reload(b)
			last = ev.end
		case evRefFunc:
			b = append(b, 0xd2)
			b = appendU32(b, ev.arg) // already remapped
			last = ev.end
		case evBulkMem:
			// len is on top: fuel -= (len >> shift) + 1
			b = g.teeScratchIntoFuel(b)
			if g.o.bulkShift > 0 {
				b = append(b, 0x42)
				b = appendS64(b, int64(g.o.bulkShift))
				b = append(b, 0x88) // i64.shr_u
			}
			b = append(b, 0x7d, 0x42, 1, 0x7d) // i64.sub, i64.const 1, i64.sub
			b = g.check(b)
		case evBulkTable:
			b = g.teeScratchIntoFuel(b)
			b = append(b, 0x7d, 0x42, 1, 0x7d)
			b = g.check(b)
		case evTableGrow:
			b = g.tableGrow(b)
			b = append(b, wasm[ev.pos:ev.end]...)
			last = ev.end
		case evGrow:
			b = g.teeScratchIntoFuel(b)
			b = append(b, 0x42)
			b = appendS64(b, g.o.growPageCost)
			b = append(b, 0x7e, 0x7d) // i64.mul, i64.sub
			b = g.check(b)
			b = append(b, wasm[ev.pos:ev.end]...)
			// if (result == -1) oom(); result stays on the stack.
			b = append(b, 0x22) // local.tee s
			b = appendU32(b, g.scratchLocal)
			b = append(b, 0x20) // local.get s
			b = appendU32(b, g.scratchLocal)
			b = append(b, 0x41, 0x7f, 0x46, 0x04, 0x40, 0x10) // i32.const -1, i32.eq, if, call
			b = appendU32(b, m.oomIdx())
			b = append(b, 0x0b)
			last = ev.end
		}
	}
	b = append(b, wasm[last:r.end]...)
	g.buf = b
	out = appendU32(out, uint32(len(b)))
	return append(out, b...), nil
}

// tableGrow expects [ref, n] on the stack and leaves [ref, n'] for
// table.grow: n' = n if the tables' entries, all together, stay within
// MaxTableEntries, and fuel is charged n*TableEntryBytes+1; otherwise n' =
// 0xffffffff, which makes any table.grow return -1 without allocating, and
// oom is called so that a later trap reads as a memory limit:
//
//	local.set s
//	local.get s; i64.extend_i32_u; (table.size i; i64.extend_i32_u; i64.add)*
//	i64.const MaxTableEntries; i64.gt_u
//	if
//	  i32.const -1; local.set s; call oom
//	else
//	  fuel -= s*TableEntryBytes + 1; check
//	end
//	local.get s
func (g *codeGen) tableGrow(b []byte) []byte {
	b = append(b, 0x21) // local.set s
	b = appendU32(b, g.scratchLocal)
	b = append(b, 0x20)
	b = appendU32(b, g.scratchLocal)
	b = append(b, 0xad) // i64.extend_i32_u
	for t := uint32(0); t < g.m.numTables; t++ {
		b = append(b, 0xfc, 16)
		b = appendU32(b, t)
		b = append(b, 0xad, 0x7c) // i64.extend_i32_u, i64.add
	}
	b = append(b, 0x42)
	b = appendS64(b, MaxTableEntries)
	b = append(b, 0x56, 0x04, 0x40) // i64.gt_u, if
	b = append(b, 0x41, 0x7f, 0x21) // i32.const -1, local.set s
	b = appendU32(b, g.scratchLocal)
	b = append(b, 0x10) // call oom
	b = appendU32(b, g.m.oomIdx())
	b = append(b, 0x05, 0x20) // else, local.get fuel
	b = appendU32(b, g.fuelLocal)
	b = append(b, 0x20)
	b = appendU32(b, g.scratchLocal)
	b = append(b, 0xad, 0x42, TableEntryBytes, 0x7e, 0x7d, 0x42, 1, 0x7d) // extend, i64.const 8, mul, sub, i64.const 1, sub
	b = g.check(b)
	b = append(b, 0x0b, 0x20) // end, local.get s
	return appendU32(b, g.scratchLocal)
}

// store: local.get fuel; global.set G.
func (g *codeGen) store(b []byte) []byte {
	b = append(b, 0x20)
	b = appendU32(b, g.fuelLocal)
	b = append(b, 0x24)
	return appendU32(b, g.m.fuelGlobal())
}

// reload: global.get G; local.set fuel.
func (g *codeGen) reload(b []byte) []byte {
	b = append(b, 0x23)
	b = appendU32(b, g.m.fuelGlobal())
	b = append(b, 0x21)
	return appendU32(b, g.fuelLocal)
}

// check expects the new fuel on the stack: local.tee fuel; if fuel < 0 {
// fuel = refuel(fuel) }.
func (g *codeGen) check(b []byte) []byte {
	b = append(b, 0x22)
	b = appendU32(b, g.fuelLocal)
	b = append(b, 0x42, 0, 0x53, 0x04, 0x40, 0x20) // i64.const 0, i64.lt_s, if, local.get
	b = appendU32(b, g.fuelLocal)
	b = append(b, 0x10)
	b = appendU32(b, g.m.refuelIdx())
	b = append(b, 0x21)
	b = appendU32(b, g.fuelLocal)
	return append(b, 0x0b)
}

// charge: fuel -= cost; check.
func (g *codeGen) charge(b []byte, cost int64) []byte {
	return g.check(g.subtract(b, cost))
}

// subtract: local.get fuel; i64.const cost; i64.sub.
func (g *codeGen) subtract(b []byte, cost int64) []byte {
	b = append(b, 0x20)
	b = appendU32(b, g.fuelLocal)
	b = append(b, 0x42)
	b = appendS64(b, cost)
	return append(b, 0x7d)
}

// entryCharge: fuel = G - cost; check.
func (g *codeGen) entryCharge(b []byte, cost int64) []byte {
	b = append(b, 0x23)
	b = appendU32(b, g.m.fuelGlobal())
	b = append(b, 0x42)
	b = appendS64(b, cost)
	b = append(b, 0x7d)
	return g.check(b)
}

// teeScratchIntoFuel: local.tee s; local.get fuel; local.get s;
// i64.extend_i32_u. The caller finishes the cost and subtracts it.
func (g *codeGen) teeScratchIntoFuel(b []byte) []byte {
	b = append(b, 0x22)
	b = appendU32(b, g.scratchLocal)
	b = append(b, 0x20)
	b = appendU32(b, g.fuelLocal)
	b = append(b, 0x20)
	b = appendU32(b, g.scratchLocal)
	return append(b, 0xad)
}

// wrapper appends the export wrapper of original function f (forward the
// params, call f, settle(G), return f's results) or, without settle, the
// thunk of import f: charge its ImportCost and forward.
func (g *codeGen) wrapper(f uint32, out []byte, settle bool) []byte {
	m := g.m
	ft := m.types[m.funcTypes[f]]
	b := g.buf[:0]
	b = append(b, 0) // no locals
	if f < m.numImports && m.importCost[f] > 0 {
		// G -= cost; if G < 0 { G = refuel(G) }
		G := m.fuelGlobal()
		b = append(b, 0x23)
		b = appendU32(b, G)
		b = append(b, 0x42)
		b = appendS64(b, m.importCost[f])
		b = append(b, 0x7d, 0x24)
		b = appendU32(b, G)
		b = append(b, 0x23)
		b = appendU32(b, G)
		b = append(b, 0x42, 0, 0x53, 0x04, 0x40, 0x23)
		b = appendU32(b, G)
		b = append(b, 0x10)
		b = appendU32(b, m.refuelIdx())
		b = append(b, 0x24)
		b = appendU32(b, G)
		b = append(b, 0x0b)
	}
	for i := range ft.Params {
		b = append(b, 0x20)
		b = appendU32(b, uint32(i))
	}
	b = append(b, 0x10)
	b = appendU32(b, m.remap(f))
	if settle {
		// if G < 0 { G = refuel(G) }: blocks in loops are not checked on
		// their own, so the last of them may have left fuel negative.
		G := m.fuelGlobal()
		b = append(b, 0x23)
		b = appendU32(b, G)
		b = append(b, 0x42, 0, 0x53, 0x04, 0x40, 0x23)
		b = appendU32(b, G)
		b = append(b, 0x10)
		b = appendU32(b, m.refuelIdx())
		b = append(b, 0x24)
		b = appendU32(b, G)
		b = append(b, 0x0b, 0x23)
		b = appendU32(b, G)
		b = append(b, 0x10)
		b = appendU32(b, m.settleIdx())
	}
	b = append(b, 0x0b)
	g.buf = b
	out = appendU32(out, uint32(len(b)))
	return append(out, b...)
}

// newBlock starts a metered block at pos: checked on its own outside loops,
// only subtracted inside them.
func (g *codeGen) newBlock(pos int) {
	mode := modeCheck
	if g.frames[len(g.frames)-1].loopsUp > 0 {
		mode = modeSub
	}
	g.newBlockMode(pos, mode)
}

func (g *codeGen) newBlockMode(pos int, mode uint8) {
	g.depthSum += g.outDepth()
	g.blocks = append(g.blocks, meteredBlock{dead: g.dead, mode: mode})
	g.cur = int32(len(g.blocks) - 1)
	if !g.dead {
		g.events = append(g.events, event{pos: pos, kind: evCharge, arg: uint32(g.cur)})
	}
}

func (g *codeGen) push(kind uint8, wrapped bool) {
	top := g.frames[len(g.frames)-1]
	f := frame{kind: kind, deadAtOpen: g.dead, parent: g.cur, lowest: math.MaxInt,
		wrapped: wrapped, wrappedUp: top.wrappedUp, loopsUp: top.loopsUp}
	if wrapped {
		f.wrappedUp++
	}
	if kind == frLoop {
		f.loopsUp++
	}
	g.frames = append(g.frames, f)
}

// Calls, as called sees them.
const (
	callDefined      = iota // a function of this module: it checks at its entry
	callCostlyImport        // an import with an ImportCost: check before the host runs
	callOther               // call_indirect, an import without cost: may not check
)

// called notes a call in the current block. A block that calls a function
// of this module needs no check of its own, since the callee checks at its
// entry right after; one that calls an import with a cost is checked so the
// host work is paid for before it runs.
func (g *codeGen) called(kind int) {
	blk := &g.blocks[g.cur]
	switch {
	case kind == callCostlyImport:
		blk.mode, blk.forced = modeCheck, true
	case kind == callOther:
		blk.forced = blk.forced || blk.mode == modeCheck
	case blk.mode == modeCheck && !blk.forced:
		blk.mode = modeSub
	}
}

// depth returns the depth of label in the output: 3 more for each wrapped
// loop between the branch and its target.
func (g *codeGen) depth(label uint32) uint32 {
	top := len(g.frames) - 1
	t := top - int(label)
	return label + 3*uint32(g.frames[top].wrappedUp-g.frames[t].wrappedUp)
}

// branch records a branch to label and reports whether it leaves the function.
func (g *codeGen) branch(r *reader, off int, label uint32) (bool, error) {
	if uint64(label) >= uint64(len(g.frames)) {
		return false, r.malformed(off, "branch depth %d out of range (%d labels)", label, len(g.frames))
	}
	t := len(g.frames) - 1 - int(label)
	top := &g.frames[len(g.frames)-1]
	if t < top.lowest {
		top.lowest = t
	}
	return t == 0, nil
}

// blockType reads a block type and returns its number of params.
func (g *codeGen) blockType(r *reader) (int, error) {
	off := r.pos
	if r.pos >= r.end {
		return 0, r.eof()
	}
	c := r.b[r.pos]
	if c == 0x40 || validValType(c) {
		r.pos++
		return 0, nil
	}
	if c >= 0x40 && c < 0x80 {
		if gcTypeByte(c) {
			return 0, r.unsupported(off, "block type %#x (GC / typed references)", c)
		}
		return 0, r.malformed(off, "invalid block type %#x", c)
	}
	v, err := r.signed(33)
	if err != nil {
		return 0, err
	}
	if v < 0 || v >= int64(len(g.m.types)) {
		return 0, r.malformed(off, "block type index %d out of range (%d types)", v, len(g.m.types))
	}
	return len(g.m.types[v].Params), nil
}

func (g *codeGen) memarg(r *reader) error {
	off := r.pos
	align, err := r.u32()
	if err != nil {
		return err
	}
	if align&0x40 != 0 {
		return r.unsupported(off, "memory index in memarg (multi-memory)")
	}
	_, err = r.u32()
	return err
}

func (g *codeGen) zeroByte(r *reader) error {
	off := r.pos
	c, err := r.byte()
	if err != nil {
		return err
	}
	if c != 0 {
		return r.unsupported(off, "memory index byte %#x (multi-memory)", c)
	}
	return nil
}

func (g *codeGen) tableIdx(r *reader) error {
	_, err := r.index(uint64(g.m.numTables), "table", "tables")
	return err
}

func (g *codeGen) add(r *reader, off int, c int64) error {
	blk := &g.blocks[g.cur]
	if blk.cost > maxBlockCost-c {
		return r.unsupported(off, "metered block costs more than %d", int64(maxBlockCost))
	}
	blk.cost += c
	return nil
}

// analyze decodes the instructions of one body.
func (g *codeGen) analyze(r *reader, numLocals uint32) error {
	m := g.m
	g.events = g.events[:0]
	g.blocks = g.blocks[:0]
	g.frames = append(g.frames[:0], frame{kind: frFunc, parent: -1, lowest: math.MaxInt})
	g.labels = g.labels[:0]
	g.dead = false
	g.scratch = false
	g.targets = 0
	g.depthSum = 0
	g.fnWeight = 0
	g.newBlock(r.pos)
	for {
		if r.pos >= r.end {
			return r.malformed(r.pos, "body ends without end")
		}
		off := r.pos
		op := r.b[r.pos]
		r.pos++
		cost := int64(1)
		var err error
		switch op {
		case 0x00: // unreachable
			g.blocks[g.cur].cost++
			g.dead = true
			g.newBlock(r.pos)
			continue
		case 0x01, 0x1a, 0x1b, 0xd1: // nop, drop, select, ref.is_null
		case 0x02, 0x03, 0x04: // block, loop, if
			if len(g.frames) > MaxNesting {
				return r.overLimit(off, ErrTooLarge, "nesting depth of block, loop and if", uint64(len(g.frames)), MaxNesting, "MaxNesting")
			}
			if err := g.weigh(r, off); err != nil {
				return err
			}
			params, err := g.blockType(r)
			if err != nil {
				return err
			}
			g.blocks[g.cur].cost++
			switch op {
			case 0x02:
				g.push(frBlock, false)
			case 0x03:
				// Give the loop a refill path unless it has params, is dead
				// or is empty (its header then costs nothing).
				wrap := params == 0 && !g.dead && r.pos < r.end && r.b[r.pos] != 0x0b
				g.push(frLoop, wrap)
				if wrap {
					g.events = append(g.events, event{pos: off, end: r.pos, kind: evLoopOpen})
					g.newBlockMode(r.pos, modeHeader)
					g.frames[len(g.frames)-1].header = g.cur
				} else {
					g.newBlockMode(r.pos, modeCheck)
				}
			case 0x04:
				g.push(frIf, false)
				g.newBlock(r.pos)
			}
			continue
		case 0x05: // else
			top := &g.frames[len(g.frames)-1]
			if top.kind != frIf || top.hasElse {
				return r.malformed(off, "else outside an if")
			}
			top.hasElse = true
			g.dead = top.deadAtOpen
			g.newBlock(r.pos)
			continue
		case 0x0b: // end
			n := len(g.frames) - 1
			if n == 0 {
				if err := g.weigh(r, off); err != nil {
					return err
				}
				if !g.dead {
					g.events = append(g.events, event{pos: off, kind: evSync})
				}
				if r.pos != r.end {
					return r.malformed(r.pos, "%d bytes after the end of the body", r.end-r.pos)
				}
				return nil
			}
			cl := g.frames[n]
			if cl.wrapped {
				g.events = append(g.events, event{pos: off, end: r.pos, kind: evLoopClose, arg: uint32(cl.header)})
			}
			g.frames = g.frames[:n]
			g.dead = cl.deadAtOpen
			if p := &g.frames[n-1]; cl.lowest < p.lowest {
				p.lowest = cl.lowest
			}
			if cl.lowest < n {
				g.newBlock(r.pos)
			} else {
				g.cur = cl.parent
			}
			continue
		case 0x0c, 0x0d: // br, br_if
			l, err := r.u32()
			if err != nil {
				return err
			}
			outer, err := g.branch(r, off, l)
			if err != nil {
				return err
			}
			if outer {
				g.events = append(g.events, event{pos: off, kind: evSync})
			}
			if d := g.depth(l); d != l {
				g.events = append(g.events, event{pos: off, end: r.pos, kind: evBranch, arg: d})
			}
			g.blocks[g.cur].cost++
			if op == 0x0c {
				g.dead = true
			}
			g.newBlock(r.pos)
			continue
		case 0x0e: // br_table
			n, err := r.count(1)
			if err != nil {
				return err
			}
			if err := g.brTargets(r, off, uint64(n)+1); err != nil {
				return err
			}
			outer, changed := false, false
			first := len(g.labels)
			for i := 0; i <= n; i++ {
				lo := r.pos
				l, err := r.u32()
				if err != nil {
					return err
				}
				o, err := g.branch(r, lo, l)
				if err != nil {
					return err
				}
				outer = outer || o
				d := g.depth(l)
				changed = changed || d != l
				g.labels = append(g.labels, d)
			}
			if outer {
				g.events = append(g.events, event{pos: off, kind: evSync})
			}
			if changed {
				g.events = append(g.events, event{pos: off, end: r.pos, kind: evBranch, arg: uint32(first), n: uint32(n + 1)})
			} else {
				g.labels = g.labels[:first]
			}
			g.blocks[g.cur].cost++
			g.dead = true
			g.newBlock(r.pos)
			continue
		case 0x0f: // return
			if _, err := g.branch(r, off, uint32(len(g.frames)-1)); err != nil {
				return err
			}
			g.events = append(g.events, event{pos: off, kind: evSync})
			g.blocks[g.cur].cost++
			g.dead = true
			g.newBlock(r.pos)
			continue
		case 0x10: // call
			f, err := m.funcIndex(r)
			if err != nil {
				return err
			}
			kind := callDefined
			if f < m.numImports {
				cost += m.importCost[f]
				kind = callOther
				if m.importCost[f] > 0 {
					kind = callCostlyImport
				}
			}
			g.called(kind)
			g.events = append(g.events, event{pos: off, end: r.pos, kind: evCall, arg: f})
		case 0x11: // call_indirect
			if _, err = m.typeIndex(r); err != nil {
				return err
			}
			if err = g.tableIdx(r); err != nil {
				return err
			}
			g.called(callOther)
			g.events = append(g.events, event{pos: off, end: r.pos, kind: evCallIndirect})
		case 0x12, 0x13:
			return r.unsupported(off, "tail call opcode %#x", op)
		case 0x14, 0x15, 0xd3, 0xd4, 0xd5, 0xd6:
			return r.unsupported(off, "typed function references opcode %#x", op)
		case 0x06, 0x07, 0x08, 0x09, 0x0a, 0x18, 0x19, 0x1f:
			return r.unsupported(off, "exception handling opcode %#x", op)
		case 0x1c: // select t*
			n, err := r.count(1)
			if err != nil {
				return err
			}
			for i := 0; i < n; i++ {
				if _, err := r.valType(); err != nil {
					return err
				}
			}
		case 0x20, 0x21, 0x22: // local.get/set/tee
			lo := r.pos
			l, err := r.u32()
			if err != nil {
				return err
			}
			if l >= numLocals {
				return r.malformed(lo, "local index %d out of range (%d locals)", l, numLocals)
			}
		case 0x23, 0x24: // global.get/set
			lo := r.pos
			gi, err := r.u32()
			if err != nil {
				return err
			}
			if gi >= m.numGlobals {
				return r.malformed(lo, "global index %d out of range (%d globals)", gi, m.numGlobals)
			}
		case 0x25: // table.get
			err = g.tableIdx(r)
		case 0x26: // table.set
			m.tableWrites = true
			err = g.tableIdx(r)
		case 0x3f: // memory.size
			err = g.zeroByte(r)
		case 0x40: // memory.grow
			if err = g.zeroByte(r); err != nil {
				return err
			}
			g.scratch = true
			g.events = append(g.events, event{pos: off, end: r.pos, kind: evGrow})
		case 0x41, 0x42, 0x43, 0x44:
			_, err = r.numConst(op)
		case 0xd0: // ref.null
			c, err := r.byte()
			if err != nil {
				return err
			}
			if c != byte(FuncRef) && c != byte(ExternRef) {
				return r.unsupported(off+1, "ref.null heap type %#x (GC / typed references)", c)
			}
		case 0xd2: // ref.func
			f, err := m.funcIndex(r)
			if err != nil {
				return err
			}
			// ref.func of an exported function or a metered import needs a
			// declaration (the export now names the wrapper; the import
			// becomes a thunk).
			to := m.remapRef(f)
			if _, ok := m.wrapperOf[f]; ok || to != m.remap(f) {
				m.declare[to] = true
			}
			g.events = append(g.events, event{pos: off, end: r.pos, kind: evRefFunc, arg: to})
		case 0xfc:
			err = g.miscOp(r, off)
		case 0xfd:
			err = g.simdOp(r, off)
		case 0xfe:
			sub := ""
			if r.pos < r.end {
				sub = fmtHex(r.b[r.pos])
			}
			return r.unsupported(off, "atomic opcode 0xfe%s (threads)", sub)
		case 0xfb:
			return r.unsupported(off, "GC opcode 0xfb")
		default:
			switch {
			case op >= 0x28 && op <= 0x3e: // loads and stores
				err = g.memarg(r)
			case op >= 0x45 && op <= 0xc4: // numeric, sign extension
			default:
				return r.unsupported(off, "unknown opcode %#x", op)
			}
		}
		if err != nil {
			return err
		}
		if cost == 1 {
			g.blocks[g.cur].cost++
		} else if err := g.add(r, off, cost); err != nil {
			return err
		}
	}
}

func fmtHex(c byte) string {
	const digits = "0123456789abcdef"
	return " 0x" + string([]byte{digits[c>>4], digits[c&15]})
}

// miscOp decodes a 0xfc instruction.
func (g *codeGen) miscOp(r *reader, off int) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch sub {
	case 0, 1, 2, 3, 4, 5, 6, 7: // trunc_sat
		return nil
	case 8: // memory.init data mem
		if _, err := r.u32(); err != nil {
			return err
		}
		if err := g.zeroByte(r); err != nil {
			return err
		}
		g.bulk(off, evBulkMem)
	case 9: // data.drop
		g.m.dataDrops = true
		_, err = r.u32()
	case 10: // memory.copy mem mem
		if err := g.zeroByte(r); err != nil {
			return err
		}
		if err := g.zeroByte(r); err != nil {
			return err
		}
		g.bulk(off, evBulkMem)
	case 11: // memory.fill mem
		if err := g.zeroByte(r); err != nil {
			return err
		}
		g.bulk(off, evBulkMem)
	case 12: // table.init elem table
		g.m.tableWrites = true
		if err := g.elemIdx(r); err != nil {
			return err
		}
		if err := g.tableIdx(r); err != nil {
			return err
		}
		g.bulk(off, evBulkTable)
	case 13: // elem.drop
		g.m.tableWrites = true
		err = g.elemIdx(r)
	case 14: // table.copy table table
		g.m.tableWrites = true
		if err := g.tableIdx(r); err != nil {
			return err
		}
		if err := g.tableIdx(r); err != nil {
			return err
		}
		g.bulk(off, evBulkTable)
	case 15: // table.grow
		g.m.tableWrites = true
		if err := g.tableIdx(r); err != nil {
			return err
		}
		g.scratch = true
		g.events = append(g.events, event{pos: off, end: r.pos, kind: evTableGrow})
	case 17: // table.fill
		g.m.tableWrites = true
		if err := g.tableIdx(r); err != nil {
			return err
		}
		g.bulk(off, evBulkTable)
	case 16: // table.size
		err = g.tableIdx(r)
	default:
		return r.unsupported(off, "unknown opcode 0xfc %d", sub)
	}
	return err
}

// elemIdx checks an element segment index: the rewrite may append a
// declarative segment, which must not become reachable.
func (g *codeGen) elemIdx(r *reader) error {
	_, err := r.index(uint64(g.m.elemCount), "element segment", "segments")
	return err
}

func (g *codeGen) bulk(off int, kind uint8) {
	g.scratch = true
	g.events = append(g.events, event{pos: off, kind: kind})
}

// SIMD immediates by sub-opcode.
const (
	simdNone    = iota + 1
	simdMemarg  // memarg
	simdLane    // lane byte
	simdMemLane // memarg, lane byte
	simd16      // 16 bytes (v128.const, i8x16.shuffle)
)

var simdImm = func() (t [256]uint8) {
	for i := range t {
		t[i] = simdNone
	}
	for i := 0x00; i <= 0x0b; i++ {
		t[i] = simdMemarg
	}
	t[0x5c], t[0x5d] = simdMemarg, simdMemarg
	for i := 0x54; i <= 0x5b; i++ {
		t[i] = simdMemLane
	}
	t[0x0c], t[0x0d] = simd16, simd16
	for i := 0x15; i <= 0x22; i++ {
		t[i] = simdLane
	}
	for _, i := range []int{0x9a, 0xa2, 0xa5, 0xa6, 0xaf, 0xb0, 0xb2, 0xb3, 0xb4, 0xbb,
		0xc2, 0xc5, 0xc6, 0xcf, 0xd0, 0xd2, 0xd3, 0xd4, 0xe2, 0xee} {
		t[i] = 0 // not assigned
	}
	return
}()

func (g *codeGen) simdOp(r *reader, off int) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	if sub > 0xff || simdImm[sub] == 0 {
		return r.unsupported(off, "unknown opcode 0xfd %d", sub)
	}
	switch simdImm[sub] {
	case simdMemarg:
		return g.memarg(r)
	case simdLane:
		return r.skip(1)
	case simdMemLane:
		if err := g.memarg(r); err != nil {
			return err
		}
		return r.skip(1)
	case simd16:
		return r.skip(16)
	}
	return nil
}
