package runtime

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// kernelModel is the reference the Go kernel is checked against: live
// blocks with their contents, nothing else.
type kernelModel struct {
	live map[uint64][]byte // offset → contents
}

// FuzzKernel drives the Go kernel with arbitrary sequences of the operations
// a guest can ask for and checks, after each, what the Extism ABI promises:
// allocations are non-zero, 8-aligned, within the cap and never overlap a
// live block; a block reads back what was stored in it; length answers only
// for live block starts; stores land only inside live blocks; frees and
// resets forget; and nothing panics, whatever the offsets.
func FuzzKernel(f *testing.F) {
	f.Add([]byte{0, 10, 0, 200, 1, 0, 2, 0, 3, 0, 9})
	f.Add(bytes.Repeat([]byte{0, 64, 2, 1, 1, 0}, 40))
	f.Add([]byte{0, 255, 0, 255, 0, 255, 4, 0, 0, 1, 5, 0, 7})
	f.Fuzz(func(t *testing.T, ops []byte) {
		pool := newMemoryPool(8 << 20)
		var k kernel
		const limit = 1 << 20
		k.init(pool, limit)
		defer k.release()
		m := kernelModel{live: map[uint64][]byte{}}
		var order []uint64 // live offsets, in allocation order
		pick := func(b byte) (uint64, bool) {
			if len(order) == 0 {
				return 0, false
			}
			return order[int(b)%len(order)], true
		}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%8, ops[i+1]
			switch op {
			case 0: // alloc: sizes 0..~64 KiB
				n := uint64(arg) * uint64(arg)
				off := k.Alloc(n)
				if n == 0 {
					if off != 0 {
						t.Fatalf("alloc(0) = %#x, want 0", off)
					}
					continue
				}
				if off == 0 {
					continue // the cap; allowed
				}
				if off%8 != 0 || off+n > limit {
					t.Fatalf("alloc(%d) = %#x: unaligned or past the cap", n, off)
				}
				for o, c := range m.live {
					if off < o+uint64(len(c)) && o < off+n {
						t.Fatalf("alloc(%d) = %#x overlaps live block %#x+%d", n, off, o, len(c))
					}
				}
				if got, _ := k.Read(off, n); !bytes.Equal(got, make([]byte, n)) {
					t.Fatalf("fresh block %#x+%d is not zero", off, n)
				}
				m.live[off] = make([]byte, n)
				order = append(order, off)
			case 1: // free a live block, or a non-start
				if off, ok := pick(arg); ok {
					if arg%3 == 0 {
						k.Free(off + 1) // not a block start: ignored
						continue
					}
					k.Free(off)
					delete(m.live, off)
					for j, o := range order {
						if o == off {
							order = append(order[:j], order[j+1:]...)
							break
						}
					}
				}
			case 2: // store_u64 inside a live block
				if off, ok := pick(arg); ok && len(m.live[off]) >= 8 {
					at := uint64(arg) % (uint64(len(m.live[off])) - 7)
					v := uint64(arg)*0x0101010101010101 + at
					if !k.StoreU64(off+at, v) {
						t.Fatalf("store_u64 inside block %#x+%d at +%d refused", off, len(m.live[off]), at)
					}
					binary.LittleEndian.PutUint64(m.live[off][at:], v)
				}
			case 3: // store_u8 just past a live block: refused unless another block starts there
				if off, ok := pick(arg); ok {
					end := off + uint64(len(m.live[off]))
					next, isNext := m.live[end]
					if k.StoreU8(end, arg) {
						if !isNext || len(next) == 0 {
							t.Fatalf("store_u8 past block %#x+%d accepted", off, len(m.live[off]))
						}
						next[0] = arg // the next block starts there
					}
				}
			case 4: // reset
				k.Reset()
				m.live = map[uint64][]byte{}
				order = nil
			case 5: // loads and stores anywhere: no panic, stores only in live blocks
				at := uint64(arg) << (arg % 24)
				k.LoadU64(at)
				k.LoadU8(at)
				if k.StoreU8(at, 1) {
					found := false
					for o, c := range m.live {
						if at >= o && at < o+uint64(len(c)) {
							c[at-o] = 1
							found = true
						}
					}
					if !found {
						t.Fatalf("store_u8 at %#x accepted outside every live block", at)
					}
				}
			case 6: // length of starts and non-starts
				at := uint64(arg) * 8
				want := uint64(0)
				if c, ok := m.live[at]; ok {
					want = uint64(len(c))
				}
				if got := k.Length(at); got != want {
					t.Fatalf("length(%#x) = %d, want %d", at, got, want)
				}
			case 7: // every live block reads back its contents
				for o, c := range m.live {
					if k.Length(o) != uint64(len(c)) {
						t.Fatalf("length(%#x) = %d, want %d", o, k.Length(o), len(c))
					}
					if got, ok := k.Read(o, uint64(len(c))); !ok || !bytes.Equal(got, c) {
						t.Fatalf("block %#x+%d reads back wrong", o, len(c))
					}
				}
			}
		}
	})
}

// TestKernelReleaseZeroes: a kernel buffer goes back to the pool zeroed, so
// the next call's kernel starts from zeros (the pool's invariant).
func TestKernelReleaseZeroes(t *testing.T) {
	pool := newMemoryPool(8 << 20)
	for round := range 3 {
		var k kernel
		k.init(pool, 1<<20)
		off := k.Alloc(100 << 10) // grows past the first 64 KiB buffer
		if off == 0 {
			t.Fatal("alloc failed")
		}
		if got, _ := k.Read(0, uint64(len(k.mem))); !bytes.Equal(got, make([]byte, len(got))) {
			t.Fatalf("round %d: kernel memory not zero at the start", round)
		}
		for i := range k.mem {
			k.mem[i] = 0xAB
		}
		k.release()
	}
}

