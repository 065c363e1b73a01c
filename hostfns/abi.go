package hostfns

import "github.com/buddy-run/buddy/hostfns/kv"

// Namespace is the wasm import module of buddy's host functions, ABI version 1.
// A future incompatible ABI gets a new namespace; v1 stays as documented in
// docs/HOST_ABI.md.
const Namespace = "buddy:host/v1"

// Reserved namespaces: only buddy's instrumenter may emit imports from these; a
// module that imports them itself is refused.
const (
	FuelNamespace   = "buddy:fuel"
	KernelNamespace = "buddy:kernel"
)

// Names of the host functions in Namespace. Every pointer is an offset into the
// Extism kernel memory (as with the Extism PDKs); every function that returns an
// i64 returns the offset of a result block: byte 0 is an errs.Status, the rest is
// the payload (on error, a UTF-8 message).
const (
	// FnLog (level i32, msg i64) -> (): always linked; size- and rate-limited.
	FnLog = "log"
	// FnKernelRead (src i64, dst i32, n i32) -> (): copies n bytes of kernel
	// memory at src into the guest's linear memory at dst, in one call (the
	// Extism ABI moves 8 bytes per load_u64). Always linked; served by the
	// runtime, which owns both memories.
	FnKernelRead = "kernel_read"
	// FnKernelWrite (dst i64, src i32, n i32) -> (): copies n bytes of the
	// guest's linear memory at src into kernel memory at dst, which must lie
	// inside one live block (as store_u64's). Always linked; served by the runtime.
	FnKernelWrite = "kernel_write"
	// FnOutputWrite (src i32, n i32) -> (): sets the call's output to n
	// bytes of the guest's linear memory at src, in one call (the Extism
	// ABI's alloc, store and output_set, with no kernel block); a later
	// output_set replaces it, as it replaces it. Always linked; served by
	// the runtime.
	FnOutputWrite = "output_write"
	// FnInputRead (dst i32, n i32) -> (): copies the first n bytes of the
	// call's input (at most its length) into the guest's linear memory at
	// dst, in one call and without input_offset. Always linked; served by
	// the runtime.
	FnInputRead = "input_read"
	// FnFSRead (path i64) -> i64: payload = file bytes. Needs a read grant.
	FnFSRead = "fs_read"
	// FnFSReadJSON (path i32, path_len i32, buf i32, cap i32) -> i64: the
	// file, which must be UTF-8 text, as a JSON string literal written
	// straight into the guest's own memory at buf (at most cap bytes); the
	// path is read from the guest's memory too. Result: status << 32 | n.
	// Status 0: n bytes written, or, when n > cap, nothing usable written
	// and n is the room needed. Otherwise buf holds the error message (n
	// bytes, cut to cap). The same grant, checks, caps and redaction as
	// FnFSRead (docs/HOST_ABI.md).
	FnFSReadJSON = "fs_read_json"
	// FnFSWrite (path i64, data i64) -> i64: payload = u64 LE bytes written. Needs a write grant.
	FnFSWrite = "fs_write"
	// FnHTTPGet (url i64) -> i64: payload = u16 LE status, u32 LE n, n bytes of
	// header JSON ({"Content-Type":"..."}), then the body. Needs a network grant.
	FnHTTPGet = "http_get"
	// FnHTTPRequest (req i64, body i64) -> i64: req = {"method":..,"url":..,
	// "headers":{..}}, body = the request body (0: none); payload as
	// FnHTTPGet's. Needs a network grant. Credentials the skill declares and
	// is granted are added by the host for their hosts.
	FnHTTPRequest = "http_request"
	// FnEnvGet (name i64) -> i64: payload = value. Needs an env grant listing the name.
	FnEnvGet = "env_get"
	// FnKVGet (key i64) -> i64: payload = value. Needs the memory grant.
	FnKVGet = "kv_get"
	// FnKVSet (key i64, value i64) -> i64: empty payload. Needs the memory grant.
	FnKVSet = "kv_set"
	// FnKVDelete (key i64) -> i64: empty payload. Needs the memory grant.
	FnKVDelete = "kv_delete"
	// FnMemRemember (req i64) -> i64: req = {"text":..,"tags":[..]}, payload = {"id":N}.
	FnMemRemember = "memory_remember"
	// FnMemRecall (req i64) -> i64: req = {"query":..,"limit":N},
	// payload = {"memories":[{"id","text","tags","created_at"}]}.
	FnMemRecall = "memory_recall"
	// FnSchedule (req i64) -> i64: req = {"action":"add"|"list"|"remove", ...}
	// (docs/HOST_ABI.md), payload = JSON. Needs the schedule grant (the
	// built-in schedule skill only).
	FnSchedule = "schedule"
)

// Log levels of FnLog, the same numbers as Extism's.
const (
	LogTrace int32 = 0
	LogDebug int32 = 1
	LogInfo  int32 = 2
	LogWarn  int32 = 3
	LogError int32 = 4
)

// KV, Memories and Memory are declared in package kv (a leaf, so that the
// store implementing them imports nothing of the runtime).
type (
	KV       = kv.Store
	Memories = kv.Memories
	Memory   = kv.Memory
)
