//go:build tinygo.wasm || wasm

package main

// fsReadJSON is buddy:host/v1 fs_read_json (docs/HOST_ABI.md): the host
// reads the file (the checks, caps and redaction of fs_read), checks that
// it is UTF-8 text and writes it as a JSON string literal straight into
// buf, so that the file crosses no kernel block and is not escaped by
// metered guest code. Result: status << 32 | n.
//
//go:wasmimport buddy:host/v1 fs_read_json
func fsReadJSON(path, pathLen, buf, bufCap uint32) uint64
