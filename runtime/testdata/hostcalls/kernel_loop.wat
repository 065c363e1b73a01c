;; kernel_loop.wat: Extism kernel calls in tight loops (runtime/hostcalls_test.go).
;; Each loop runs a handful of instructions per kernel call, so fuel alone
;; would let it run far past the deadline: every one must end with timeout
;; (with a large fuel budget) within a short time of the deadline.
;;
;; length_loop      length(p) forever
;; load_loop        load_u64(p) forever (served by go-sdk's proxy)
;; store_loop       store_u64(p, 1) forever
;; input_loop       input_load_u64(0) forever
;; alloc_free_loop  free(alloc(1024)) forever
;; config_loop      config_get(key) forever (go-sdk's proxy; no config is set)
;; log_loop         log_info(msg) forever (go-sdk's proxy; lines past the
;;                  per-call limit are dropped)
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "free" (func $free (param i64)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "load_u64" (func $load_u64 (param i64) (result i64)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "input_load_u64" (func $input_load_u64 (param i64) (result i64)))
  (import "extism:host/env" "config_get" (func $config_get (param i64) (result i64)))
  (import "extism:host/env" "log_info" (func $log_info (param i64)))

  (func $block (result i64)
    (local $p i64)
    (local.set $p (call $alloc (i64.const 16)))
    (call $store_u64 (local.get $p) (i64.const 0x6f6c6c6568))
    (call $store_u64 (i64.add (local.get $p) (i64.const 8)) (i64.const 0))
    (local.get $p))

  (func (export "length_loop") (result i32)
    (local $p i64)
    (local.set $p (call $block))
    (loop $l (drop (call $length (local.get $p))) (br $l))
    (i32.const 0))

  (func (export "load_loop") (result i32)
    (local $p i64)
    (local.set $p (call $block))
    (loop $l (drop (call $load_u64 (local.get $p))) (br $l))
    (i32.const 0))

  (func (export "store_loop") (result i32)
    (local $p i64)
    (local.set $p (call $block))
    (loop $l (call $store_u64 (local.get $p) (i64.const 1)) (br $l))
    (i32.const 0))

  (func (export "input_loop") (result i32)
    (loop $l (drop (call $input_load_u64 (i64.const 0))) (br $l))
    (i32.const 0))

  (func (export "alloc_free_loop") (result i32)
    (loop $l (call $free (call $alloc (i64.const 1024))) (br $l))
    (i32.const 0))

  (func (export "config_loop") (result i32)
    (loop $l (drop (call $config_get (call $block))) (br $l))
    (i32.const 0))

  (func (export "log_loop") (result i32)
    (loop $l (call $log_info (call $block)) (br $l))
    (i32.const 0))
)
