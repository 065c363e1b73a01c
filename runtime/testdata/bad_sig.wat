;; bad_sig.wat: a real kernel function imported with the wrong type.
;;
;; Imports extism:host/env.alloc as (i32) -> i32 (the real one is i64 -> i64).
;; The module is valid wasm: wazero compiles it; only linking fails.
;; run: alloc(8), returns the result.
;; Host reports: invalid_input, at load, naming extism:host/env.alloc and both
;; signatures (plain go-sdk: "signature mismatch: i32_i32 != i64_i64"). The
;; guest never runs.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (call $alloc (i32.const 8))))
