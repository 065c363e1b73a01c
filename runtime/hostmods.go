package runtime

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/runtime/internal/fuel"
)

// The host modules every skill's wazero runtime links: buddy:fuel (the
// instrumentation's refuel, settle and oom), buddy:kernel (the Extism kernel
// functions the instrumenter moves there: kernel.go serves them), what is left
// of extism:host/env (config_get, get_log_level, log_*), WASI when the module
// uses it, and the skill's granted buddy:host/v1 functions.

// hostFunc is one Go function a module may import.
type hostFunc struct {
	ns, name        string
	params, results []api.ValueType
	fn              api.GoModuleFunc
}

// instantiateHost builds the host modules of one skill's runtime.
func (m *Module) instantiateHost(ctx context.Context, rt wazero.Runtime, granted []hostfns.Func) error {
	funcs := m.kernelFunctions()
	for _, f := range granted {
		var fn api.GoModuleFunc
		if body := f.GuestFn; body != nil {
			// A function working in the guest's own memory gets wazero's
			// view of it: every range it reads or writes is bounds-checked.
			fn = func(ctx context.Context, mod api.Module, stack []uint64) {
				st := stateFrom(ctx)
				st.pure(f.Namespace, f.Name)
				mem := mod.Memory()
				if mem == nil {
					panic(&TrapError{Reason: f.Name + ": the module has no memory"})
				}
				body(ctx, &st.k, mem, stack)
			}
		} else {
			body := f.Fn
			fn = func(ctx context.Context, _ api.Module, stack []uint64) {
				st := stateFrom(ctx)
				st.pure(f.Namespace, f.Name)
				body(ctx, &st.k, stack)
			}
		}
		funcs = append(funcs, hostFunc{ns: f.Namespace, name: f.Name, params: f.Params, results: f.Results, fn: fn})
	}
	var order []string
	byNS := map[string][]hostFunc{}
	for _, f := range funcs {
		if _, ok := byNS[f.ns]; !ok {
			order = append(order, f.ns)
		}
		byNS[f.ns] = append(byNS[f.ns], f)
	}
	for _, ns := range order {
		b := rt.NewHostModuleBuilder(ns)
		for _, f := range byNS[ns] {
			b.NewFunctionBuilder().WithGoModuleFunction(f.fn, f.params, f.results).Export(f.name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("host module %s: %w", ns, err)
		}
	}
	if m.info.WASI {
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
			return fmt.Errorf("host module %s: %w", wasiNS, err)
		}
	}
	return nil
}

// Fuel charged for the kernel calls (the same schedule as when a wasm kernel
// served them, so that fuel counts did not move with the change).
const (
	kernelCallCost  = 50
	kernelLightCost = 4  // a store, an offset, a length: a round trip through Go
	kernelLoadCost  = 2  // load_u64, input_load_u64
	kernelByteCost  = 10 // bytes per unit for alloc sizes
)

