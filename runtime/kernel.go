package runtime

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// The Extism kernel, served by Go.
//
// Extism's ABI gives a guest no pointers into the host: it allocates blocks
// in a "kernel memory" and passes their offsets (i64) to the host, which
// reads and writes them; the input, the output and the error are blocks too.
// go-sdk implements that memory as a second wasm instance (the kernel,
// extism-runtime.wasm) with its own 1 MiB linear memory per call, its
// allocator's metadata inside that memory, and every load, store and
// allocation a call into it.
//
// buddy keeps the same ABI, function for function (docs/HOST_ABI.md), over a
// host-side buffer owned by the call: offsets index the buffer, the blocks'
// bookkeeping lives in Go, out of every guest's reach, and nothing is
// instantiated, looked up or zeroed beyond the bytes a call used. The
// semantics follow the Extism kernel as go-sdk v1.7.1 serves it (checked
// against it by runtime/kernel_abi_test.go):
//
//   - alloc(0) is 0; any other block starts at a non-zero offset, 8-aligned.
//   - length(off) is the block's length when off starts a live block, else 0;
//     length_unsafe is the same (the kernel's reads a header; there is none).
//   - free(off) frees a live block starting at off and ignores anything else.
//   - load_u8/load_u64 read anywhere in kernel memory (a read past its end
//     traps); input_load_* read relative to the input block.
//   - reset frees every block and forgets the input, output and error.
//   - error_set(0) clears the error; output_set may name any range within
//     what the blocks reach (beyond it, it traps).
//
// Allocation is a bump over the buffer, reusing a freed block of a fitting
// size (at most about twice the request) and giving back freed blocks at the
// end; the buffer grows by doubling within the cap. Fuel is charged as the
// wasm kernel's list walk was (hostmods.go), so it bounds this work too.
//
// buddy's one deliberate difference: a guest store must fall inside a live
// block (Extism's stores write anywhere). The kernel's metadata is no longer
// in guest-writable memory, but a store outside every block is still a guest
// bug that would silently corrupt the input or a host result; it traps.
type kernel struct {
	mem   []byte       // kernel memory (buf's bytes): len is what blocks reach
	buf   pooledMemory // from the pool, and back to it zeroed up to what was used
	limit uint64       // most bytes kernel memory may hold (the skill's memory cap)

	blocks []kblock // by offset
	free   int      // how many blocks are free
	last   int      // the block a store hit last: stores are sequential

	input, inputLen   uint64
	output, outputLen uint64
	errOff            uint64

	// pending is the call's input until kernel memory is first touched:
	// then it becomes the first block, where Extism puts it (kernelBase).
	// A guest that takes its input with input_read and answers with
	// output_write (skillkit's) never makes the kernel take memory.
	pending []byte
}

// kblock is one allocation: [off, off+size) reserved, the first n in use.
type kblock struct {
	off, size, n uint64
	free         bool
}

// kernelBase is the first offset handed out: 0 means "no block".
const kernelBase = 8

// kernelMinBytes is the smallest buffer a kernel takes from the pool.
const kernelMinBytes = 64 << 10

// init prepares an unused kernel for a call.
func (k *kernel) init(pool *memoryPool, limit uint64) {
	*k = kernel{buf: pooledMemory{pool: pool, max: limit, min: kernelMinBytes}, limit: limit}
}

// release hands the buffer back to the pool (zeroed up to what was used).
func (k *kernel) release() {
	k.buf.Free()
	k.mem, k.blocks = nil, nil
}

// Size is the size of kernel memory, in bytes (memory_bytes): the memory cap,
// which loads may read anywhere in.
func (k *kernel) Size() uint64 { return k.limit }

// grow makes mem n bytes long (the new bytes zero), within the limit.
func (k *kernel) grow(n uint64) bool {
	if n > k.limit {
		return false
	}
	k.mem = k.buf.Reallocate(n)
	return true
}

// shrink makes mem n bytes long, clearing what it drops.
func (k *kernel) shrink(n uint64) { k.mem = k.buf.truncate(n) }

// Alloc allocates a block of n bytes, zeroed; 0 when n is 0 or the memory
// cap is reached.
func (k *kernel) Alloc(n uint64) uint64 {
	k.ready()
	if n == 0 {
		return 0
	}
	if k.free > 0 {
		for i := range k.blocks {
			b := &k.blocks[i]
			if b.free && b.size >= n && b.size <= 2*n+64 {
				b.free, b.n = false, n
				k.free--
				clear(k.mem[b.off : b.off+b.size])
				return b.off
			}
		}
	}
	// Freed blocks at the end of memory give their room back, so that a
	// guest that frees a large block (a file it read) can allocate a larger
	// one (its answer) within the cap.
	for l := len(k.blocks); l > 0 && k.blocks[l-1].free; l-- {
		k.shrink(k.blocks[l-1].off)
		k.blocks = k.blocks[:l-1]
		k.free--
	}
	off := max(uint64(len(k.mem)+7)&^7, kernelBase)
	size := (n + 7) &^ 7
	if size < n || off+size < off || !k.grow(off+size) {
		return 0
	}
	k.blocks = append(k.blocks, kblock{off: off, size: size, n: n})
	return off
}

