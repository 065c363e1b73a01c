package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/runtime/internal/fuel"
)

// Import namespaces a module may use besides buddy's.
const (
	kernelNS = "extism:host/env"
	wasiNS   = "wasi_snapshot_preview1"
)

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

type sig struct{ params, results []api.ValueType }

// kernelImports are the Extism kernel functions a guest may import, with the
// signatures go-sdk v1.7.1 defines (host.go instantiateEnvModule). The HTTP
// functions are refused: they check only the first URL's host, follow
// redirects unchecked and filter no dialled address;
// buddy:host/v1.http_get and http_request are the way to the
// network.
var kernelImports = map[string]sig{
	"alloc":            {[]api.ValueType{i64}, []api.ValueType{i64}},
	"free":             {[]api.ValueType{i64}, nil},
	"load_u8":          {[]api.ValueType{i64}, []api.ValueType{i32}},
	"load_u64":         {[]api.ValueType{i64}, []api.ValueType{i64}},
	"input_load_u8":    {[]api.ValueType{i64}, []api.ValueType{i32}},
	"input_load_u64":   {[]api.ValueType{i64}, []api.ValueType{i64}},
	"store_u8":         {[]api.ValueType{i64, i32}, nil},
	"store_u64":        {[]api.ValueType{i64, i64}, nil},
	"input_set":        {[]api.ValueType{i64, i64}, nil},
	"output_set":       {[]api.ValueType{i64, i64}, nil},
	"input_length":     {nil, []api.ValueType{i64}},
	"input_offset":     {nil, []api.ValueType{i64}},
	"output_length":    {nil, []api.ValueType{i64}},
	"output_offset":    {nil, []api.ValueType{i64}},
	"length":           {[]api.ValueType{i64}, []api.ValueType{i64}},
	"length_unsafe":    {[]api.ValueType{i64}, []api.ValueType{i64}},
	"reset":            {nil, nil},
	"error_set":        {[]api.ValueType{i64}, nil},
	"error_get":        {nil, []api.ValueType{i64}},
	"memory_bytes":     {nil, []api.ValueType{i64}},
	"config_get":       {[]api.ValueType{i64}, []api.ValueType{i64}},
	"var_get":          {[]api.ValueType{i64}, []api.ValueType{i64}},
	"var_set":          {[]api.ValueType{i64, i64}, nil},
	"get_log_level":    {nil, []api.ValueType{i32}},
	"log_trace":        {[]api.ValueType{i64}, nil},
	"log_debug":        {[]api.ValueType{i64}, nil},
	"log_info":         {[]api.ValueType{i64}, nil},
	"log_warn":         {[]api.ValueType{i64}, nil},
	"log_error":        {[]api.ValueType{i64}, nil},
	"http_request":     {}, // refused below
	"http_status_code": {},
	"http_headers":     {},
}

var refusedKernel = map[string]bool{"http_request": true, "http_status_code": true, "http_headers": true}

// wrappedKernel are the kernel imports the instrumenter moves to buddy:kernel,
// where the runtime meters them, checks the deadline, caps allocations
// (a kernel call's work grows with its blocks and is not guest code, so
// neither fuel nor refuel would see it) and keeps guest stores inside guest
// blocks (kernel.go).
var wrappedKernel = map[string]bool{"alloc": true, "free": true, "length": true, "length_unsafe": true,
	"output_set": true, "store_u8": true, "store_u64": true, "reset": true,
	// Served by the Go kernel (hostmods.go, kernel.go).
	"input_length": true, "input_load_u8": true, "load_u8": true, "input_set": true,
	"input_offset": true, "output_length": true, "output_offset": true,
	"error_set": true, "error_get": true, "memory_bytes": true,
	// Loads from the Go kernel's memory (kernel.go).
	"load_u64": true, "input_load_u64": true,
	// Per-call, bounded Extism vars (vars.go).
	"var_get": true, "var_set": true}

