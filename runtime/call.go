package runtime

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/errs"
	"github.com/buddy-run/buddy/runtime/internal/fuel"
)

// Module is a compiled skill. Call is safe for concurrent use; every call runs
// in a fresh instance, so nothing survives from one call to the next.
type Module struct {
	r        *Runtime
	name     string
	manifest *Manifest
	info     *Info
	compiled *extism.CompiledPlugin
	// kernelPrefill are the kernel exports looked up when an instance is
	// made (prefillKernel).
	kernelPrefill []kernelIndex

	ready     chan *instance // fresh, never-called instances
	filling   atomic.Bool
	closeOnce sync.Once
	closed    atomic.Bool
	calls     sync.WaitGroup
}

// Result is the outcome of a successful call.
type Result struct {
	Output   []byte
	Fuel     uint64        // fuel used: original wasm instructions executed plus host work
	Duration time.Duration // wall time of the call, instantiation included
}

// Name returns the name the module was loaded under.
func (m *Module) Name() string { return m.name }

// Manifest returns the manifest the module runs with.
func (m *Module) Manifest() *Manifest { return m.manifest }

// Info describes the module's imports, exports and hash.
func (m *Module) Info() *Info { return m.info }

// Call runs the manifest's entrypoint with input.
func (m *Module) Call(ctx context.Context, input []byte) (*Result, error) {
	return m.CallExport(ctx, m.manifest.Entrypoint, input)
}

// CallExport runs the exported function fn with input in a fresh instance,
// under the manifest's fuel budget, deadline and memory cap.
func (m *Module) CallExport(ctx context.Context, fn string, input []byte) (*Result, error) {
	start := time.Now()
	if m.closed.Load() {
		return nil, fmt.Errorf("%w: skill %s is unloaded", ErrInternal, m.name)
	}
	if err := checkShape(m.info.info, fn); err != nil {
		return nil, err
	}
	res := m.manifest.Resources
	// go-sdk drops an input the kernel cannot hold without a word (RUNTIME.md
	// §3.2): refuse it before it gets there.
	maxIn := min(m.r.opts.MaxInputBytes, int64(res.MaxPages())*65536/4)
	if int64(len(input)) > maxIn {
		return nil, errs.New(ErrTooLarge, fmt.Sprintf("input of %d bytes is over the %d-byte cap", len(input), maxIn))
	}
	select {
	case m.r.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxError(ctx, res.Timeout)
	}
	m.calls.Add(1)
	release := func() { <-m.r.sem; m.calls.Done() }

	ctx, cancel := context.WithTimeout(ctx, res.Timeout)
	st := &callState{
		m:      m,
		ctx:    ctx,
		done:   ctx.Done(),
		budget: int64(res.Fuel),
		chunk:  m.r.opts.FuelChunk,
	}
	ctx = context.WithValue(ctx, stateKey{}, st)
	ctx = hostfns.WithCall(ctx, st)

	type outcome struct {
		rc  uint32
		out []byte
		err error
	}
	done := make(chan outcome, 1)
	// The call runs on a worker goroutine so that the caller gets its answer at
	// the deadline even if a host function ignores the context; the worker
	// finishes the job (and releases its slot) when that function returns.
	m.r.submit(func() {
		defer release()
		defer cancel()
		inst, err := m.instance(ctx)
		if err != nil {
			done <- outcome{err: err}
			return
		}
		p := inst.p
		inst.rand.st = st // random_get checks this call's deadline as it fills
		defer p.Close(context.WithoutCancel(ctx))
		p.SetLogger(st.log)
		if m.info.info.HasStart {
			// The module's start section, run where wazero would have run it
			// (before anything else) but under this call's limits.
			if _, _, err := inst.call(ctx, st, startExport, nil); err != nil {
				st.settled = false // a failing start is no guest error_set
				done <- outcome{err: err}
				return
			}
			st.settled = false
		}
		rc, out, err := inst.call(ctx, st, fn, input)
		done <- outcome{rc, out, err}
		// Let the caller take its answer before this worker closes the
		// instance (zeroing its memories: tens of µs). Without it the
		// caller, woken onto this worker's processor, waited for the
		// clean-up: half of an idle call's latency.
		goruntime.Gosched()
	})
	m.refill()

	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		select {
		case o = <-done:
		case <-time.After(watchdogGrace):
			// The guest is still running: its call state is not ours to
			// read (classify would race with it).
			return nil, ctxError(ctx, res.Timeout)
		}
	}
	if o.err != nil {
		return nil, m.classify(o.err, st, o.rc)
	}
	st.flushLogs()
	if o.rc != 0 {
		return nil, &SkillError{Code: o.rc, Kind: ErrSkill}
	}
	if int64(len(o.out)) > m.r.opts.MaxOutputBytes {
		return nil, errs.New(ErrTooLarge, fmt.Sprintf("output of %d bytes is over the %d-byte cap", len(o.out), m.r.opts.MaxOutputBytes))
	}
	return &Result{Output: o.out, Fuel: st.used(), Duration: time.Since(start)}, nil
}

