package runtime

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/later"
)

// Module is a compiled skill. Call is safe for concurrent use; every call runs
// in a fresh instance, so nothing survives from one call to the next.
type Module struct {
	r        *Runtime
	name     string
	manifest *Manifest
	info     *Info
	rt       wazero.Runtime // the skill's own: its host modules and memory cap
	compiled wazero.CompiledModule
	// inline: every host function linked is buddy's own, so calls run on
	// the caller's goroutine (CallExport).
	inline bool
	// snap is the module's initialised state, restored into every fresh
	// instance (snapshot.go); nil when there is none, with snapWhy saying why.
	snap    *snapshot
	snapWhy string

	ready     *readyStack // fresh, never-called instances
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
	// Under AfterUse, an earlier call's clean-up the caller has not run yet
	// runs now: one context holds at most one call's slot.
	after := later.From(ctx)
	if after != nil {
		after.RunPending()
	}
	start := time.Now()
	if m.closed.Load() {
		return nil, fmt.Errorf("%w: skill %s is unloaded", ErrInternal, m.name)
	}
	if err := checkShape(m.info.info, fn); err != nil {
		return nil, err
	}
	res := m.manifest.Resources
	// An input takes at most a quarter of the memory cap, as under go-sdk
	// (whose kernel dropped a larger one without a word: rc 0, no output, no
	// error), so that the guest has room to copy it and answer.
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

	// The call's deadline, on the runtime's watch: context.WithTimeout's
	// timer per call woke a sleeping thread on the caller's clock
	// (runtime/internal/deadline).
	ctx, cancel := m.r.deadlines.WithTimeout(ctx, start, res.Timeout)
	st := &callState{
		m:      m,
		ctx:    ctx,
		done:   ctx.Done(),
		budget: int64(res.Fuel),
		chunk:  m.r.opts.FuelChunk,
	}
	st.k.init(m.r.mem, uint64(res.MemoryMB)<<20)
	ctx = context.WithValue(ctx, stateKey{}, st)
	ctx = hostfns.WithCall(ctx, st)

	type outcome struct {
		rc  uint32
		out []byte
		err error
	}
	done := make(chan outcome, 1)
	job := func(inline bool) {
		defer cancel()
		inst, err := m.instance(ctx, fn)
		if err != nil {
			release()
			m.refill()
			done <- outcome{err: err}
			return
		}
		inst.rand.st = st // random_get checks this call's deadline as it fills
		if inline {
			// The instance is closed (its memory and the kernel's zeroed)
			// after the caller has its answer, off its clock: by the caller
			// once it has used the answer (AfterUse), else by a goroutine;
			// either then prepares the next instances. The call's slot is
			// held until then, so that closing memory counts against
			// MaxConcurrent as running calls do.
			defer m.retire(inst, st, release, after)
		} else {
			defer release()
			defer inst.close(context.WithoutCancel(ctx), st)
		}
		if inst.restored {
			// The instance starts where the initialiser (and start function)
			// left it, in the snapshot; their fuel is charged as if they had
			// run here, so that fuel does not depend on the snapshot.
			st.extra += m.snap.fuel
		} else if m.info.info.HasStart {
			// The module's start section, run where wazero would have run it
			// (at instantiation) but under this call's limits; like go-sdk's
			// call sequence, inst.call runs the guest's initializer first.
			if _, _, err := inst.call(ctx, st, startExport, nil); err != nil {
				st.settled = false // a failing start is no guest error_set
				done <- outcome{err: err}
				return
			}
			st.settled = false
		}
		rc, out, err := inst.call(ctx, st, fn, input)
		done <- outcome{rc, out, err}
		if !inline {
			// Let the caller take its answer before this worker closes
			// the instance (zeroing its memory). Without it the caller,
			// woken onto this worker's processor, waited for the clean-up.
			goruntime.Gosched()
		}
	}
	var o outcome
	if m.inline {
		// Every host function the module can reach is buddy's own, and each
		// returns by the deadline (the guest itself is stopped at its next
		// refuel or host call): the call runs on the caller's goroutine,
		// without the two goroutine hand-offs a worker costs. Its answer is
		// there when job returns (its ctx is canceled by then too: no select).
		job(true)
		o = <-done
	} else {
		// A host function buddy does not control (Options.ExtraHostFunctions)
		// may ignore the context: the call runs on a worker goroutine so that
		// the caller gets its answer at the deadline regardless; the worker
		// finishes the job (and releases its slot) when that function returns.
		m.r.submit(func() { job(false) })
		m.refill()
		select {
		case o = <-done:
		case <-ctx.Done():
			select {
			case o = <-done:
			case <-time.After(watchdogGrace):
				// The guest is still running: its call state is not ours
				// to read (classify would race with it).
				return nil, ctxError(ctx, res.Timeout)
			}
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
	return &Result{Output: m.r.redact(o.out), Fuel: st.used(), Duration: time.Since(start)}, nil
}

// watchdogGrace is how long past the deadline the caller waits for the guest to
// notice it (at its next refuel or host call) before answering without it.
const watchdogGrace = 100 * time.Millisecond

// instance is a fresh instance of the guest, its WASI random source and the
// exports its call will use, looked up when it is made (before the caller
// asks, for a prepared one): wazero builds a call engine, with a zeroed
// stack, for every export lookup.
type instance struct {
	mod         api.Module
	rand        *xorshiftReader
	entry       api.Function // the manifest's entrypoint
	init        api.Function // the guest runtime's initializer, or nil
	hsInit      api.Function // Haskell's hs_init, or nil
	initialized bool
	// restored: the instance was brought to the module's snapshot, so its
	// initializer and start function have (in effect) run.
	restored bool
}

// instance returns a fresh instance for a call of fn: a prepared one if any,
// else a new one. A call of the initializer itself (or of a command's
// _start, which runs it) gets an instance that was not restored from the
// snapshot: it runs on the module as instantiated, as without snapshots.
func (m *Module) instance(ctx context.Context, fn string) (*instance, error) {
	if m.snap != nil && (fn == "_start" || fn == "_initialize") {
		return m.newInstance(ctx, false)
	}
	if p := m.ready.take(); p != nil {
		return p, nil
	}
	return m.newInstance(ctx, true)
}

// instanceConfig is every instance's module configuration but its random
// source: nameless (so instances never clash) and with no start functions.
// A ModuleConfig is immutable (each With* returns a copy), so one serves all.
var instanceConfig = wazero.NewModuleConfig().WithName("").WithStartFunctions()

// newInstance instantiates the module; with restore (and a snapshot), it
// then brings the instance to the snapshot's state.
func (m *Module) newInstance(ctx context.Context, restore bool) (*instance, error) {
	rand := &xorshiftReader{state: 0x9E3779B97F4A7C15}
	// No filesystem, no env, no args, no stdin/stdout/stderr, fake clocks and
	// a deterministic random source: WASI gives a guest nothing of the host.
	// (wazero's default fake source seeds a math/rand generator per
	// instance, a sixth of a trivial call's CPU; ours is as deterministic.)
	// No start functions: the guest runtime is initialized inside the call.
	mod, err := m.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, m.r.mem), m.compiled,
		instanceConfig.WithRandSource(rand))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if strings.Contains(err.Error(), "pages") && strings.Contains(err.Error(), "limit") {
			return nil, &MemoryError{Detail: "instantiating: " + firstLine(err.Error()), CapMB: m.manifest.Resources.MemoryMB}
		}
		return nil, &TrapError{Reason: "instantiating: " + firstLine(err.Error())}
	}
	inst := &instance{mod: mod, rand: rand}
	if restore && m.snap != nil {
		if err := m.snap.restore(mod); err != nil {
			_ = mod.Close(ctx)
			return nil, &TrapError{Reason: "restoring the snapshot: " + err.Error()}
		}
		inst.restored, inst.initialized = true, true
	}
	if name := m.manifest.Entrypoint; name != "" {
		inst.entry = mod.ExportedFunction(name)
	}
	// The guest runtime's initializer, as go-sdk detects it: Haskell's
	// hs_init (after a reactor's _initialize); else, with WASI, a reactor's
	// _initialize or a command's constructors, when they take no parameters.
	// A restored instance never runs one: no lookup (wazero builds a call
	// engine, with a 10 KiB stack, for every export it is asked for).
	if inst.restored {
		return inst, nil
	}
	if f := mod.ExportedFunction("hs_init"); f != nil {
		inst.hsInit = f
		inst.init = mod.ExportedFunction("_initialize")
	} else if m.info.WASI {
		for _, name := range []string{"_initialize", "__wasm_call_ctors"} {
			if f := mod.ExportedFunction(name); f != nil {
				if len(f.Definition().ParamTypes()) == 0 {
					inst.init = f
				}
				break
			}
		}
	}
	return inst, nil
}

