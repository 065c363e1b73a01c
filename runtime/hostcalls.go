package runtime

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// The instrumentation meters guest instructions and checks the deadline at
// every refuel, but the Go code behind an import runs outside it: WASI's
// random_get fills the whole buffer it is given (up to the memory cap, 4 GiB),
// and go-sdk's kernel proxies walk the kernel's block list. A loop of such
// calls costs almost no fuel per iteration, so refuels (and deadline checks)
// became rare enough that a call ran seconds past its deadline.
//
// So every call into a WASI function (wazero's, in Go) is watched by a wazero
// function listener, attached when the WASI module is instantiated
// (hostCallListeners, passed in Load's context):
// before the function runs, the deadline is checked and the call is charged
// by the bytes it will move; work inside one call is bounded (random_get is
// filled in chunks with a deadline check between them, vectors and
// subscriptions are capped). buddy's own host functions (buddy:kernel, what
// is left of extism:host/env, buddy:host/v1) do the same inline.

// hostCallListeners is the wazero listener factory of Load.
type hostCallListeners struct{}

// withHostCallListeners returns ctx carrying the factory, for compilation.
func withHostCallListeners(ctx context.Context) context.Context {
	return experimental.WithFunctionListenerFactory(ctx, hostCallListeners{})
}

// Caps on the work one WASI call may be asked to do.
const (
	// maxIOVecs is POSIX's IOV_MAX: libcs never pass more; a guest that does
	// is refused rather than left to make the host walk millions of vectors.
	maxIOVecs = 1024
	// maxPollSubscriptions bounds poll_oneoff's loop the same way.
	maxPollSubscriptions = 1024
	// randChunk is how many random bytes are made between deadline checks
	// (about a millisecond of work).
	randChunk = 1 << 20
)

// Fuel per byte of host work, as shifts: random_get writes every byte
// (about as slow per byte as an instruction), fd_write/fd_read look at
// their vectors (one unit per 64 bytes, as buddy's host functions charge).
const (
	randByteShift = 0
	ioByteShift   = 6
)

// NewFunctionListener implements experimental.FunctionListenerFactory: only
// WASI's Go functions get a listener.
func (hostCallListeners) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	if def.GoFunction() == nil {
		return nil // wasm code: metered by the instrumentation
	}
	switch def.ModuleName() {
	case wasiNS:
		switch def.Name() {
		case "random_get":
			return hostCallListener(chargeRandom)
		case "fd_write", "fd_read", "fd_pwrite", "fd_pread":
			return hostCallListener(chargeIOVecs)
		case "poll_oneoff":
			return hostCallListener(chargePoll)
		}
		return hostCallListener(nil)
	}
	return nil
}

// hostCallListener checks the deadline before the call and charges the fuel
// its cost function computes.
type hostCallListener func(ctx context.Context, st *callState, mod api.Module, name string, params []uint64) int64

func (l hostCallListener) Before(ctx context.Context, mod api.Module, def api.FunctionDefinition, params []uint64, _ experimental.StackIterator) {
	st, _ := ctx.Value(stateKey{}).(*callState)
	if st == nil {
		return // not inside a buddy call (nothing runs guest code outside one)
	}
	st.pure(def.ModuleName(), def.Name())
	st.checkDeadline()
	if l != nil {
		st.Charge(l(ctx, st, mod, def.Name(), params))
	}
}

func (hostCallListener) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {}

func (hostCallListener) Abort(context.Context, api.Module, api.FunctionDefinition, error) {}

// chargeRandom: random_get(buf, len) writes len bytes. The fill itself checks
// the deadline between chunks (xorshiftReader).
func chargeRandom(_ context.Context, st *callState, _ api.Module, _ string, params []uint64) int64 {
	return int64(uint32(params[1]) >> randByteShift)
}

// chargeIOVecs: fd_write/fd_read/fd_pwrite/fd_pread(fd, iovs, iovs_len, ...)
// cost one unit per vector and one per 64 bytes the vectors span.
func chargeIOVecs(_ context.Context, st *callState, mod api.Module, name string, params []uint64) int64 {
	n := uint32(params[2])
	if n > maxIOVecs {
		st.raise(&TrapError{Reason: fmt.Sprintf("%s with %d I/O vectors: over IOV_MAX (%d)", name, n, maxIOVecs)})
	}
	mem := mod.Memory()
	if mem == nil {
		return int64(n)
	}
	buf, ok := mem.Read(uint32(params[1]), n*8)
	if !ok {
		return int64(n) // WASI answers EFAULT without touching anything
	}
	var bytes uint64
	for i := uint32(0); i < n; i++ {
		bytes += uint64(binary.LittleEndian.Uint32(buf[i*8+4:]))
	}
	return int64(n) + int64(bytes>>ioByteShift)
}

// chargePoll: poll_oneoff(in, out, nsubscriptions, nevents) walks every
// subscription.
func chargePoll(_ context.Context, st *callState, _ api.Module, _ string, params []uint64) int64 {
	n := uint32(params[2])
	if n > maxPollSubscriptions {
		st.raise(&TrapError{Reason: fmt.Sprintf("poll_oneoff with %d subscriptions: over the %d cap", n, maxPollSubscriptions)})
	}
	return int64(n)
}

// checkDeadline ends the call when its context is done: every host call
// passes here, so a guest cannot stay past its deadline by calling the host
// instead of running instructions.
func (st *callState) checkDeadline() {
	select {
	case <-st.done:
		st.raise(st.ctx.Err())
	default:
	}
}

// raise ends the call with err, and remembers it: go-sdk formats errors
// from a reactor's _initialize with %v, which loses their type, so the
// classification falls back on what the runtime itself raised.
func (st *callState) raise(err error) {
	if st.failure == nil {
		st.failure = err
	}
	panic(err)
}