// watchdogGrace is how long past the deadline the caller waits for the guest to
// notice it (at its next refuel or host call) before answering without it.
const watchdogGrace = 100 * time.Millisecond

// instance is a fresh plugin instance, its WASI random source and the
// exports its call will use, looked up ahead (fastcall.go).
type instance struct {
	p    *extism.Plugin
	rand *xorshiftReader
	prep *prepared // nil: the call goes through go-sdk's CallWithContext
}

// instance returns a fresh instance: a prepared one if any, else a new one.
func (m *Module) instance(ctx context.Context) (*instance, error) {
	select {
	case p := <-m.ready:
		return p, nil
	default:
	}
	return m.newInstance(ctx)
}

func (m *Module) newInstance(ctx context.Context) (*instance, error) {
	rand := &xorshiftReader{state: 0x9E3779B97F4A7C15}
	p, err := m.compiled.Instance(experimental.WithMemoryAllocator(ctx, m.r.mem), extism.PluginInstanceConfig{
		// No filesystem, no env, no args, no stdin/stdout/stderr, fake clocks and
		// a deterministic random source: WASI gives a guest nothing of the host.
		// (wazero's default fake source seeds a math/rand generator per
		// instance, a sixth of a trivial call's CPU; ours is as deterministic.)
		ModuleConfig: wazero.NewModuleConfig().WithRandSource(rand),
	})
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if strings.Contains(err.Error(), "pages") && strings.Contains(err.Error(), "limit") {
			return nil, &MemoryError{Detail: "instantiating: " + firstLine(err.Error()), CapMB: m.manifest.Resources.MemoryMB}
		}
		return nil, &TrapError{Reason: "instantiating: " + firstLine(err.Error())}
	}
	return &instance{p: p, rand: rand, prep: m.prepare(p)}, nil
}

// xorshiftReader is a deterministic pseudo-random stream for WASI random_get:
// the same sequence in every instance, as wazero's default, without its
// per-instance seeding cost. Guests must not use it for secrets (there are
// none to protect inside a skill: its only I/O is buddy's host functions).
// A buffer is filled a chunk at a time with the call's deadline checked in
// between: one random_get may be asked for the whole memory cap.
type xorshiftReader struct {
	state uint64
	st    *callState // the call using the instance; set before it runs
}

func (x *xorshiftReader) Read(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		if x.st != nil {
			x.st.checkDeadline()
		}
		n := min(len(p), randChunk)
		for i := range p[:n] {
			x.state ^= x.state << 13
			x.state ^= x.state >> 7
			x.state ^= x.state << 17
			p[i] = byte(x.state >> 56)
		}
		p = p[n:]
	}
	return total, nil
}

// refill tops up the prepared instances in the background, one filler at a time.
func (m *Module) refill() {
	if cap(m.ready) == 0 || m.closed.Load() || !m.filling.CompareAndSwap(false, true) {
		return
	}
	r := m.r
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		m.filling.Store(false)
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		defer m.filling.Store(false)
		for len(m.ready) < cap(m.ready) && !m.closed.Load() {
			p, err := m.newInstance(r.ctx)
			if err != nil {
				return
			}
			select {
			case m.ready <- p:
			default:
				p.p.Close(r.ctx)
				return
			}
		}
	}()
}