// call runs the export fn with input in inst, in the sequence of go-sdk
// v1.7.1's Plugin.CallWithContext (extism.go), over the call's Go kernel:
// reset the kernel and set the input; initialize the guest runtime before
// the first export that is not itself an initializer; call; read a WASI exit
// code as go-sdk does; then the error block (if the guest set one) and the
// output.
func (inst *instance) call(ctx context.Context, st *callState, fn string, input []byte) (uint32, []byte, error) {
	if inst.mod.IsClosed() {
		return 0, nil, fmt.Errorf("module is closed")
	}
	k := &st.k
	k.Reset()
	k.setInput(input) // into kernel memory when the guest first touches it

	f := inst.entry
	if f == nil || fn != st.m.manifest.Entrypoint {
		f = inst.mod.ExportedFunction(fn)
	}
	if f == nil {
		return 1, nil, fmt.Errorf("unknown function: %s", fn)
	} else if n := len(f.Definition().ResultTypes()); n > 1 {
		return 1, nil, fmt.Errorf("function %s has %v results, expected 0 or 1", fn, n)
	}
	if !inst.initialized && fn != "_start" && fn != "_initialize" {
		if err := inst.initialize(ctx); err != nil {
			return 1, nil, &initError{err}
		}
		inst.initialized = true
		// The initializer settled its fuel: whether the export returns is
		// its own to say (as on a restored instance, where no initializer
		// ran).
		st.settled = false
	}

	var stack [1]uint64
	err := f.CallWithStack(ctx, stack[:])
	nres := len(f.Definition().ResultTypes())
	// A WASI exit code, as go-sdk reads it: exit(0) is success.
	if exitErr, ok := err.(*sys.ExitError); ok {
		if exitErr.ExitCode() == 0 {
			err = nil
		}
		if nres == 0 {
			stack[0], nres = api.EncodeU32(exitErr.ExitCode()), 1
		}
	}
	var rc uint32
	switch {
	case nres > 0:
		rc = api.DecodeU32(stack[0])
	case err != nil:
		rc = 1
	}
	if err != nil {
		return rc, nil, err
	}
	var returnErr error
	if msg := k.block(k.errOff); len(msg) > 0 {
		returnErr = errors.New(string(msg))
	}
	if st.guestOut != nil { // output_write: already a copy
		return rc, st.guestOut, returnErr
	}
	out, ok := k.Read(k.output, k.outputLen)
	if !ok {
		out = nil // as go-sdk: an output outside kernel memory reads as empty
	}
	return rc, append([]byte{}, out...), returnErr
}