// capabilityOf names the manifest capability each buddy host function needs.
var capabilityOf = map[string]string{
	hostfns.FnLog:         "",
	hostfns.FnKernelRead:  "",
	hostfns.FnKernelWrite: "",
	hostfns.FnOutputWrite: "",
	hostfns.FnInputRead:   "",
	hostfns.FnFSRead:      "files_read",
	hostfns.FnFSReadJSON:  "files_read",
	hostfns.FnFSWrite:     "files_write",
	hostfns.FnHTTPGet:     "network",
	hostfns.FnHTTPRequest: "network",
	hostfns.FnEnvGet:      "env",
	hostfns.FnKVGet:       "memory",
	hostfns.FnKVSet:       "memory",
	hostfns.FnKVDelete:    "memory",
	hostfns.FnMemRemember: "memory",
	hostfns.FnMemRecall:   "memory",
	hostfns.FnSchedule:    "schedule",
}

// Info describes a module: what it imports and exports, and its hash.
type Info struct {
	SHA256  string // hex of the original bytes
	Size    int
	Imports []string // "module.name", in import order
	Exports []string // exported function names
	WASI    bool     // imports wasi_snapshot_preview1 or is a reactor (_initialize)
	info    *fuel.Info
}

// Inspect checks a module against a manifest without linking anything — the
// install-time check: the module is valid wasm (validated by wazero), has no
// start section, exports the entrypoint with an Extism signature, imports only
// the Extism kernel, WASI and buddy host functions, only those the manifest
// declares a capability for, and none beyond its permission level (a
// read_only skill may not import fs_write). Load repeats the import checks
// against the grants in force.
func Inspect(ctx context.Context, wasm []byte, m *Manifest) (*Info, error) {
	if m == nil {
		m = DefaultManifest("skill")
	}
	fi, err := inspect(wasm)
	if err != nil {
		return nil, err
	}
	if err := checkShape(fi, m.Entrypoint); err != nil {
		return nil, err
	}
	for _, imp := range fi.Imports {
		if err := checkKnownImport(imp); err != nil {
			return nil, err
		}
		switch imp.Module {
		case kernelNS, wasiNS:
			continue
		case hostfns.Namespace:
		default:
			return nil, &ImportError{Module: imp.Module, Name: imp.Name, Kind: ErrForbidden,
				Reason: fmt.Sprintf("which buddy never provides: only %s, %s and %s functions are linked", kernelNS, wasiNS, hostfns.Namespace)}
		}
		need, known := capabilityOf[imp.Name]
		if !known {
			return nil, &ImportError{Module: imp.Module, Name: imp.Name, Reason: "which buddy does not provide (see docs/HOST_ABI.md)", Kind: ErrInvalidInput}
		}
		if need != "" && !declares(m.Capabilities, need) {
			return nil, &ImportError{Module: imp.Module, Name: imp.Name,
				Reason: fmt.Sprintf("but skill.toml declares no %s capability", need), Kind: ErrForbidden}
		}
	}
	if err := checkPermission(fi, m.Permission); err != nil {
		return nil, err
	}
	if err := checkMemory(fi, m); err != nil {
		return nil, err
	}
	// Full validation, as Load does before instrumenting. The interpreter
	// validates without generating native code. It does not watch ctx, so
	// it runs apart and is abandoned if ctx ends first.
	_, err = cancellable(ctx, func() (struct{}, error) {
		bg := context.WithoutCancel(ctx)
		v := wazero.NewRuntimeWithConfig(bg, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2).WithDebugInfoEnabled(false))
		defer v.Close(bg)
		cm, err := v.CompileModule(ctx, wasm)
		if err != nil {
			return struct{}{}, &ModuleError{Detail: "invalid module", Err: err}
		}
		return struct{}{}, cm.Close(bg)
	}, func(struct{}) {})
	if err != nil {
		return nil, err
	}
	return newInfo(wasm, fi), nil
}