// find returns the index of the block starting at off, or -1.
func (k *kernel) find(off uint64) int {
	i := sort.Search(len(k.blocks), func(i int) bool { return k.blocks[i].off >= off })
	if i < len(k.blocks) && k.blocks[i].off == off {
		return i
	}
	return -1
}

// Length is the length of the live block starting at off, else 0.
func (k *kernel) Length(off uint64) uint64 {
	k.ready()
	if i := k.find(off); i >= 0 && !k.blocks[i].free {
		return k.blocks[i].n
	}
	return 0
}

// Free frees the live block starting at off; anything else is ignored.
func (k *kernel) Free(off uint64) {
	k.ready()
	if i := k.find(off); i >= 0 && !k.blocks[i].free {
		k.blocks[i].free = true
		k.free++
	}
}

// Reset frees every block and forgets the input, output and error.
func (k *kernel) Reset() {
	k.shrink(0)
	k.blocks = k.blocks[:0]
	k.free, k.last = 0, 0
	k.input, k.inputLen, k.output, k.outputLen, k.errOff = 0, 0, 0, 0, 0
	k.pending = nil
}

// setInput makes input the call's input, put into kernel memory when it is
// first touched (ready). Reset comes first.
func (k *kernel) setInput(input []byte) {
	k.inputLen = uint64(len(input))
	if len(input) > 0 {
		k.pending = input
	}
}

// ready puts a pending input into kernel memory, as the first block: every
// kernel access starts with it, so that no guest sees the difference. The
// input is at most a quarter of the memory cap (CallExport), so the first
// block always fits.
func (k *kernel) ready() {
	if k.pending == nil {
		return
	}
	in := k.pending
	k.pending = nil
	ptr := k.Alloc(uint64(len(in)))
	if ptr == 0 {
		panic(&TrapError{Reason: fmt.Sprintf("kernel memory cannot hold the %d-byte input", len(in))})
	}
	copy(k.mem[ptr:], in)
	k.input = ptr
}

// readInput copies n bytes of the input into dst: from the pending input,
// or from the input block (input_set may have moved it).
func (k *kernel) readInput(dst []byte) bool {
	if uint64(len(dst)) > k.inputLen {
		return false
	}
	if k.pending != nil {
		copy(dst, k.pending)
		return true
	}
	b, ok := k.Read(k.input, uint64(len(dst)))
	copy(dst, b)
	return ok
}

// Read returns a view of the n bytes at off.
func (k *kernel) Read(off, n uint64) ([]byte, bool) {
	if n > 0 {
		k.ready()
	}
	end := off + n
	if end < off || end > uint64(len(k.mem)) {
		return nil, false
	}
	return k.mem[off:end:end], true
}

// Write copies b to off.
func (k *kernel) Write(off uint64, b []byte) bool {
	if len(b) > 0 {
		k.ready()
	}
	end := off + uint64(len(b))
	if end < off || end > uint64(len(k.mem)) {
		return false
	}
	copy(k.mem[off:end], b)
	return true
}

// LoadU64 reads the 8 bytes at off. Kernel memory spans the whole memory
// cap: past what blocks reach it reads as zeros (as the wasm kernel's
// zeroed pages did), and past the cap a load traps.
func (k *kernel) LoadU64(off uint64) (uint64, bool) {
	k.ready()
	if off > k.limit || k.limit-off < 8 {
		return 0, false
	}
	if off+8 <= uint64(len(k.mem)) {
		return binary.LittleEndian.Uint64(k.mem[off:]), true
	}
	var b [8]byte
	if off < uint64(len(k.mem)) {
		copy(b[:], k.mem[off:])
	}
	return binary.LittleEndian.Uint64(b[:]), true
}

// LoadU8 reads the byte at off (zero past what blocks reach).
func (k *kernel) LoadU8(off uint64) (byte, bool) {
	k.ready()
	if off >= k.limit {
		return 0, false
	}
	if off < uint64(len(k.mem)) {
		return k.mem[off], true
	}
	return 0, true
}

// inBlock reports whether [off, off+n) lies inside the used part of one live
// block: where a guest may store.
func (k *kernel) inBlock(off, n uint64) bool {
	k.ready()
	if off+n < off {
		return false
	}
	if l := k.last; l < len(k.blocks) {
		if b := &k.blocks[l]; !b.free && b.off <= off && off+n <= b.off+b.n {
			return true
		}
	}
	i := sort.Search(len(k.blocks), func(i int) bool { return k.blocks[i].off > off }) - 1
	if i < 0 {
		return false
	}
	if b := &k.blocks[i]; !b.free && off+n <= b.off+b.n {
		k.last = i
		return true
	}
	return false
}

// StoreU64 writes v at off, inside a live block.
func (k *kernel) StoreU64(off, v uint64) bool {
	if !k.inBlock(off, 8) {
		return false
	}
	binary.LittleEndian.PutUint64(k.mem[off:], v)
	return true
}

// StoreU8 writes v at off, inside a live block.
func (k *kernel) StoreU8(off uint64, v byte) bool {
	if !k.inBlock(off, 1) {
		return false
	}
	k.mem[off] = v
	return true
}

// block copies the block at off: its length if it is a live block, else
// nothing (as go-sdk reads the error).
func (k *kernel) block(off uint64) []byte {
	n := k.Length(off)
	if n == 0 {
		return nil
	}
	b, _ := k.Read(off, n)
	return append([]byte(nil), b...)
}