// closeWait bounds how long Close waits for running calls when ctx has no
// deadline of its own.
const closeWait = 10 * time.Second

// Close unloads the module: prepared instances and compiled code are released
// once running calls finish. If a call is still running when ctx ends (or
// after 10 s without a deadline), the compiled code is left to the garbage
// collector rather than pulled from under it, and Close reports it.
func (m *Module) Close(ctx context.Context) error {
	var err error
	m.closeOnce.Do(func() {
		m.closed.Store(true)
		m.r.mu.Lock()
		delete(m.r.modules, m)
		m.r.mu.Unlock()
		idle := make(chan struct{})
		go func() { m.calls.Wait(); close(idle) }()
		wait := ctx
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			wait, cancel = context.WithTimeout(ctx, closeWait)
			defer cancel()
		}
		select {
		case <-idle:
		case <-wait.Done():
			err = fmt.Errorf("%w: skill %s: calls still running at close; its compiled code was not released", ErrInternal, m.name)
			return
		}
		for m.filling.Load() {
			time.Sleep(time.Millisecond)
		}
		for {
			select {
			case inst := <-m.ready:
				inst.p.Close(ctx)
				continue
			default:
			}
			break
		}
		err = m.compiled.Close(ctx)
	})
	return err
}

// callState is the per-call bookkeeping behind fuel, the deadline, kernel
// allocations and logs. It lives in the call's context; one call runs on one
// goroutine, so it needs no lock.
type callState struct {
	m      *Module
	ctx    context.Context
	done   <-chan struct{} // ctx.Done(), looked up once
	budget int64
	chunk  int64

	granted int64 // fuel handed to the guest so far
	floor   int64 // guest fuel known consumed at the last refuel or settle
	extra   int64 // host work charged
	settled bool  // the export returned normally
	left    int64 // guest fuel left at settle
	allocs  int64 // live-ish kernel allocations: alloc walks the block list
	oom     bool  // a memory.grow or kernel alloc was refused
	// errorSet: the guest called error_set. With settled, an error from
	// go-sdk is the guest's own message (a reactor's _initialize settles
	// too, before the export runs).
	errorSet  bool
	blocks    blockTable
	kernel    kernelFuncs // this instance's kernel exports, looked up once
	vars      varStore    // Extism vars: this call's only
	input     uint64      // the input block's kernel offset, once known
	haveInput bool
	failure   error // the first error the runtime ended the call with

	logLines, logBytes, logDropped int
}

type stateKey struct{}

func stateFrom(ctx context.Context) *callState {
	st, _ := ctx.Value(stateKey{}).(*callState)
	if st == nil {
		panic(errs.New(ErrInternal, "host function called outside a buddy call"))
	}
	return st
}

// refuel is called by the guest when its fuel went negative: it checks the
// deadline, ends the call if the budget is spent, else grants another chunk.
func (st *callState) refuel(f int64) int64 {
	if err := st.ctx.Err(); err != nil {
		st.raise(err)
	}
	consumed := st.granted - f
	st.floor = consumed
	if total := consumed + st.extra; total > st.budget {
		st.raise(&FuelError{Used: uint64(total), Budget: uint64(st.budget)})
	}
	// Grant a chunk, but at least the deficit: the guest must never get
	// negative fuel back (it would ask again at once, forever, when the budget
	// is spent to the unit). Grants stay within the budget: consumed+extra ≤
	// budget here.
	give := max(min(st.chunk, st.budget-consumed-st.extra), -f)
	st.granted += give
	return f + give
}

func (st *callState) settle(f int64) {
	st.settled = true
	st.left = f
	st.floor = st.granted - f
}

// Charge implements hostfns.Call: host work counts against the same budget.
func (st *callState) Charge(units int64) {
	if units <= 0 {
		return
	}
	st.extra += units
	if total := st.floor + st.extra; total > st.budget {
		st.raise(&FuelError{Used: uint64(total), Budget: uint64(st.budget)})
	}
}