// effects of the buddy host functions that change or reach out of the
// sandbox, and the permission level each needs.
var effectOf = map[string]Permission{
	hostfns.FnFSWrite:     Mutating,
	hostfns.FnKVSet:       Mutating,
	hostfns.FnKVDelete:    Mutating,
	hostfns.FnMemRemember: Mutating,
	hostfns.FnHTTPGet:     Network,
	hostfns.FnHTTPRequest: Network,
	hostfns.FnSchedule:    Mutating,
}

// checkPermission refuses a module whose imports exceed its permission level:
// the approval gate decides on the level, so a "read_only" skill that can
// write would run without asking.
func checkPermission(fi *fuel.Info, p Permission) error {
	for _, imp := range fi.Imports {
		if imp.Module != hostfns.Namespace {
			continue
		}
		need, ok := effectOf[imp.Name]
		if !ok {
			continue
		}
		if p == need || (need == Mutating && p == Network) {
			continue
		}
		return &ImportError{Module: imp.Module, Name: imp.Name, Kind: ErrForbidden,
			Reason: fmt.Sprintf("but skill.toml declares permission %s; it needs %s", p, need)}
	}
	return nil
}

func declares(c Capabilities, name string) bool {
	switch name {
	case "files_read":
		return c.FilesRead
	case "files_write":
		return c.FilesWrite
	case "network":
		return len(c.Network) > 0
	case "env":
		return len(c.Env) > 0
	case "memory":
		return c.Memory
	case "schedule":
		return c.Schedule
	}
	return false
}

func inspect(wasm []byte) (*fuel.Info, error) {
	if len(wasm) < 8 || !bytes.HasPrefix(wasm, []byte("\x00asm")) {
		return nil, &ModuleError{Detail: "not a WebAssembly module (no \\0asm header)"}
	}
	fi, err := fuel.Inspect(wasm)
	if err != nil {
		if le := limitError(err); le != nil {
			return nil, le
		}
		return nil, &ModuleError{Detail: "malformed module", Err: err}
	}
	return fi, nil
}

func newInfo(wasm []byte, fi *fuel.Info) *Info {
	sum := sha256.Sum256(wasm)
	in := &Info{SHA256: hex.EncodeToString(sum[:]), Size: len(wasm), info: fi}
	for _, imp := range fi.Imports {
		in.Imports = append(in.Imports, imp.Module+"."+imp.Name)
		if imp.Module == wasiNS {
			in.WASI = true
		}
	}
	for _, e := range fi.Exports {
		if e.Kind == 0 {
			in.Exports = append(in.Exports, e.Name)
			// go-sdk calls a reactor's _initialize only with WASI enabled;
			// TinyGo's wasm-unknown reactors need it too. The WASI module is
			// then linked but unused: the guest imports none of it.
			if e.Name == "_initialize" {
				in.WASI = true
			}
		}
	}
	return in
}

// checkShape: the entrypoint is an exported function taking nothing and
// returning at most one i32, and it is not buddy's reserved start export. (A
// start section is fine: it becomes startExport and runs at the start of each
// call, inside the call's limits.)
func checkShape(fi *fuel.Info, entry string) error {
	if entry == "" {
		return nil
	}
	if entry == startExport {
		return &ModuleError{Detail: fmt.Sprintf("%q is reserved for the module's start function", startExport)}
	}
	for _, e := range fi.Exports {
		if e.Name != entry {
			continue
		}
		if e.Kind != 0 {
			return &ModuleError{Detail: fmt.Sprintf("export %q is not a function", entry)}
		}
		if len(e.Type.Params) != 0 || len(e.Type.Results) > 1 {
			return &ModuleError{Detail: fmt.Sprintf("export %q has type %s; Extism entry points take nothing and return an i32", entry, typeString(e.Type))}
		}
		return nil
	}
	return fmt.Errorf("%w: module exports no function %q (exports: %s)", ErrNotFound, entry, strings.Join(funcExports(fi), ", "))
}

