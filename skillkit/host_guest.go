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

func hostSetError(msg string) { pdk.SetErrorString(msg) }

// The Extism kernel functions that move bytes, imported as go-pdk imports
// them (the same module, names and signatures). skillkit's own loops over
// them below do what go-pdk's Input, Output, AllocateBytes and ReadBytes do,
// in about half the wasm instructions per 8 bytes: they are the guest's
// per-byte cost on every call's input, output and host results.

//go:wasmimport extism:host/env input_length
func kernelInputLength() uint64

//go:wasmimport extism:host/env input_load_u64
func kernelInputLoadU64(off uint64) uint64

//go:wasmimport extism:host/env input_load_u8
func kernelInputLoadU8(off uint64) uint32

//go:wasmimport extism:host/env length
func kernelLength(off uint64) uint64

//go:wasmimport extism:host/env load_u64
func kernelLoadU64(off uint64) uint64

//go:wasmimport extism:host/env load_u8
func kernelLoadU8(off uint64) uint32

//go:wasmimport extism:host/env alloc
func kernelAlloc(n uint64) uint64

//go:wasmimport extism:host/env store_u64
func kernelStoreU64(off uint64, v uint64)

//go:wasmimport extism:host/env store_u8
func kernelStoreU8(off uint64, v uint32)

//go:wasmimport extism:host/env free
func kernelFree(off uint64)

//go:wasmimport extism:host/env output_set
func kernelOutputSet(off, n uint64)

// hostInput reads the call's input: 8 bytes per input_load_u64.
func hostInput() []byte {
	n := int(kernelInputLength())
	buf := make([]byte, n)
	p := unsafe.Pointer(unsafe.SliceData(buf))
	i := 0
	for ; i+8 <= n; i += 8 {
		*(*uint64)(unsafe.Add(p, i)) = kernelInputLoadU64(uint64(i)) // wasm is little-endian, as the kernel
	}
	for ; i < n; i++ {
		buf[i] = byte(kernelInputLoadU8(uint64(i)))
	}
	return buf
}

// hostOutput sets the call's output: a kernel block written 8 bytes per
// store_u64.
func hostOutput(b []byte) {
	kernelOutputSet(storeBlock(b), uint64(len(b)))
}

// storeBlock copies b into a new kernel block and returns its offset.
func storeBlock(b []byte) uint64 {
	off := kernelAlloc(uint64(len(b)))
	p := unsafe.Pointer(unsafe.SliceData(b))
	n, i := len(b), 0
	for ; i+8 <= n; i += 8 {
		kernelStoreU64(off+uint64(i), *(*uint64)(unsafe.Add(p, i)))
	}
	for ; i < n; i++ {
		kernelStoreU8(off+uint64(i), uint32(b[i]))
	}
	return off
}

// loadBlock copies the kernel block at off (0: none) into a new slice.
func loadBlock(off uint64) []byte {
	if off == 0 {
		return nil
	}
	n := int(kernelLength(off))
	buf := make([]byte, n)
	p := unsafe.Pointer(unsafe.SliceData(buf))
	i := 0
	for ; i+8 <= n; i += 8 {
		*(*uint64)(unsafe.Add(p, i)) = kernelLoadU64(off + uint64(i))
	}
	for ; i < n; i++ {
		buf[i] = byte(kernelLoadU8(off + uint64(i)))
	}
	return buf
}

func hostLog(level int32, msg string) {
	m := pdk.AllocateString(msg)
	hostLogRaw(level, m.Offset())
	m.Free()
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
