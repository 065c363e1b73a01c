// Package runtime runs skills: WebAssembly modules built with any Extism PDK,
// compiled once and called in a fresh sandbox every time, with a deterministic
// fuel budget, a wall-clock deadline and a memory cap.
//
//	rt, err := runtime.New(ctx, runtime.Options{CacheDir: dataDir + "/cache"})
//	if err != nil { ... }
//	defer rt.Close(ctx)
//
//	m, err := runtime.ParseManifest(skillTOML)          // or DefaultManifest
//	host, err := hostfns.Link(grants, deps)             // what the skill may touch
//	mod, err := rt.Load(ctx, wasm, runtime.Spec{Manifest: m, Host: host})
//	if err != nil { ... }                               // ImportError, ModuleError, ...
//	res, err := mod.Call(ctx, []byte(`{"path":"notes.txt"}`))
//	// res.Output, res.Fuel; errors.Is(err, runtime.ErrFuelExhausted), ...
//
// How each limit is enforced, and what it cannot catch, is in docs/RATIONALE.md.
// Everything else in buddy (the built-ins, the CLI, the server) calls skills only
// through this package.
package runtime

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	goruntime "runtime"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/runtime/internal/deadline"
)

// Defaults of Options.
const (
	// Inputs and outputs: large enough for a file or body at the default
	// read/fetch caps (10 MiB) with JSON escaping; inputs are also bounded
	// by a quarter of the skill's kernel memory.
	DefaultMaxInputBytes  = 32 << 20
	DefaultMaxOutputBytes = 32 << 20
	DefaultPrepared       = 2
	DefaultFuelChunk      = 1_000_000
	maxLogLines           = 200
	maxLogBytes           = 64 << 10
	memoryPoolBytes       = 128 << 20 // zeroed buffers kept for new instances
)

// Level is the level of a guest log line.
type Level int32

// Log levels, as Extism numbers them.
const (
	LevelTrace Level = 0
	LevelDebug Level = 1
	LevelInfo  Level = 2
	LevelWarn  Level = 3
	LevelError Level = 4
)

func (l Level) String() string {
	switch l {
	case LevelTrace:
		return "trace"
	case LevelDebug:
		return "debug"
	case LevelInfo:
		return "info"
	case LevelWarn:
		return "warn"
	}
	return "error"
}

// Options configure a Runtime. The zero value is usable: no disk cache, default
// limits, guest logs dropped.
type Options struct {
	// CacheDir holds instrumented modules and wazero's compilation cache, so
	// that a restart neither re-instruments nor recompiles. "" keeps both in
	// memory for the life of the Runtime. The directory must be writable by
	// buddy alone: wazero executes the native code it finds there.
	CacheDir string
	// MaxConcurrent bounds calls running at once across all modules (each may
	// hold a memory cap's worth of memory plus up to ~160 MiB of native stack
	// during runaway recursion). 0 = 2 × GOMAXPROCS.
	MaxConcurrent int
	// Prepared is how many fresh instances each module keeps ready ahead of
	// demand once it has been called; each is used once. 0 = DefaultPrepared,
	// negative = none (every call instantiates).
	Prepared int
	// MaxInputBytes and MaxOutputBytes cap what crosses the boundary per call.
	MaxInputBytes  int64
	MaxOutputBytes int64
	// Log receives guest log lines (Extism log_* and buddy:host/v1.log), at
	// most 200 lines and 64 KiB per call, each escaped for a terminal and
	// capped at 4 KiB (package textsafe). nil drops them.
	Log func(skill string, level Level, msg string)
	// FuelChunk is how much fuel the guest gets per refuel; the deadline is
	// checked at every refuel. 0 = DefaultFuelChunk. Fuel counts do not depend
	// on it.
	FuelChunk int64
	// NoSnapshots turns post-initialisation snapshots off: every call then
	// runs its module's initialiser itself (for comparisons and tests; the
	// results and fuel are the same either way).
	NoSnapshots bool
	// ExtraHostFunctions are linked into every module besides its grants: for
	// embedders and tests. Their namespaces count as granted.
	ExtraHostFunctions []hostfns.Func
	// Redact, when set, replaces the secrets buddy knows in what a guest
	// hands out: its output, its error message, its log lines and the
	// values of its Extism vars (package secrets). It must return its
	// argument when there is nothing to replace.
	Redact func([]byte) []byte
}

// redact applies Options.Redact.
func (r *Runtime) redact(b []byte) []byte {
	if r.opts.Redact == nil {
		return b
	}
	return r.opts.Redact(b)
}