func funcExports(fi *fuel.Info) []string {
	var out []string
	for _, e := range fi.Exports {
		if e.Kind == 0 {
			out = append(out, e.Name)
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// checkKnownImport refuses what no grant can make work: non-functions,
// reserved namespaces, refused or unknown kernel functions, bad kernel
// signatures.
func checkKnownImport(imp fuel.Import) error {
	if imp.Kind != 0 {
		kinds := map[byte]string{1: "a table", 2: "a memory", 3: "a global"}
		return &ImportError{Module: imp.Module, Name: imp.Name, Reason: "refused: " + kinds[imp.Kind] + " import (Extism plugins import only functions)", Kind: ErrInvalidInput}
	}
	switch imp.Module {
	case hostfns.FuelNamespace, hostfns.KernelNamespace:
		return &ImportError{Module: imp.Module, Name: imp.Name, Reason: "refused: the namespace is reserved for buddy's instrumentation", Kind: ErrForbidden}
	case kernelNS:
		want, ok := kernelImports[imp.Name]
		if !ok {
			return &ImportError{Module: imp.Module, Name: imp.Name, Reason: "which the Extism kernel does not provide", Kind: ErrInvalidInput}
		}
		if refusedKernel[imp.Name] {
			return &ImportError{Module: imp.Module, Name: imp.Name, Reason: "refused: Extism's HTTP client checks no redirect or address; use buddy:host/v1.http_get or http_request", Kind: ErrForbidden}
		}
		if !sameSig(imp.Type, want) {
			return &ImportError{Module: imp.Module, Name: imp.Name, Reason: fmt.Sprintf("signature mismatch: module wants %s, kernel has %s", typeString(imp.Type), sigString(want)), Kind: ErrInvalidInput}
		}
	}
	return nil
}

// checkImports is the load-time check: every import is a kernel function, a
// WASI function, or a host function linked for this skill.
func checkImports(fi *fuel.Info, provided func(ns, name string) (sig, bool)) error {
	for _, imp := range fi.Imports {
		if err := checkKnownImport(imp); err != nil {
			return err
		}
		switch imp.Module {
		case kernelNS, wasiNS:
			continue
		}
		want, ok := provided(imp.Module, imp.Name)
		if !ok {
			return &ImportError{Module: imp.Module, Name: imp.Name, Reason: "not granted", Kind: ErrForbidden}
		}
		if !sameSig(imp.Type, want) {
			return &ImportError{Module: imp.Module, Name: imp.Name, Reason: fmt.Sprintf("signature mismatch: module wants %s, host has %s", typeString(imp.Type), sigString(want)), Kind: ErrInvalidInput}
		}
	}
	return nil
}

func sameSig(t fuel.FuncType, s sig) bool {
	if len(t.Params) != len(s.params) || len(t.Results) != len(s.results) {
		return false
	}
	for i, p := range t.Params {
		if api.ValueType(p) != s.params[i] {
			return false
		}
	}
	for i, r := range t.Results {
		if api.ValueType(r) != s.results[i] {
			return false
		}
	}
	return true
}

func typeString(t fuel.FuncType) string {
	conv := func(v []fuel.ValueType) []api.ValueType {
		out := make([]api.ValueType, len(v))
		for i, x := range v {
			out[i] = api.ValueType(x)
		}
		return out
	}
	return sigString(sig{conv(t.Params), conv(t.Results)})
}

func sigString(s sig) string {
	names := func(v []api.ValueType) string {
		p := make([]string, len(v))
		for i, x := range v {
			p[i] = api.ValueTypeName(x)
		}
		return "(" + strings.Join(p, ",") + ")"
	}
	return names(s.params) + "->" + names(s.results)
}

// importCost is the static fuel charged per call to an import, on top of the
// call instruction itself: host work is not counted by the instrumentation.
// Wrapped kernel functions and buddy host functions charge dynamically.
func importCost(module, name string) int64 {
	switch module {
	case kernelNS:
		switch {
		case wrappedKernel[name]:
			return 0
		case strings.HasPrefix(name, "log_"), name == "var_set", name == "var_get", name == "config_get":
			return 100
		}
		return 1
	case wasiNS:
		return 50
	}
	return 0
}

func renameKernel(module, name string) string {
	if module == kernelNS && wrappedKernel[name] {
		return hostfns.KernelNamespace
	}
	return ""
}

// bulkByteShift: memory.fill/copy/init cost one unit per 8 bytes, which keeps
// their wall time per unit of fuel near that of ordinary instructions (a
// 4 MiB fill takes ~0.3 ms, about what 500,000 instructions take).
const bulkByteShift = 3

// startExport is the name a module's start section is exported under: wazero
// would run a start function inside instantiation, where no call's fuel,
// deadline or memory accounting applies (and a start function that never
// ends hangs plain go-sdk's NewPlugin). buddy runs it at the beginning of
// every call instead, in the call's fresh instance and under its limits.
const startExport = "__buddy_start"

var instrumentOptions = fuel.Options{ImportCost: importCost, Rename: renameKernel,
	BulkByteShift: bulkByteShift, StartExport: startExport, GlobalExportPrefix: globalPrefix}

// optionsFingerprint names the instrumentation options in the cache key, so
// that changing what is renamed or charged never reuses old output.
var optionsFingerprint = func() string {
	h := sha256.New()
	names := make([]string, 0, len(kernelImports))
	for n := range kernelImports {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s=%s,%d;", n, renameKernel(kernelNS, n), importCost(kernelNS, n))
	}
	fmt.Fprintf(h, "wasi=%d;bulk=%d;start=%s;globals=%s", importCost(wasiNS, "fd_write"), bulkByteShift, startExport, globalPrefix)
	return hex.EncodeToString(h.Sum(nil))[:12]
}()

// instrumented returns the metered form of a module, from the cache when it was
// made before (keyed by the original's sha256 and the instrumenter version).
// A miss validates the original with wazero first.
func (r *Runtime) instrumented(ctx context.Context, wasm []byte) (code []byte, key [sha256.Size]byte, err error) {
	key = sha256.Sum256(wasm)
	r.mu.Lock()
	cached, ok := r.instrCache[key]
	r.mu.Unlock()
	if ok {
		return cached, key, nil
	}
	path := ""
	if r.opts.CacheDir != "" {
		path = filepath.Join(r.opts.CacheDir, "instrumented", fmt.Sprintf("%x.v%d.%s.wasm", key, fuel.Version, optionsFingerprint))
		if data, err := readCached(path); err == nil {
			r.remember(key, data)
			return data, key, nil
		}
	}
	cm, err := r.validator.CompileModule(ctx, wasm)
	if err != nil {
		return nil, key, &ModuleError{Detail: "invalid module", Err: err}
	}
	_ = cm.Close(ctx)
	out, _, err := fuel.Instrument(wasm, instrumentOptions)
	if err != nil {
		return nil, key, &ModuleError{Detail: "cannot meter module", Err: err}
	}
	if path != "" {
		writeCached(path, out) // best effort: a failed write only costs a re-instrumentation
	}
	r.remember(key, out)
	return out, key, nil
}

func (r *Runtime) remember(key [sha256.Size]byte, data []byte) {
	r.mu.Lock()
	r.instrCache[key] = data
	r.mu.Unlock()
}

// Cached files carry the sha256 of their content in a trailer so that a torn
// or corrupted file is ignored rather than executed.
func readCached(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) < sha256.Size {
		return nil, fmt.Errorf("short cache file")
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("cache file checksum mismatch")
	}
	return body, nil
}

func writeCached(path string, body []byte) {
	sum := sha256.Sum256(body)
	_ = osfile.WriteAtomic(path, slices.Concat(body, sum[:]), 0o600) // a cache: a failed write is a miss later
}

// Compile validates, meters and compiles a module into the runtime's caches
// without linking it: what `skill install` does, so that the first Load of
// the module (in a server, after a restart) reads native code from the cache
// rather than compiling on a caller's clock. The module is refused as Load
// would refuse its code (invalid, over a limit, not compilable); its imports
// are Inspect's and Load's to check. Like Load, it returns as soon as ctx
// ends. Without a CacheDir the result lasts as long as the Runtime.
func (r *Runtime) Compile(ctx context.Context, wasm []byte, m *Manifest) error {
	_, err := cancellable(ctx, func() (struct{}, error) { return struct{}{}, r.compile(ctx, wasm, m) }, func(struct{}) {})
	return err
}

func (r *Runtime) compile(ctx context.Context, wasm []byte, m *Manifest) error {
	r.life.RLock()
	defer r.life.RUnlock()
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: runtime is closed", ErrInternal)
	}
	if m == nil {
		m = DefaultManifest("skill")
	}
	fi, err := inspect(wasm)
	if err != nil {
		return err
	}
	if err := checkMemory(fi, m); err != nil {
		return err
	}
	code, key, err := r.instrumented(ctx, wasm)
	if err != nil {
		return err
	}
	// As Load compiles it (the listener factory is part of wazero's cache
	// key), in a runtime of its own that links nothing.
	cctx := withHostCallListeners(ctx)
	rt := wazero.NewRuntimeWithConfig(cctx, r.runtimeConfig(m.Resources.MaxPages()))
	defer rt.Close(context.WithoutCancel(ctx))
	cm, err := r.compileOne(compileContext(cctx), rt, code, key)
	if err != nil {
		return &ModuleError{Detail: "compiling", Err: err}
	}
	if r.opts.CacheDir != "" {
		// The native code is on disk: the shared engine need not keep it
		// in memory. (Without a directory it must, for Load to find it.)
		return cm.Close(context.WithoutCancel(ctx))
	}
	return nil
}

// compileOne compiles code in rt (a skill's own runtime, on the shared
// cache). Compiles of the same code take turns: wazero's engine, which every
// runtime on the cache shares, makes a freshly compiled module visible to the
// others before it has set the module's listener trampolines (v1.12.0,
// wazevo engine.CompileModule), and an instance made from it in between
// panicked (TestConcurrentLoadsOfOneModule; -race reports the write). The
// second compile finds the first's module complete. Different code never
// waits. h names the code: the original's hash, which instrumented keys it
// by (the instrumentation is the same for every module of a Runtime).
func (r *Runtime) compileOne(ctx context.Context, rt wazero.Runtime, code []byte, h [sha256.Size]byte) (wazero.CompiledModule, error) {
	r.turnsMu.Lock()
	t := r.turns[h]
	if t == nil {
		if r.turns == nil {
			r.turns = map[[sha256.Size]byte]*compileTurn{}
		}
		t = &compileTurn{}
		r.turns[h] = t
	}
	t.waiting++
	r.turnsMu.Unlock()
	t.mu.Lock()
	defer func() {
		t.mu.Unlock()
		r.turnsMu.Lock()
		if t.waiting--; t.waiting == 0 {
			delete(r.turns, h)
		}
		r.turnsMu.Unlock()
	}()
	return rt.CompileModule(ctx, code)
}

// compileTurn is one code hash's turn to compile: its lock, and how many
// compiles hold or wait for it.
type compileTurn struct {
	mu      sync.Mutex
	waiting int
}

// Spec says what to load.
type Spec struct {
	// Name is used in errors and logs; "" = the manifest's name.
	Name string
	// Manifest gives the entrypoint and the resources; nil = DefaultManifest.
	Manifest *Manifest
	// Host is the skill's linked host functions; nil = logging only.
	Host *hostfns.Set
}

// Load validates, meters and compiles a module. The module may import only the
// Extism kernel (without its HTTP functions), WASI, and the host functions in
// spec.Host; anything else is refused with an *ImportError naming the import.
// Compilation happens once; every Call gets a fresh instance.
//
// Load returns as soon as ctx ends, with an error of kind canceled or
// timeout, even mid-compile; the compile then stops at its next function
// (Close waits for that) and what it made is released.
func (r *Runtime) Load(ctx context.Context, wasm []byte, spec Spec) (*Module, error) {
	return cancellable(ctx, func() (*Module, error) { return r.load(ctx, wasm, spec) },
		func(m *Module) { _ = m.Close(context.WithoutCancel(ctx)) })
}

func (r *Runtime) load(ctx context.Context, wasm []byte, spec Spec) (*Module, error) {
	r.life.RLock()
	defer r.life.RUnlock()
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%w: runtime is closed", ErrInternal)
	}
	m := spec.Manifest
	if m == nil {
		m = DefaultManifest("skill")
	}
	name := spec.Name
	if name == "" {
		name = m.Name
	}
	fi, err := inspect(wasm)
	if err != nil {
		return nil, err
	}
	if err := checkShape(fi, m.Entrypoint); err != nil {
		return nil, err
	}
	host := spec.Host
	if host == nil {
		if host, err = hostfns.Link(hostfns.Grants{}, hostfns.Deps{}); err != nil {
			return nil, err
		}
	}
	funcs := slices.Clone(host.Functions())
	funcs = append(funcs, r.opts.ExtraHostFunctions...)
	provided := func(ns, fn string) (sig, bool) {
		if ns == hostfns.Namespace && (fn == hostfns.FnKernelRead || fn == hostfns.FnKernelWrite) {
			return guestCopySig, true // served by the runtime (hostmods.go)
		}
		if ns == hostfns.Namespace && (fn == hostfns.FnOutputWrite || fn == hostfns.FnInputRead) {
			return guestRangeSig, true
		}
		for _, f := range funcs {
			if f.Namespace == ns && f.Name == fn {
				return sig{f.Params, f.Results}, true
			}
		}
		return sig{}, false
	}
	if err := checkImports(fi, provided); err != nil {
		return nil, err
	}
	if err := checkPermission(fi, m.Permission); err != nil {
		return nil, err
	}
	maxPages := m.Resources.MaxPages()
	if err := checkMemory(fi, m); err != nil {
		return nil, err
	}
	code, key, err := r.instrumented(ctx, wasm)
	if err != nil {
		return nil, err
	}
	mod := &Module{
		r:        r,
		name:     name,
		manifest: m,
		info:     newInfo(wasm, fi),
		ready:    newReadyStack(r.opts.Prepared),
	}
	// The skill's own wazero runtime: its memory cap applies to every
	// instance, and its host modules link only what the skill was granted.
	// Compiled code comes from the shared cache.
	cctx := withHostCallListeners(ctx)
	rt := wazero.NewRuntimeWithConfig(cctx, r.runtimeConfig(maxPages))
	if err := mod.instantiateHost(cctx, rt, funcs); err != nil {
		rt.Close(ctx)
		return nil, &ModuleError{Detail: "linking " + name, Err: err}
	}
	cm, err := r.compileOne(compileContext(cctx), rt, code, key)
	if err != nil {
		rt.Close(ctx)
		return nil, &ModuleError{Detail: "compiling " + name, Err: err}
	}
	mod.rt, mod.compiled = rt, cm
	mod.inline = len(r.opts.ExtraHostFunctions) == 0
	if mod.snap, mod.snapWhy, err = mod.takeSnapshot(cctx); err != nil {
		rt.Close(ctx)
		return nil, ctxError(ctx, m.Resources.Timeout)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		rt.Close(ctx)
		return nil, fmt.Errorf("%w: runtime is closed", ErrInternal)
	}
	r.modules[mod] = struct{}{}
	r.mu.Unlock()
	return mod, nil
}
