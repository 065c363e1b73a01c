package runtime

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unsafe"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// The call path without export lookups.
//
// wazero builds a new call engine, with a zeroed 10 KiB stack, for every
// ExportedFunction lookup, and go-sdk's Plugin.CallWithContext looks up eight
// exports per call (kernel reset, alloc, input_set, output_offset,
// output_length, error_get; the entry point twice) besides those the
// runtime's kernel wrappers need. In a profile of the trivial echo call these
// lookups were ~80% of the CPU between the caller's request and its answer.
//
// So every export a call will use is looked up when its instance is made —
// by the background filler, before the caller asks — and the call runs the
// same sequence as go-sdk v1.7.1's CallWithContext (extism.go) with those
// handles: kernel reset, alloc and input_set for the input; the guest
// runtime's initializer on the first call (_initialize for WASI reactors,
// __wasm_call_ctors for commands: runtime.go detectGuestRuntime); the export;
// then error_get/length and output_offset/output_length. The context carries
// the same values go-sdk's host functions read (PluginCtxKey "extism" and
// "plugin", InputOffsetKey "inputOffset"). Nothing about the ABI changes: the
// kernel is the same wasm instance, called through the same exports.
//
// go-sdk does not export a Plugin's kernel and main modules; they are read
// from its fields by name (sdkModules). If a go-sdk upgrade renames them,
// or a module needs what the fast path does not do (a Haskell hs_init, a
// plugin timeout), the call falls back to CallWithContext, and
// TestFastPathInUse fails so that the regression is seen.

// prepared are the handles of one instance, looked up before its call.
type prepared struct {
	kernel      kernelFuncs
	main        api.Module
	entry       api.Function // the manifest's entrypoint
	entryName   string
	init        api.Function // the guest runtime's initializer, or nil
	initialized bool
}

// sdkModules returns the kernel and main module of a go-sdk Plugin.
func sdkModules(p *extism.Plugin) (kernel, main api.Module) {
	v := reflect.ValueOf(p).Elem()
	field := func(name string) api.Module {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Type() != reflect.TypeFor[api.Module]() {
			return nil
		}
		return *(*api.Module)(unsafe.Pointer(f.UnsafeAddr()))
	}
	return field("extism"), field("mainModule")
}

// prefillKernel lists the kernel exports looked up ahead: those the call
// sequence uses and those behind the guest's kernel imports.
func (m *Module) prefillKernel() []kernelIndex {
	want := map[string]bool{"reset": true, "alloc": true, "input_set": true, "output_offset": true,
		"output_length": true, "error_get": true, "length": true}
	for _, imp := range m.info.Imports {
		name, ok := strings.CutPrefix(imp, kernelNS+".")
		if !ok {
			continue
		}
		if name == "length_unsafe" {
			name = "length"
		}
		want[name] = true
	}
	var out []kernelIndex
	for i, name := range kernelNames {
		if want[name] {
			out = append(out, kernelIndex(i))
		}
	}
	return out
}

// prepare looks up what a call of inst will use; nil when the call must go
// through go-sdk's CallWithContext.
func (m *Module) prepare(p *extism.Plugin) *prepared {
	if p.Timeout > 0 || p.Adapter != nil {
		return nil
	}
	kernel, main := sdkModules(p)
	if kernel == nil || main == nil {
		return nil
	}
	if main.ExportedFunction("hs_init") != nil {
		return nil // Haskell: go-sdk's own initialization
	}
	pr := &prepared{main: main, entryName: m.manifest.Entrypoint}
	pr.kernel.mod = kernel
	pr.kernel.mem = kernel.Memory()
	if pr.kernel.mem == nil {
		return nil
	}
	for _, i := range m.kernelPrefill {
		f := kernel.ExportedFunction(kernelNames[i])
		if f == nil {
			return nil
		}
		pr.kernel.fns[i] = f
	}
	if pr.entryName != "" {
		pr.entry = main.ExportedFunction(pr.entryName)
	}
	if m.info.WASI {
		// As go-sdk: a reactor's _initialize first, else a command's
		// constructors; either only when it takes no parameters.
		for _, name := range []string{"_initialize", "__wasm_call_ctors"} {
			if f := main.ExportedFunction(name); f != nil {
				if len(f.Definition().ParamTypes()) == 0 {
					pr.init = f
				}
				break
			}
		}
	}
	return pr
}

