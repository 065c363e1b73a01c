//go:build tinygo.wasm || wasm

package skillkit

import (
	"unsafe"

	"github.com/extism/go-pdk"
)

// Each host function is called from its own Go function, so that the linker
// keeps only the imports a skill actually uses: a skill that never writes files
// does not import fs_write, and buddy's load-time check sees exactly what it
// needs.

//go:wasmimport buddy:host/v1 log
func hostLogRaw(level int32, msg uint64)

//go:wasmimport buddy:host/v1 fs_read
func hostFSReadRaw(path uint64) uint64

//go:wasmimport buddy:host/v1 fs_write
func hostFSWriteRaw(path, data uint64) uint64

//go:wasmimport buddy:host/v1 http_get
func hostHTTPGetRaw(url uint64) uint64

//go:wasmimport buddy:host/v1 http_request
func hostHTTPRequestRaw(req, body uint64) uint64

//go:wasmimport buddy:host/v1 env_get
func hostEnvGetRaw(name uint64) uint64

//go:wasmimport buddy:host/v1 kv_get
func hostKVGetRaw(key uint64) uint64

//go:wasmimport buddy:host/v1 kv_set
func hostKVSetRaw(key, value uint64) uint64

//go:wasmimport buddy:host/v1 kv_delete
func hostKVDeleteRaw(key uint64) uint64

//go:wasmimport buddy:host/v1 memory_remember
func hostRememberRaw(req uint64) uint64

//go:wasmimport buddy:host/v1 memory_recall
func hostRecallRaw(req uint64) uint64

//go:wasmimport buddy:host/v1 schedule
func hostScheduleRaw(req uint64) uint64

func hostSetError(msg string) { kernelErrorSet(storeBlock([]byte(msg))) }

// The Extism kernel functions skillkit uses (module extism:host/env, with
// the names and signatures of the Extism ABI), and buddy's bulk copies between
// kernel memory and the guest's own (docs/HOST_ABI.md): an input, an output,
// an argument or a host result crosses in one host call, where the Extism
// ABI's load_u64/store_u64 take one per 8 bytes.

//go:wasmimport extism:host/env input_length
func kernelInputLength() uint64

//go:wasmimport extism:host/env length
func kernelLength(off uint64) uint64

//go:wasmimport extism:host/env alloc
func kernelAlloc(n uint64) uint64

//go:wasmimport extism:host/env free
func kernelFree(off uint64)

//go:wasmimport extism:host/env error_set
func kernelErrorSet(off uint64)

//go:wasmimport buddy:host/v1 kernel_read
func kernelRead(src uint64, dst, n uint32)

//go:wasmimport buddy:host/v1 kernel_write
func kernelWrite(dst uint64, src, n uint32)

// addr is the address of b's first byte in the guest's linear memory.
func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

//go:wasmimport buddy:host/v1 input_read
func inputRead(dst, n uint32)

// hostInput reads the call's input, straight into the guest's memory.
func hostInput() []byte {
	n := kernelInputLength()
	buf := make([]byte, n)
	if n > 0 {
		inputRead(addr(buf), uint32(n))
	}
	return buf
}

//go:wasmimport buddy:host/v1 output_write
func outputWrite(src, n uint32)

// hostOutput sets the call's output, straight from the guest's memory.
func hostOutput(b []byte) { outputWrite(addr(b), uint32(len(b))) }

// storeBlock copies b into a new kernel block and returns its offset (0 for
// an empty b, as the kernel's alloc(0)).
func storeBlock(b []byte) uint64 {
	off := kernelAlloc(uint64(len(b)))
	if len(b) > 0 {
		kernelWrite(off, addr(b), uint32(len(b)))
	}
	return off
}

// loadBlock copies the kernel block at off (0: none) into a new slice.
func loadBlock(off uint64) []byte {
	if off == 0 {
		return nil
	}
	n := kernelLength(off)
	buf := make([]byte, n)
	if n > 0 {
		kernelRead(off, addr(buf), uint32(n))
	}
	return buf
}

func hostLog(level int32, msg string) {
	m := storeBlock([]byte(msg))
	hostLogRaw(level, m)
	kernelFree(m)
}

// Arguments go to the host as kernel blocks; the host answers with the
// offset of a result block. (Imported functions cannot be passed as values in
// TinyGo, so each wrapper calls its import directly.)

func block(b []byte) pdk.Memory { return pdk.NewMemory(storeBlock(b), uint64(len(b))) }

func result(off uint64) []byte {
	b := loadBlock(off)
	if off != 0 {
		kernelFree(off)
	}
	return b
}

func hostFSRead(path []byte) []byte {
	p := block(path)
	defer p.Free()
	return result(hostFSReadRaw(p.Offset()))
}

func hostFSWrite(path, data []byte) []byte {
	p, d := block(path), block(data)
	defer p.Free()
	defer d.Free()
	return result(hostFSWriteRaw(p.Offset(), d.Offset()))
}

func hostHTTPGet(url []byte) []byte {
	u := block(url)
	defer u.Free()
	return result(hostHTTPGetRaw(u.Offset()))
}

func hostHTTPRequest(req, body []byte) []byte {
	r, b := block(req), block(body)
	defer r.Free()
	defer b.Free()
	return result(hostHTTPRequestRaw(r.Offset(), b.Offset()))
}

func hostEnvGet(name []byte) []byte {
	n := block(name)
	defer n.Free()
	return result(hostEnvGetRaw(n.Offset()))
}

func hostKVGet(key []byte) []byte {
	k := block(key)
	defer k.Free()
	return result(hostKVGetRaw(k.Offset()))
}

func hostKVSet(key, value []byte) []byte {
	k, v := block(key), block(value)
	defer k.Free()
	defer v.Free()
	return result(hostKVSetRaw(k.Offset(), v.Offset()))
}

func hostKVDelete(key []byte) []byte {
	k := block(key)
	defer k.Free()
	return result(hostKVDeleteRaw(k.Offset()))
}

func hostRemember(req []byte) []byte {
	r := block(req)
	defer r.Free()
	return result(hostRememberRaw(r.Offset()))
}

func hostRecall(req []byte) []byte {
	r := block(req)
	defer r.Free()
	return result(hostRecallRaw(r.Offset()))
}

func hostSchedule(req []byte) []byte {
	r := block(req)
	defer r.Free()
	return result(hostScheduleRaw(r.Offset()))
}
