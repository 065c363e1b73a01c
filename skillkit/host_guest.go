//go:build tinygo.wasm || wasm

package skillkit

import "github.com/extism/go-pdk"

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

func hostInput() []byte       { return pdk.Input() }
func hostOutput(b []byte)     { pdk.Output(b) }
func hostSetError(msg string) { pdk.SetErrorString(msg) }

func hostLog(level int32, msg string) {
	m := pdk.AllocateString(msg)
	hostLogRaw(level, m.Offset())
	m.Free()
}

// Arguments go to the host as kernel blocks; the host answers with the
// offset of a result block. (Imported functions cannot be passed as values in
// TinyGo, so each wrapper calls its import directly.)

func block(b []byte) pdk.Memory { return pdk.AllocateBytes(b) }

func result(off uint64) []byte {
	m := pdk.FindMemory(off)
	defer m.Free()
	return m.ReadBytes()
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