// used is the fuel of a finished call.
func (st *callState) used() uint64 {
	if st.settled {
		return uint64(st.granted - st.left + st.extra)
	}
	return uint64(st.floor + st.extra)
}

// Allocated implements hostfns.Call: a host function allocated a kernel block
// (a result); guest entries it overlaps are stale.
func (st *callState) Allocated(ptr, size uint64) {
	st.blocks.invalidate(ptr-min(ptr, headerSize), ptr+size)
}

// Log implements hostfns.Call and is the Extism logger of the instance.
func (st *callState) Log(level int32, msg string) {
	if st.logLines >= maxLogLines || st.logBytes+len(msg) > maxLogBytes {
		st.logDropped++
		return
	}
	st.logLines++
	st.logBytes += len(msg)
	if st.m.r.opts.Log != nil {
		st.m.r.opts.Log(st.m.name, Level(level), msg)
	}
}

func (st *callState) log(level extism.LogLevel, msg string) {
	l := int32(LevelError)
	switch level {
	case extism.LogLevelTrace:
		l = int32(LevelTrace)
	case extism.LogLevelDebug:
		l = int32(LevelDebug)
	case extism.LogLevelInfo:
		l = int32(LevelInfo)
	case extism.LogLevelWarn:
		l = int32(LevelWarn)
	}
	st.Log(l, msg)
}

func (st *callState) flushLogs() {
	if st.logDropped > 0 && st.m.r.opts.Log != nil {
		st.m.r.opts.Log(st.m.name, LevelWarn, fmt.Sprintf("%d log lines dropped (limit %d lines, %d bytes per call)", st.logDropped, maxLogLines, maxLogBytes))
	}
}

// Fuel charged for the kernel calls that the runtime wraps.
const (
	kernelCallCost  = 50
	kernelLightCost = 4  // a load, a store: a round trip through Go
	kernelLoadCost  = 2  // load_u64, input_load_u64 (as when go-sdk served them)
	kernelByteCost  = 10 // bytes per unit for alloc sizes
)