// TestKernelShrinkThenReleaseZeroes: memory a guest dirtied and then gave
// back (a freed tail, a reset) is zero when the buffer reaches the pool,
// whatever was written after: truncate clears it, so release clears only
// what is still in use.
func TestKernelShrinkThenReleaseZeroes(t *testing.T) {
	pool := newMemoryPool(8 << 20)
	var k kernel
	k.init(pool, 1<<20)
	dirty := func(off, n uint64) {
		b, ok := k.Read(off, n)
		if !ok {
			t.Fatalf("block %#x+%d outside memory", off, n)
		}
		for i := range b {
			b[i] = 0xAB
		}
	}
	a := k.Alloc(1000)
	dirty(a, 1000)
	tail := k.Alloc(40 << 10)
	dirty(tail, 40<<10)
	k.Free(tail)
	dirty(k.Alloc(10), 10) // the freed tail is given back, then reused in part
	k.Reset()
	dirty(k.Alloc(20), 20)
	c := uint64(cap(k.mem))
	k.release()
	buf := pool.take(c)
	if uint64(cap(buf)) != c {
		t.Fatalf("the pool gave a buffer of %d bytes, not the kernel's %d", cap(buf), c)
	}
	for i, x := range buf[:c] {
		if x != 0 {
			t.Fatalf("byte %d of the released buffer is %#x", i, x)
		}
	}
}

// TestKernelFreedTailReused: a freed block at the end of kernel memory gives
// its room back, so a guest can free a large block and allocate a larger one
// within the cap; a freed block in the middle is reused for a fitting size.
func TestKernelFreedTailReused(t *testing.T) {
	var k kernel
	k.init(newMemoryPool(64<<20), 16<<20)
	defer k.release()
	big := k.Alloc(10 << 20)
	if big == 0 {
		t.Fatal("alloc 10 MiB failed")
	}
	k.mem[big] = 0xAB
	k.Free(big)
	bigger := k.Alloc(12 << 20)
	if bigger == 0 {
		t.Fatal("alloc 12 MiB after freeing 10 MiB failed under a 16 MiB cap")
	}
	if got, _ := k.Read(bigger, 12<<20); !bytes.Equal(got[:16], make([]byte, 16)) || got[big-bigger] != 0 {
		t.Fatal("the reused room is not zero")
	}
	a, b := k.Alloc(100), k.Alloc(100)
	k.Free(a)
	if c := k.Alloc(90); c != a {
		t.Fatalf("alloc(90) = %#x, want the freed block %#x reused", c, a)
	}
	if k.Length(b) != 100 {
		t.Fatalf("length(b) = %d", k.Length(b))
	}
}

// TestKernelLazyInput: the input stays out of kernel memory until the
// kernel is touched, then becomes the first block, where Extism puts it;
// input_read's copy needs no kernel memory at all.
func TestKernelLazyInput(t *testing.T) {
	pool := newMemoryPool(8 << 20)
	touches := []struct {
		name  string
		touch func(k *kernel)
	}{
		{"alloc", func(k *kernel) { k.Alloc(5) }},
		{"load_u64", func(k *kernel) { k.LoadU64(kernelBase) }},
		{"load_u8", func(k *kernel) { k.LoadU8(kernelBase) }},
		{"length", func(k *kernel) { k.Length(kernelBase) }},
		{"read", func(k *kernel) { k.Read(kernelBase, 1) }},
		{"store", func(k *kernel) { k.StoreU8(kernelBase, 'x') }},
		{"free", func(k *kernel) { k.Free(kernelBase + 64) }},
	}
	for _, tt := range touches {
		t.Run(tt.name, func(t *testing.T) {
			var k kernel
			k.init(pool, 1<<20)
			defer k.release()
			k.Reset()
			k.setInput([]byte("the input"))
			dst := make([]byte, 9)
			if !k.readInput(dst) || string(dst) != "the input" || len(k.mem) != 0 || k.buf.buf != nil {
				t.Fatalf("readInput: %q, kernel memory %d bytes (taken: %v)", dst, len(k.mem), k.buf.buf != nil)
			}
			if k.readInput(make([]byte, 10)) {
				t.Fatal("readInput of more than the input")
			}
			tt.touch(&k)
			if k.input != kernelBase || k.inputLen != 9 || k.Length(kernelBase) != 9 {
				t.Fatalf("input at %d (%d bytes), block %d bytes; want at %d", k.input, k.inputLen, k.Length(kernelBase), kernelBase)
			}
			if b, _ := k.Read(kernelBase, 9); string(b) != "the input" && tt.name != "store" {
				t.Fatalf("input block = %q", b)
			}
			if !k.readInput(dst) || (string(dst) != "the input" && tt.name != "store") {
				t.Fatalf("readInput after: %q", dst)
			}
		})
	}
	// An empty input takes nothing, and the first block is the guest's.
	var k kernel
	k.init(pool, 1<<20)
	defer k.release()
	k.Reset()
	k.setInput(nil)
	if off := k.Alloc(4); off != kernelBase || k.input != 0 || k.inputLen != 0 {
		t.Fatalf("first alloc at %d, input at %d (%d bytes)", off, k.input, k.inputLen)
	}
}
