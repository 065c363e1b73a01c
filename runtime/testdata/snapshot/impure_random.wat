;; impure_random.wat: an initialiser that calls WASI random_get (random): not snapshotted (a snapshot
;; holds no per-call state); every call runs _initialize itself, and run
;; outputs "ok" either way (runtime/snapshot_test.go).
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_initialize")
    (drop (call $random (i32.const 64) (i32.const 8))))
  (func (export "run") (result i32)
    (local $o i64)
    (local.set $o (call $alloc (i64.const 2)))
    (call $store_u8 (local.get $o) (i32.const 111))
    (call $store_u8 (i64.add (local.get $o) (i64.const 1)) (i32.const 107))
    (call $output_set (local.get $o) (i64.const 2))
    (i32.const 0)))