// Runtime compiles and runs skills. It is safe for concurrent use; Close it to
// release compiled code.
type Runtime struct {
	opts      Options
	cache     wazero.CompilationCache
	validator wazero.Runtime
	sem       chan struct{}
	mem       *memoryPool     // recycled, zeroed linear-memory buffers
	deadlines deadline.Watch  // every call's deadline, under one timer
	jobs      chan func()     // calls, taken by idle workers
	ctx       context.Context // lives until Close; background work uses it
	cancel    context.CancelFunc

	// life is held shared by Load while it compiles and exclusively by Close,
	// so that nothing compiles against a closed cache.
	life    sync.RWMutex
	mu      sync.Mutex
	modules map[*Module]struct{}
	// turns: compiles of the same code take turns (compileOne); one entry
	// per module hash being compiled, held by turnsMu.
	turnsMu    sync.Mutex
	turns      map[[sha256.Size]byte]*compileTurn
	instrCache map[[sha256.Size]byte][]byte // in-memory instrumented modules
	closed     bool
	workers    int
	wg         sync.WaitGroup
}

// submit runs a call on a worker goroutine. Workers live as long as the
// runtime and keep the stacks that wazero's deep call path grows (a fresh
// goroutine per call regrew its stack every time). The concurrency
// semaphore, held by every call until its job ends, bounds the workers to
// MaxConcurrent.
func (r *Runtime) submit(job func()) {
	select {
	case r.jobs <- job: // an idle worker took it
		return
	default:
	}
	r.mu.Lock()
	if r.workers < r.opts.MaxConcurrent {
		r.workers++
		go r.worker()
	}
	r.mu.Unlock()
	r.jobs <- job
}

// worker runs jobs until the runtime closes. (Not counted in wg: a job stuck
// in a host function that ignores its context must not block Close.)
func (r *Runtime) worker() {
	for {
		select {
		case job := <-r.jobs:
			job()
		case <-r.ctx.Done():
			return
		}
	}
}

// New returns a Runtime. With a CacheDir it creates the directory (0700), or
// refuses an existing one that another user owns or that group or others may
// write (an errs.ErrConfig error saying how to fix it): wazero runs the native
// code it finds there.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 2 * goruntime.GOMAXPROCS(0)
	}
	if opts.Prepared == 0 {
		opts.Prepared = DefaultPrepared
	}
	if opts.MaxInputBytes <= 0 {
		opts.MaxInputBytes = DefaultMaxInputBytes
	}
	if opts.MaxOutputBytes <= 0 {
		opts.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if opts.FuelChunk <= 0 {
		opts.FuelChunk = DefaultFuelChunk
	}
	opts.Log = safeLog(opts.Log)

	r := &Runtime{
		opts:       opts,
		sem:        make(chan struct{}, opts.MaxConcurrent),
		mem:        newMemoryPool(memoryPoolBytes),
		jobs:       make(chan func()),
		modules:    map[*Module]struct{}{},
		instrCache: map[[sha256.Size]byte][]byte{},
	}
	if opts.CacheDir != "" {
		for _, d := range []string{opts.CacheDir, filepath.Join(opts.CacheDir, "wazero"), filepath.Join(opts.CacheDir, "instrumented")} {
			if err := osfile.PrivateDir(d); err != nil {
				return nil, fmt.Errorf("cache directory: %w", err)
			}
		}
		c, err := wazero.NewCompilationCacheWithDir(filepath.Join(opts.CacheDir, "wazero"))
		if err != nil {
			return nil, fmt.Errorf("opening compilation cache: %w", err)
		}
		r.cache = c
	} else {
		r.cache = wazero.NewCompilationCache()
	}
	// The original of every module is validated by wazero before it is
	// instrumented: an invalid upload must not become valid by our rewriting
	// (docs/RATIONALE.md, "Safety of the rewrite"). The interpreter validates without generating native code.
	r.validator = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().
		WithCoreFeatures(api.CoreFeaturesV2).WithDebugInfoEnabled(false))
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return r, nil
}

// Close unloads every module and releases the compilation cache.
func (r *Runtime) Close(ctx context.Context) error {
	r.life.Lock()
	defer r.life.Unlock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	mods := make([]*Module, 0, len(r.modules))
	for m := range r.modules {
		mods = append(mods, m)
	}
	r.mu.Unlock()
	r.cancel()
	var err error
	for _, m := range mods {
		err = errors.Join(err, m.Close(ctx))
	}
	r.wg.Wait()
	// r.deadlines is not stopped: a call Close gave up waiting for still
	// ends at its deadline; the watch's timer stops by itself once idle.
	err = errors.Join(err, r.validator.Close(ctx))
	// The cache goes last: closing it under a live CompiledPlugin breaks it
	// (go-sdk #97).
	return errors.Join(err, r.cache.Close(ctx))
}

func (r *Runtime) runtimeConfig(maxPages uint32) wazero.RuntimeConfig {
	return wazero.NewRuntimeConfig().
		WithCoreFeatures(api.CoreFeaturesV2).
		WithCloseOnContextDone(false). // our refuel is the preemption point (docs/RATIONALE.md, "Deadline (wall clock)")
		WithDebugInfoEnabled(false).   // DWARF offsets are wrong after instrumenting anyway
		WithCompilationCache(r.cache).
		WithMemoryLimitPages(maxPages)
}