// initialize runs the guest runtime's initializer, as go-sdk does: for
// Haskell, a reactor's _initialize (its failure only logged) then
// hs_init(0, 0); else _initialize or __wasm_call_ctors.
func (inst *instance) initialize(ctx context.Context) error {
	if inst.hsInit != nil {
		if inst.init != nil {
			_, _ = inst.init.Call(ctx)
		}
		_, err := inst.hsInit.Call(ctx, 0, 0)
		return err
	}
	if inst.init != nil {
		_, err := inst.init.Call(ctx)
		return err
	}
	return nil
}

// close releases the instance and the call's kernel memory.
func (inst *instance) close(ctx context.Context, st *callState) {
	_ = inst.mod.Close(ctx)
	if st != nil {
		st.k.release()
	}
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
	if !m.startFill() {
		return
	}
	go m.fill()
}

// retire closes a called instance and releases its call's slot, then tops up
// the prepared instances: when the caller runs it (AfterUse), else in the
// background, on one goroutine (a call starts one goroutine, not two).
func (m *Module) retire(inst *instance, st *callState, release func(), after *later.Cleanups) {
	cleanup := func() {
		inst.close(context.Background(), st)
		release()
		if m.startFill() {
			m.fill()
		}
	}
	if after != nil && after.Add(cleanup) {
		return
	}
	go cleanup()
}