// kernelFunctions are buddy:fuel, buddy:kernel and extism:host/env.
func (m *Module) kernelFunctions() []hostFunc {
	fn := func(ns, name string, body api.GoModuleFunc, params, results []api.ValueType) hostFunc {
		return hostFunc{ns: ns, name: name, params: params, results: results, fn: body}
	}
	k := func(name string, body func(st *callState, stack []uint64)) hostFunc {
		s := kernelImports[name]
		ns := kernelNS
		if wrappedKernel[name] {
			ns = hostfns.KernelNamespace
		}
		lazy := name == "input_length" // the only one that needs no kernel memory
		return fn(ns, name, func(ctx context.Context, _ api.Module, stack []uint64) {
			st := stateFrom(ctx)
			st.pure(kernelNS, name)
			if !lazy {
				st.k.ready() // the input, into kernel memory (kernel.setInput)
			}
			body(st, stack)
		}, s.params, s.results)
	}
	// get serves a kernel function that answers one of the kernel's offsets
	// or lengths.
	get := func(name string, v func(*kernel) uint64) hostFunc {
		return k(name, func(st *callState, stack []uint64) {
			st.kernelLight()
			stack[0] = v(&st.k)
		})
	}
	allocCap := uint64(m.manifest.Resources.MemoryMB) << 20
	maxOut := uint64(m.r.opts.MaxOutputBytes)
	trap := func(format string, args ...any) { panic(&TrapError{Reason: fmt.Sprintf(format, args...)}) }
	out := []hostFunc{
		fn(fuel.Module, fuel.RefuelName, func(ctx context.Context, _ api.Module, stack []uint64) {
			stack[0] = uint64(stateFrom(ctx).refuel(int64(stack[0])))
		}, []api.ValueType{i64}, []api.ValueType{i64}),
		fn(fuel.Module, fuel.SettleName, func(ctx context.Context, _ api.Module, stack []uint64) {
			stateFrom(ctx).settle(int64(stack[0]))
		}, []api.ValueType{i64}, nil),
		fn(fuel.Module, fuel.OOMName, func(ctx context.Context, _ api.Module, _ []uint64) {
			st := stateFrom(ctx)
			st.oom = true
			st.pure(fuel.Module, fuel.OOMName) // an initialiser that hits the cap is not snapshotted
		}, nil, nil),

		k("alloc", func(st *callState, stack []uint64) {
			st.kernelEntry()
			n := stack[0]
			if n > allocCap {
				st.oom = true
				stack[0] = 0
				return
			}
			// The wasm kernel walked its block list: the charge still
			// counts the blocks and the bytes.
			st.allocs++
			st.Charge(st.allocs + int64(n/kernelByteCost))
			ptr := st.k.Alloc(n)
			if ptr == 0 && n > 0 {
				st.oom = true
			}
			stack[0] = ptr
		}),
		k("free", func(st *callState, stack []uint64) {
			st.kernelEntry()
			st.Charge(st.allocs)
			st.k.Free(stack[0])
		}),
		k("length", func(st *callState, stack []uint64) {
			st.kernelEntry()
			st.Charge(st.allocs)
			stack[0] = st.k.Length(stack[0])
		}),
		k("length_unsafe", func(st *callState, stack []uint64) {
			st.kernelEntry()
			st.Charge(st.allocs)
			stack[0] = st.k.Length(stack[0])
		}),
		k("reset", func(st *callState, _ []uint64) {
			st.kernelEntry()
			st.k.Reset()
		}),
		k("store_u8", func(st *callState, stack []uint64) {
			st.kernelLight()
			if !st.k.StoreU8(stack[0], byte(stack[1])) {
				trap("store_u8 at %#x: outside every block (a store must fall inside a live kernel block)", stack[0])
			}
		}),
		k("store_u64", func(st *callState, stack []uint64) {
			st.kernelLight()
			if !st.k.StoreU64(stack[0], stack[1]) {
				trap("store_u64 at %#x: outside every block (a store must fall inside a live kernel block)", stack[0])
			}
		}),
		k("load_u8", func(st *callState, stack []uint64) {
			st.kernelLight()
			v, ok := st.k.LoadU8(stack[0])
			if !ok {
				trap("load_u8 at %#x: outside kernel memory", stack[0])
			}
			stack[0] = uint64(v)
		}),
		k("load_u64", func(st *callState, stack []uint64) {
			st.kernelLoad()
			v, ok := st.k.LoadU64(stack[0])
			if !ok {
				trap("load_u64 at %#x: outside kernel memory", stack[0])
			}
			stack[0] = v
		}),
		k("input_load_u8", func(st *callState, stack []uint64) {
			st.kernelLight()
			v, ok := st.k.LoadU8(st.k.input + stack[0])
			if !ok {
				trap("input_load_u8 at %#x: outside kernel memory", stack[0])
			}
			stack[0] = uint64(v)
		}),
		k("input_load_u64", func(st *callState, stack []uint64) {
			st.kernelLoad()
			v, ok := st.k.LoadU64(st.k.input + stack[0])
			if !ok {
				trap("input_load_u64 at %#x: outside kernel memory", stack[0])
			}
			stack[0] = v
		}),
		k("input_set", func(st *callState, stack []uint64) {
			st.kernelLight()
			st.k.input, st.k.inputLen = stack[0], stack[1]
		}),
		get("input_length", func(k *kernel) uint64 { return k.inputLen }),
		get("input_offset", func(k *kernel) uint64 { return k.input }),
		k("output_set", func(st *callState, stack []uint64) {
			st.kernelEntry()
			off, n := stack[0], stack[1]
			if n > maxOut {
				panic(errs.New(ErrTooLarge, fmt.Sprintf("output of %d bytes is over the %d-byte cap", n, maxOut)))
			}
			if _, ok := st.k.Read(off, n); !ok {
				trap("output_set: block %#x+%d is outside kernel memory", off, n)
			}
			st.k.output, st.k.outputLen = off, n
			st.guestOut = nil
		}),
		get("output_length", func(k *kernel) uint64 { return k.outputLen }),
		get("output_offset", func(k *kernel) uint64 { return k.output }),
		k("error_set", func(st *callState, stack []uint64) {
			st.kernelLight()
			st.errorSet = true
			st.k.errOff = stack[0]
		}),
		get("error_get", func(k *kernel) uint64 { return k.errOff }),
		k("memory_bytes", func(st *callState, stack []uint64) {
			st.kernelLight()
			stack[0] = st.k.Size()
		}),
		k("var_get", func(st *callState, stack []uint64) { st.varGet(stack) }),
		k("var_set", func(st *callState, stack []uint64) { st.varSet(stack) }),

		// What go-sdk's extism:host/env served besides the kernel. The
		// instrumentation charges each call a static 100; the block they
		// read is charged here as go-sdk's listener did.
		k("config_get", func(st *callState, stack []uint64) {
			// buddy passes no Extism config: every key is absent.
			st.proxyEntry(stack[0])
			stack[0] = 0
		}),
		k("get_log_level", func(st *callState, stack []uint64) {
			st.checkDeadline()
			st.Charge(1)
			stack[0] = api.EncodeI32(int32(LevelInfo))
		}),
	}
	// Bulk copies between the kernel and the guest's own memory
	// (buddy:host/v1, always linked): what the Extism ABI does 8 bytes per
	// host call, in one. Charged as a light kernel call (kernelLightCost,
	// like input_length) plus one unit per 64 bytes.
	out = append(out,
		fn(hostfns.Namespace, hostfns.FnKernelRead, func(ctx context.Context, mod api.Module, stack []uint64) {
			src, dst, n := stack[0], api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
			st := guestIO(ctx, hostfns.FnKernelRead, n)
			if n == 0 {
				return
			}
			b, ok := st.k.Read(src, uint64(n))
			if !ok {
				trap("kernel_read: kernel range %#x+%d is outside kernel memory", src, n)
			}
			if !guestMemory(mod, hostfns.FnKernelRead).Write(dst, b) {
				trap("kernel_read: guest range %#x+%d is outside the guest's memory", dst, n)
			}
		}, guestCopySig.params, guestCopySig.results),
		fn(hostfns.Namespace, hostfns.FnKernelWrite, func(ctx context.Context, mod api.Module, stack []uint64) {
			dst, src, n := stack[0], api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
			st := guestIO(ctx, hostfns.FnKernelWrite, n)
			b, ok := guestMemory(mod, hostfns.FnKernelWrite).Read(src, n)
			if !ok {
				trap("kernel_write: guest range %#x+%d is outside the guest's memory", src, n)
			}
			if n == 0 {
				return
			}
			if !st.k.inBlock(dst, uint64(n)) {
				trap("kernel_write at %#x+%d: outside every block (a store must fall inside a live kernel block)", dst, n)
			}
			copy(st.k.mem[dst:dst+uint64(n)], b)
		}, guestCopySig.params, guestCopySig.results),
		fn(hostfns.Namespace, hostfns.FnInputRead, func(ctx context.Context, mod api.Module, stack []uint64) {
			dst, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
			st := guestIO(ctx, hostfns.FnInputRead, n)
			if uint64(n) > st.k.inputLen {
				trap("input_read of %d bytes: the input is %d", n, st.k.inputLen)
			}
			if n == 0 {
				return
			}
			b, ok := guestMemory(mod, hostfns.FnInputRead).Read(dst, n)
			if !ok {
				trap("input_read: guest range %#x+%d is outside the guest's memory", dst, n)
			}
			if !st.k.readInput(b) {
				trap("input_read: the input block %#x+%d is outside kernel memory", st.k.input, n)
			}
		}, guestRangeSig.params, guestRangeSig.results),
		fn(hostfns.Namespace, hostfns.FnOutputWrite, func(ctx context.Context, mod api.Module, stack []uint64) {
			src, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
			st := guestIO(ctx, hostfns.FnOutputWrite, n)
			if uint64(n) > maxOut {
				panic(errs.New(ErrTooLarge, fmt.Sprintf("output of %d bytes is over the %d-byte cap", n, maxOut)))
			}
			b, ok := guestMemory(mod, hostfns.FnOutputWrite).Read(src, n)
			if !ok {
				trap("output_write: guest range %#x+%d is outside the guest's memory", src, n)
			}
			out := make([]byte, n) // make then copy: not zeroed first
			copy(out, b)
			st.guestOut = out
			st.k.output, st.k.outputLen = 0, uint64(n)
		}, guestRangeSig.params, guestRangeSig.results),
	)
	for name, level := range map[string]Level{"log_trace": LevelTrace, "log_debug": LevelDebug,
		"log_info": LevelInfo, "log_warn": LevelWarn, "log_error": LevelError} {
		out = append(out, k(name, func(st *callState, stack []uint64) {
			st.proxyEntry(stack[0])
			// As go-sdk with its level at info: lower levels are dropped;
			// either way the block is freed.
			if level >= LevelInfo {
				if msg := st.k.block(stack[0]); msg != nil {
					st.Log(int32(level), string(msg))
				}
			}
			st.k.Free(stack[0])
		}))
	}
	return out
}

