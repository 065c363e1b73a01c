package runtime

import (
	"fmt"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// Extism vars (var_get/var_set) are served here with the rest of the kernel
// (kernel.go): the instrumenter moves the imports to buddy:kernel like the
// other kernel calls. (go-sdk's own var_get wrote the value at kernel offset
// 0, over the allocator's root, when the allocation for it failed.)
//
// Vars live in the call's state: they start empty and nothing survives the
// call, as with everything else in a skill. A plugin that keeps a running
// total in a var sees it restart at every call; the memory capability is the
// way to keep data.
const (
	maxVars     = 1024    // distinct names
	maxVarBytes = 1 << 20 // names plus values
)

// varStore is one call's vars.
type varStore struct {
	m     map[string][]byte
	bytes int // sum of len(name)+len(value)
}

// varGet is buddy:kernel var_get(name) -> value block, or 0 when absent.
func (st *callState) varGet(stack []uint64) {
	st.kernelEntry()
	name := st.readBlock("var_get", "name", stack[0])
	st.k.Free(stack[0]) // as go-sdk: the key block is the host's to free
	v, ok := st.vars.m[string(name)]
	if !ok || len(v) == 0 {
		stack[0] = 0 // absent (an empty value reads as absent, as in go-sdk)
		return
	}
	st.Charge(int64(len(v) >> ioByteShift))
	n := uint64(len(v))
	ptr := st.k.Alloc(n)
	if ptr == 0 {
		st.oom = true
		st.raise(&MemoryError{Detail: fmt.Sprintf("var_get: kernel memory cannot hold the %d-byte value of var %q", n, trim(string(name)))})
	}
	st.allocs++
	st.k.Write(ptr, v)
	stack[0] = ptr
}

// varSet is buddy:kernel var_set(name, value); a zero value deletes.
func (st *callState) varSet(stack []uint64) {
	st.kernelEntry()
	name := string(st.readBlock("var_set", "name", stack[0]))
	st.k.Free(stack[0]) // as go-sdk: the key and value blocks are freed
	old, had := st.vars.m[name]
	if stack[1] == 0 { // Extism: a zero value offset deletes the var
		if had {
			delete(st.vars.m, name)
			st.vars.bytes -= len(name) + len(old)
		}
		return
	}
	v := st.m.r.redact(st.readBlock("var_set", "value", stack[1]))
	st.k.Free(stack[1])
	size := st.vars.bytes + len(name) + len(v)
	if had {
		size -= len(name) + len(old)
	} else if len(st.vars.m) >= maxVars {
		st.raise(errs.New(ErrTooLarge, fmt.Sprintf("var_set %q: a call may set at most %d Extism vars", trim(name), maxVars)))
	}
	if size > maxVarBytes {
		st.raise(errs.New(ErrTooLarge, fmt.Sprintf("var_set %q: Extism vars would hold %d bytes, over the %d-byte cap per call", trim(name), size, maxVarBytes)))
	}
	if st.vars.m == nil {
		st.vars.m = map[string][]byte{}
	}
	st.vars.m[name] = v
	st.vars.bytes = size
}

// readBlock copies the kernel block at off for fn's argument what. A pointer
// that is not a block the kernel knows ends the call (the guest broke the
// memory contract); a block over the vars cap is refused before it is copied.
func (st *callState) readBlock(fn, what string, off uint64) []byte {
	st.Charge(st.allocs) // the length lookup (the wasm kernel walked its list)
	n := st.k.Length(off)
	if off == 0 || n == 0 {
		st.raise(&TrapError{Reason: fmt.Sprintf("%s: %s pointer %#x is not a kernel memory block", fn, what, off)})
	}
	if n > maxVarBytes {
		st.raise(errs.New(ErrTooLarge, fmt.Sprintf("%s: %s of %d bytes is over the %d-byte cap of Extism vars", fn, what, n, maxVarBytes)))
	}
	st.Charge(int64(n >> ioByteShift))
	return st.k.block(off)
}

// trim shortens a guest-chosen var name for an error message.
func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