// startFill claims the filler's role; fill must follow when it reports true.
func (m *Module) startFill() bool {
	if m.ready.cap() == 0 || m.closed.Load() || !m.filling.CompareAndSwap(false, true) {
		return false
	}
	r := m.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		m.filling.Store(false)
		return false
	}
	r.wg.Add(1)
	return true
}

// fill prepares instances until the module has its Prepared ones.
func (m *Module) fill() {
	r := m.r
	defer r.wg.Done()
	defer m.filling.Store(false)
	for m.ready.len() < m.ready.cap() && !m.closed.Load() {
		p, err := m.newInstance(r.ctx, true)
		if err != nil {
			return
		}
		if !m.ready.put(p) {
			p.close(r.ctx, nil)
			return
		}
	}
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
		for inst := m.ready.take(); inst != nil; inst = m.ready.take() {
			inst.close(ctx, nil)
		}
		err = m.rt.Close(ctx)
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
	errorSet bool
	// snapshotting: the call state of a snapshot attempt, in which no import
	// may be called; impure names the first that was.
	snapshotting bool
	impure       string
	k            kernel // the call's Extism kernel memory (kernel.go)
	// guestOut is the output output_write copied from the guest's memory
	// (non-nil, possibly empty); output_set clears it: the last one wins.
	guestOut []byte
	stash    any      // hostfns.Stasher: a host function's value for the call
	vars     varStore // Extism vars: this call's only
	failure  error    // the first error the runtime ended the call with

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
// Stash implements hostfns.Stasher.
func (st *callState) Stash() *any { return &st.stash }

func (st *callState) used() uint64 {
	if st.settled {
		return uint64(st.granted - st.left + st.extra)
	}
	return uint64(st.floor + st.extra)
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
		st.m.r.opts.Log(st.m.name, Level(level), string(st.m.r.redact([]byte(msg))))
	}
}

func (st *callState) flushLogs() {
	if st.logDropped > 0 && st.m.r.opts.Log != nil {
		st.m.r.opts.Log(st.m.name, LevelWarn, fmt.Sprintf("%d log lines dropped (limit %d lines, %d bytes per call)", st.logDropped, maxLogLines, maxLogBytes))
	}
}

// initError is a failing guest initializer (_initialize, __wasm_call_ctors,
// hs_init); it keeps its cause's kind.
type initError struct{ err error }

func (e *initError) Error() string { return "_initialize: " + e.err.Error() }
func (e *initError) Unwrap() error { return e.err }

// classify turns what wazero and the host functions return into buddy's
// typed errors.
func (m *Module) classify(err error, st *callState, rc uint32) error {
	res := m.manifest.Resources
	var ie *initError
	inInit := errors.As(err, &ie)
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
		kind, text := errs.GuestKind(string(m.r.redact([]byte(msg))))
		return &SkillError{Code: rc, Message: text, Kind: kind}
	}
	if st.oom {
		return &MemoryError{Detail: "the guest ran out of memory: " + trapReason(msg), CapMB: res.MemoryMB}
	}
	switch {
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
