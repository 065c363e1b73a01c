package runtime

import "sort"

// The Extism kernel keeps its allocator's metadata (a root record and a header
// before every block) in the same memory the guest writes through store_u8 and
// store_u64, and go-sdk's store_u64 writes anywhere in that memory. A guest
// that rewrites a block header can make the kernel's block walk loop forever —
// in unmetered kernel code that nothing can preempt, stalling the call's
// goroutine and every garbage collection of the process.
//
// So the runtime wraps the guest's kernel writes: a store must fall inside a
// block the guest allocated in this call and has not freed. Headers lie
// outside every block's data, so the allocator's metadata stays out of reach.
//
// blockTable is that shadow list of live guest blocks, sorted by start.
type blockTable struct {
	starts []uint64
	sizes  []uint64
	last   int // index of the last hit: stores are mostly sequential
}

// headerSize bounds the Extism kernel's MemoryBlock header (12 bytes on
// wasm32); when a new block is allocated, entries overlapping its header and
// data are stale (the kernel reused memory freed behind our back, e.g. by
// go-sdk's log functions).
const headerSize = 16

// add records a fresh block [start, start+size) and drops stale entries.
func (t *blockTable) add(start, size uint64) {
	if start == 0 || size == 0 {
		return
	}
	t.invalidate(start-min(start, headerSize), start+size)
	i := sort.Search(len(t.starts), func(i int) bool { return t.starts[i] >= start })
	t.starts = append(t.starts, 0)
	t.sizes = append(t.sizes, 0)
	copy(t.starts[i+1:], t.starts[i:])
	copy(t.sizes[i+1:], t.sizes[i:])
	t.starts[i], t.sizes[i] = start, size
	t.last = i
}

// remove forgets the block starting at start, if known.
func (t *blockTable) remove(start uint64) {
	i := sort.Search(len(t.starts), func(i int) bool { return t.starts[i] >= start })
	if i < len(t.starts) && t.starts[i] == start {
		t.starts = append(t.starts[:i], t.starts[i+1:]...)
		t.sizes = append(t.sizes[:i], t.sizes[i+1:]...)
		t.last = 0
	}
}

// invalidate drops every entry overlapping [lo, hi).
func (t *blockTable) invalidate(lo, hi uint64) {
	j := 0
	for i := range t.starts {
		if t.starts[i] < hi && t.starts[i]+t.sizes[i] > lo {
			continue
		}
		t.starts[j], t.sizes[j] = t.starts[i], t.sizes[i]
		j++
	}
	t.starts, t.sizes = t.starts[:j], t.sizes[:j]
	t.last = 0
}

// reset forgets everything (the guest called the kernel's reset).
func (t *blockTable) reset() {
	t.starts, t.sizes, t.last = t.starts[:0], t.sizes[:0], 0
}

// contains reports whether [p, p+n) lies inside one live block.
func (t *blockTable) contains(p, n uint64) bool {
	if p+n < p {
		return false
	}
	if l := t.last; l < len(t.starts) && t.starts[l] <= p && p+n <= t.starts[l]+t.sizes[l] {
		return true
	}
	i := sort.Search(len(t.starts), func(i int) bool { return t.starts[i] > p }) - 1
	if i < 0 {
		return false
	}
	if p+n <= t.starts[i]+t.sizes[i] {
		t.last = i
		return true
	}
	return false
}