// meterFunctions are the buddy:fuel functions the instrumenter calls and the
// buddy:kernel wrappers of the Extism kernel functions it moved there.
func (m *Module) meterFunctions() []extism.HostFunction {
	fn := func(ns, name string, cb extism.HostFunctionStackCallback, params, results []api.ValueType) extism.HostFunction {
		f := extism.NewHostFunctionWithStack(name, cb, params, results)
		f.SetNamespace(ns)
		return f
	}
	allocCap := uint64(m.manifest.Resources.MemoryMB) << 20
	maxOut := uint64(m.r.opts.MaxOutputBytes)
	out := []extism.HostFunction{
		fn(fuel.Module, fuel.RefuelName, func(ctx context.Context, _ *extism.CurrentPlugin, stack []uint64) {
			stack[0] = uint64(stateFrom(ctx).refuel(int64(stack[0])))
		}, []api.ValueType{i64}, []api.ValueType{i64}),
		fn(fuel.Module, fuel.SettleName, func(ctx context.Context, _ *extism.CurrentPlugin, stack []uint64) {
			stateFrom(ctx).settle(int64(stack[0]))
		}, []api.ValueType{i64}, nil),
		fn(fuel.Module, fuel.OOMName, func(ctx context.Context, _ *extism.CurrentPlugin, _ []uint64) {
			stateFrom(ctx).oom = true
		}, nil, nil),

		fn(hostfns.KernelNamespace, "alloc", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			st := kernelEntry(ctx)
			n := stack[0]
			if n > allocCap {
				st.oom = true
				stack[0] = 0
				return
			}
			// alloc walks the kernel's block list: charge for its length too.
			st.allocs++
			st.Charge(st.allocs + int64(n/kernelByteCost))
			stack[0] = n
			kernelCall(ctx, st, kAlloc, stack)
			ptr := stack[0]
			if ptr == 0 && n > 0 {
				st.oom = true
			}
			st.blocks.add(ptr, n)
			stack[0] = ptr
		}, []api.ValueType{i64}, []api.ValueType{i64}),
		fn(hostfns.KernelNamespace, "free", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			st := kernelEntry(ctx)
			st.Charge(st.allocs)
			st.blocks.remove(stack[0])
			// The kernel frees only exact block starts it finds in its list, so
			// any pointer may be passed on.
			kernelCall(ctx, st, kFree, stack)
		}, []api.ValueType{i64}, nil),
		fn(hostfns.KernelNamespace, "reset", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			st := kernelEntry(ctx)
			st.blocks.reset()
			kernelCall(ctx, st, kReset, stack)
		}, nil, nil),
		// Stores: only inside a live block the guest allocated (blocks.go).
		fn(hostfns.KernelNamespace, "store_u8", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			st := kernelLight(ctx)
			off := stack[0]
			if !st.blocks.contains(off, 1) || !st.kernelMem(ctx).WriteByte(uint32(off), byte(stack[1])) {
				panic(&TrapError{Reason: fmt.Sprintf("store_u8 at %#x: outside every block the guest allocated", off)})
			}
		}, []api.ValueType{i64, i32}, nil),
		fn(hostfns.KernelNamespace, "store_u64", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			st := kernelLight(ctx)
			off := stack[0]
			if !st.blocks.contains(off, 8) || !st.kernelMem(ctx).WriteUint64Le(uint32(off), stack[1]) {
				panic(&TrapError{Reason: fmt.Sprintf("store_u64 at %#x: outside every block the guest allocated", off)})
			}
		}, []api.ValueType{i64, i64}, nil),
		// Loads: read straight from the kernel memory the call's state holds
		// (go-sdk's proxies look the memory up by name and its plugin in the
		// context at every 8 bytes), with go-sdk's semantics — the offset is
		// truncated to 32 bits; input_load_u64 is relative to the input block
		// — and its fuel: 2 per call, as its import cost and listener charged.
		fn(hostfns.KernelNamespace, "load_u64", func(ctx context.Context, _ *extism.CurrentPlugin, stack []uint64) {
			st := kernelLoad(ctx)
			v, ok := st.kernelMem(ctx).ReadUint64Le(uint32(stack[0]))
			if !ok {
				panic(&TrapError{Reason: fmt.Sprintf("load_u64 at %#x: outside kernel memory", stack[0])})
			}
			stack[0] = v
		}, []api.ValueType{i64}, []api.ValueType{i64}),
		fn(hostfns.KernelNamespace, "input_load_u64", func(ctx context.Context, _ *extism.CurrentPlugin, stack []uint64) {
			st := kernelLoad(ctx)
			off := stack[0] + st.inputOffset(ctx)
			v, ok := st.kernelMem(ctx).ReadUint64Le(uint32(off))
			if !ok {
				panic(&TrapError{Reason: fmt.Sprintf("input_load_u64 at %#x: outside kernel memory", stack[0])})
			}
			stack[0] = v
		}, []api.ValueType{i64}, []api.ValueType{i64}),
		fn(hostfns.KernelNamespace, "length", kernelLength, []api.ValueType{i64}, []api.ValueType{i64}),
		fn(hostfns.KernelNamespace, "length_unsafe", kernelLength, []api.ValueType{i64}, []api.ValueType{i64}),
		fn(hostfns.KernelNamespace, "output_set", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			st := kernelEntry(ctx)
			off, n := stack[0], stack[1]
			if n > maxOut {
				panic(errs.New(ErrTooLarge, fmt.Sprintf("output of %d bytes is over the %d-byte cap", n, maxOut)))
			}
			size := uint64(st.kernelMem(ctx).Size())
			if off > size || n > size-off {
				panic(&TrapError{Reason: fmt.Sprintf("output_set: block %#x+%d is outside kernel memory", off, n)})
			}
			kernelCall(ctx, st, kOutputSet, stack)
		}, []api.ValueType{i64, i64}, nil),
	}
	out = append(out, m.varFunctions()...)
	// The rest of the kernel functions go-sdk proxies (looking the export up
	// on every call) are forwarded with the cached handle.
	for i := kFirstPlain; i < kernelIndex(kernelCount); i++ {
		name := kernelNames[i]
		out = append(out, fn(hostfns.KernelNamespace, name, func(ctx context.Context, _ *extism.CurrentPlugin, stack []uint64) {
			st := kernelLight(ctx)
			if i == kErrorSet {
				st.errorSet = true
			}
			kernelCall(ctx, st, i, stack)
		}, kernelImports[name].params, kernelImports[name].results))
	}
	return out
}