// call runs fn with input in inst as go-sdk's CallWithContext would, with the
// prepared handles.
func (inst *instance) call(ctx context.Context, st *callState, fn string, input []byte) (uint32, []byte, error) {
	pr := inst.prep
	if pr == nil {
		return inst.p.CallWithContext(ctx, fn, input)
	}
	st.kernel = pr.kernel
	if pr.main.IsClosed() {
		return 0, nil, fmt.Errorf("module is closed")
	}
	ctx = context.WithValue(ctx, extism.PluginCtxKey("extism"), pr.kernel.mod)
	ctx = context.WithValue(ctx, extism.PluginCtxKey("plugin"), inst.p)

	// The input: the kernel's reset, alloc and input_set, as SetInput.
	stack := [2]uint64{}
	if err := pr.kernel.fns[kReset].CallWithStack(ctx, stack[:]); err != nil {
		return 1, nil, errors.New("reset")
	}
	stack[0] = uint64(len(input))
	if err := pr.kernel.fns[kAlloc].CallWithStack(ctx, stack[:]); err != nil {
		return 1, nil, err
	}
	ptr := stack[0]
	if ptr == 0 && len(input) > 0 {
		// go-sdk would write the input over the allocator's root at offset 0.
		st.oom = true
		return 1, nil, &MemoryError{Detail: fmt.Sprintf("kernel memory cannot hold the %d-byte input", len(input)), CapMB: st.m.manifest.Resources.MemoryMB}
	}
	if !pr.kernel.mem.Write(uint32(ptr), input) {
		return 1, nil, &TrapError{Reason: fmt.Sprintf("input block %#x+%d is outside kernel memory", ptr, len(input))}
	}
	stack[0], stack[1] = ptr, uint64(len(input))
	if err := pr.kernel.fns[kInputSet].CallWithStack(ctx, stack[:]); err != nil {
		return 1, nil, err
	}
	ctx = context.WithValue(ctx, extism.InputOffsetKey("inputOffset"), ptr)
	st.input, st.haveInput = ptr, true

	f := pr.entry
	if fn != pr.entryName || f == nil {
		f = pr.main.ExportedFunction(fn)
	}
	if f == nil {
		return 1, nil, fmt.Errorf("unknown function: %s", fn)
	} else if n := len(f.Definition().ResultTypes()); n > 1 {
		return 1, nil, fmt.Errorf("function %s has %v results, expected 0 or 1", fn, n)
	}
	if !pr.initialized && fn != "_start" && fn != "_initialize" {
		if pr.init != nil {
			if _, err := pr.init.Call(ctx); err != nil {
				return 1, nil, fmt.Errorf("failed to initialize runtime: %v", err)
			}
		}
		pr.initialized = true
	}

	res, err := f.Call(ctx)
	// A WASI exit code, as go-sdk reads it: exit(0) is success.
	if exitErr, ok := err.(*sys.ExitError); ok {
		if exitErr.ExitCode() == 0 {
			err = nil
		}
		if len(res) == 0 {
			res = []uint64{api.EncodeU32(exitErr.ExitCode())}
		}
	}
	var rc uint32
	switch {
	case len(res) > 0:
		rc = api.DecodeU32(res[0])
	case err != nil:
		rc = 1
	}
	if err != nil {
		return rc, nil, err
	}

	var returnErr error
	if msg := inst.kernelBlock(ctx, kErrorGet, true); len(msg) > 0 {
		returnErr = errors.New(string(msg))
	}
	out := inst.kernelBlock(ctx, kOutputOffset, false)
	return rc, out, returnErr
}

// kernelBlock reads the error (error_get, then length) or the output
// (output_offset, output_length) from the kernel; a copy.
func (inst *instance) kernelBlock(ctx context.Context, which kernelIndex, isErr bool) []byte {
	k := &inst.prep.kernel
	stack := [1]uint64{}
	if err := k.fns[which].CallWithStack(ctx, stack[:]); err != nil {
		return nil
	}
	off := stack[0]
	if isErr {
		if off == 0 {
			return nil
		}
		stack[0] = off
		if err := k.fns[kLength].CallWithStack(ctx, stack[:]); err != nil {
			return nil
		}
	} else if err := k.fns[kOutputLength].CallWithStack(ctx, stack[:]); err != nil {
		return nil
	}
	b, _ := k.mem.Read(uint32(off), uint32(stack[0]))
	return append([]byte{}, b...)
}