// guestCopySig is the signature of kernel_read and kernel_write.
var guestCopySig = sig{[]api.ValueType{i64, i32, i32}, nil}

// guestRangeSig is the signature of output_write and input_read: a range
// of the guest's memory.
var guestRangeSig = sig{[]api.ValueType{i32, i32}, nil}

// guestMemory is the calling module's memory; a module without one has
// nothing to copy to or from, and the trap names the function called.
func guestMemory(mod api.Module, name string) api.Memory {
	if mem := mod.Memory(); mem != nil {
		return mem
	}
	panic(&TrapError{Reason: name + ": the module has no memory"})
}

// guestIO is the start of the runtime's functions that copy n bytes between
// the guest's memory and the kernel, the input or the output: the call's
// state, the snapshot rule, the deadline and the fuel.
func guestIO(ctx context.Context, name string, n uint32) *callState {
	st := stateFrom(ctx)
	st.pure(hostfns.Namespace, name)
	st.kernelCopy(n)
	return st
}

// kernelCopy is the start of kernel_read and kernel_write.
func (st *callState) kernelCopy(n uint32) {
	st.checkDeadline()
	st.Charge(kernelLightCost + int64(n>>ioByteShift))
}

// kernelEntry is the start of the kernel calls that walk or change blocks:
// the deadline is checked, since kernel work is not metered by the
// instrumentation.
func (st *callState) kernelEntry() {
	st.checkDeadline()
	st.Charge(kernelCallCost)
}

// kernelLoad is the start of load_u64 and input_load_u64.
func (st *callState) kernelLoad() {
	st.checkDeadline()
	st.Charge(kernelLoadCost)
}

// kernelLight is the start of the constant-time kernel calls: the deadline
// is checked at each, so a loop of them ends at the deadline however little
// fuel it burns.
func (st *callState) kernelLight() {
	st.checkDeadline()
	st.Charge(kernelLightCost)
}

// proxyEntry charges config_get and log_*: a block lookup and its bytes.
func (st *callState) proxyEntry(off uint64) {
	st.checkDeadline()
	st.Charge(kernelCallCost + st.allocs + int64(st.k.Length(off)>>ioByteShift))
}
