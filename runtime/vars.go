package runtime

import (
	"context"
	"fmt"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero/api"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/errs"
)

// Extism vars (var_get/var_set) are served here, not by go-sdk: the
// instrumenter moves the imports to buddy:kernel like the other kernel calls.
// go-sdk's own var_get writes the value at kernel offset 0 — over the
// allocator's root — when the allocation for it fails (RUNTIME.md §3.3), and
// frees the guest's key and value blocks behind its back (the go-pdk frees
// them too).
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

// varFunctions are the buddy:kernel var_get and var_set.
func (m *Module) varFunctions() []extism.HostFunction {
	get := extism.NewHostFunctionWithStack("var_get", func(ctx context.Context, _ *extism.CurrentPlugin, stack []uint64) {
		st := kernelEntry(ctx)
		name := st.readBlock(ctx, "var_get", "name", stack[0])
		v, ok := st.vars.m[string(name)]
		if !ok || len(v) == 0 {
			stack[0] = 0 // absent (an empty value reads as absent, as in go-sdk)
			return
		}
		st.Charge(int64(len(v) >> ioByteShift))
		n := uint64(len(v))
		stack[0] = n
		kernelCall(ctx, st, kAlloc, stack)
		ptr := stack[0]
		if ptr == 0 {
			st.oom = true
			st.raise(&MemoryError{Detail: fmt.Sprintf("var_get: kernel memory cannot hold the %d-byte value of var %q", n, trim(string(name)))})
		}
		st.allocs++
		st.Allocated(ptr, n)
		if !st.kernelMem(ctx).Write(uint32(ptr), v) {
			st.raise(&MemoryError{Detail: fmt.Sprintf("var_get: kernel block %#x+%d is outside memory", ptr, n)})
		}
		stack[0] = ptr
	}, []api.ValueType{i64}, []api.ValueType{i64})
	get.SetNamespace(hostfns.KernelNamespace)

	set := extism.NewHostFunctionWithStack("var_set", func(ctx context.Context, _ *extism.CurrentPlugin, stack []uint64) {
		st := kernelEntry(ctx)
		name := string(st.readBlock(ctx, "var_set", "name", stack[0]))
		old, had := st.vars.m[name]
		if stack[1] == 0 { // Extism: a zero value offset deletes the var
			if had {
				delete(st.vars.m, name)
				st.vars.bytes -= len(name) + len(old)
			}
			return
		}
		v := st.readBlock(ctx, "var_set", "value", stack[1])
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
	}, []api.ValueType{i64, i64}, nil)
	set.SetNamespace(hostfns.KernelNamespace)
	return []extism.HostFunction{get, set}
}

// readBlock copies the kernel block at off for fn's argument what. A pointer
// that is not a block the kernel knows ends the call (the guest broke the
// memory contract); a block over the vars cap is refused before it is copied.
func (st *callState) readBlock(ctx context.Context, fn, what string, off uint64) []byte {
	st.Charge(st.allocs) // the length lookup walks the block list
	stack := [1]uint64{off}
	if off != 0 {
		kernelCall(ctx, st, kLength, stack[:])
	}
	n := stack[0]
	if off == 0 || n == 0 {
		st.raise(&TrapError{Reason: fmt.Sprintf("%s: %s pointer %#x is not a kernel memory block", fn, what, off)})
	}
	if n > maxVarBytes {
		st.raise(errs.New(ErrTooLarge, fmt.Sprintf("%s: %s of %d bytes is over the %d-byte cap of Extism vars", fn, what, n, maxVarBytes)))
	}
	st.Charge(int64(n >> ioByteShift))
	b, ok := st.kernelMem(ctx).Read(uint32(off), uint32(n))
	if !ok || off > 1<<32-1 {
		st.raise(&TrapError{Reason: fmt.Sprintf("%s: %s block %#x+%d is outside kernel memory", fn, what, off, n)})
	}
	return append([]byte(nil), b...)
}

// trim shortens a guest-chosen var name for an error message.
func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