// kernelFuncs caches the kernel exports the wrappers call: wazero builds a
// new call engine (and stack) for every ExportedFunction lookup, and go-sdk's
// AllocWithContext and friends look up on every call.
type kernelFuncs struct {
	mod api.Module
	mem api.Memory
	fns [kernelCount]api.Function
}

func (st *callState) kernelModule(ctx context.Context) api.Module {
	k := &st.kernel
	if k.mod == nil {
		mod, ok := ctx.Value(extism.PluginCtxKey("extism")).(api.Module)
		if !ok {
			panic(errs.New(ErrInternal, "no kernel in context"))
		}
		k.mod = mod
	}
	return k.mod
}

// kernelMem is the kernel's memory (go-sdk's Memory() looks it up by name on
// every call; stores are the hottest kernel calls).
func (st *callState) kernelMem(ctx context.Context) api.Memory {
	if st.kernel.mem == nil {
		st.kernel.mem = st.kernelModule(ctx).Memory()
	}
	return st.kernel.mem
}

func (st *callState) kernelFn(ctx context.Context, i kernelIndex) api.Function {
	f := st.kernel.fns[i]
	if f == nil {
		f = st.kernelModule(ctx).ExportedFunction(kernelNames[i])
		st.kernel.fns[i] = f
	}
	return f
}

// kernelCall calls an exported function of this instance's Extism kernel.
func kernelCall(ctx context.Context, st *callState, i kernelIndex, stack []uint64) {
	if err := st.kernelFn(ctx, i).CallWithStack(ctx, stack); err != nil {
		panic(err)
	}
}

// kernelIndex names a kernel export the runtime calls on the guest's behalf.
type kernelIndex int

// kernelNames lists them: first those the runtime's own wrappers call, then
// the plain forwards (kFirstPlain on).
var kernelNames = [...]string{"alloc", "free", "length", "reset", "output_set",
	"input_length", "input_load_u8", "load_u8", "input_set", "input_offset",
	"output_length", "output_offset", "error_set", "error_get", "memory_bytes"}

const kernelCount = len(kernelNames)

const (
	kAlloc kernelIndex = iota
	kFree
	kLength
	kReset
	kOutputSet
	kFirstPlain
)

// Indices among the plain forwards: error_set's, and those the call
// sequence uses (fastcall.go).
var (
	kErrorSet     = kernelIndex(slices.Index(kernelNames[:], "error_set"))
	kInputSet     = kernelIndex(slices.Index(kernelNames[:], "input_set"))
	kErrorGet     = kernelIndex(slices.Index(kernelNames[:], "error_get"))
	kOutputOffset = kernelIndex(slices.Index(kernelNames[:], "output_offset"))
	kOutputLength = kernelIndex(slices.Index(kernelNames[:], "output_length"))
)

func kernelLength(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
	st := kernelEntry(ctx)
	st.Charge(st.allocs)
	kernelCall(ctx, st, kLength, stack)
}

// kernelEntry is the common start of every wrapped kernel call: the deadline is
// checked here too, since kernel work is not metered by the instrumentation.
func kernelEntry(ctx context.Context) *callState {
	st := stateFrom(ctx)
	st.checkDeadline()
	st.Charge(kernelCallCost)
	return st
}

// kernelLoad is the start of load_u64 and input_load_u64.
func kernelLoad(ctx context.Context) *callState {
	st := stateFrom(ctx)
	st.checkDeadline()
	st.Charge(kernelLoadCost)
	return st
}

// inputOffset is where the call's input block starts in kernel memory.
func (st *callState) inputOffset(ctx context.Context) uint64 {
	if st.haveInput {
		return st.input // set by the prepared call path (fastcall.go)
	}
	// Set by go-sdk's CallWithContext when the call went through it.
	off, ok := ctx.Value(extism.InputOffsetKey("inputOffset")).(uint64)
	if !ok {
		panic(errs.New(ErrInternal, "input_load_u64: no input in context"))
	}
	return off
}

// kernelLight is the start of the constant-time kernel calls (loads, stores,
// input and output offsets): the deadline is checked at each, so a loop of
// them ends at the deadline however little fuel it burns.
func kernelLight(ctx context.Context) *callState {
	st := stateFrom(ctx)
	st.checkDeadline()
	st.Charge(kernelLightCost)
	return st
}

// classify turns what go-sdk and wazero return into buddy's typed errors.
func (m *Module) classify(err error, st *callState, rc uint32) error {
	res := m.manifest.Resources
	// go-sdk reports a failing reactor _initialize with %v, which drops the
	// error's type: put back what the runtime itself ended the call with.
	const initPrefix = "failed to initialize runtime: "
	inInit := strings.HasPrefix(err.Error(), initPrefix)
	if inInit {
		err = errors.New("_initialize: " + strings.TrimPrefix(err.Error(), initPrefix))
	}
	if f := st.failure; f != nil && !errors.Is(err, f) {
		err = fmt.Errorf("%w\n%s", f, err.Error())
	}
	var fe *FuelError
	if errors.As(err, &fe) {
		return fe
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		return &TimeoutError{Limit: res.Timeout}
	}
	if errors.Is(err, context.Canceled) {
		return errs.Wrap(ErrCanceled, "call canceled", nil)
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return &SkillError{Code: exit.ExitCode(), Message: fmt.Sprintf("skill exited with code %d", exit.ExitCode()), Kind: ErrSkill}
	}
	// Typed errors our host functions panicked with.
	for _, target := range []error{ErrMemoryLimit, ErrTooLarge, ErrTrap, ErrInternal, ErrForbidden} {
		if errors.Is(err, target) {
			var te *TrapError
			if errors.As(err, &te) {
				return &TrapError{Reason: te.Reason, Stack: stackOf(err.Error())}
			}
			var ke *errs.Error
			if errors.As(err, &ke) {
				return ke
			}
			return err
		}
	}
	// A host function that saw the deadline pass ended the call with the
	// context's error; if its type was lost on the way, the context says.
	// (Only the deadline: the call's context is canceled once it is over.)
	if errors.Is(st.ctx.Err(), context.DeadlineExceeded) && !st.settled {
		return &TimeoutError{Limit: res.Timeout}
	}
	msg := err.Error()
	if st.settled && st.errorSet && !inInit {
		// The export returned normally: this is the guest's own error_set.
		kind, text := errs.GuestKind(msg)
		return &SkillError{Code: rc, Message: text, Kind: kind}
	}
	if st.oom {
		return &MemoryError{Detail: "the guest ran out of memory: " + trapReason(msg), CapMB: res.MemoryMB}
	}
	switch {
	case strings.Contains(msg, "Vars are disabled by this host"):
		return errs.New(ErrForbidden, "Extism vars are not available: every call runs in a fresh instance (use the memory capability to keep data)")
	case strings.Contains(msg, "out of memory"):
		return &MemoryError{Detail: trapReason(msg), CapMB: res.MemoryMB}
	}
	return &TrapError{Reason: trapReason(msg), Stack: stackOf(msg)}
}

// trapReason is the first line of a wazero error without its decorations:
// "wasm error: unreachable" → "unreachable".
func trapReason(msg string) string {
	l := firstLine(msg)
	l = strings.TrimPrefix(l, "wasm error: ")
	l = strings.TrimSuffix(l, " (recovered by wazero)")
	return l
}

func stackOf(msg string) string {
	if i := strings.Index(msg, "wasm stack trace:"); i >= 0 {
		return strings.TrimSpace(msg[i:])
	}
	return ""
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func ctxError(ctx context.Context, limit time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &TimeoutError{Limit: limit}
	}
	return errs.Wrap(ErrCanceled, "call canceled", nil)
}
