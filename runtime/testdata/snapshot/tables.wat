;; tables.wat: a pure initialiser, but code that writes a table (table.set):
;; tables are not part of a snapshot, so buddy does not take one and every
;; call runs _initialize itself (runtime/snapshot_test.go).
;;
;; _initialize  stores 1 at address 0
;; run          traps (unreachable) unless address 0 holds 1 and table slot 1
;;              is still null (nothing a call sets survives it); then sets
;;              slot 1 to $f and outputs "1"
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)
  (table $t 2 funcref)
  (elem declare func $f)
  (func $f)
  (func (export "_initialize") (i32.store8 (i32.const 0) (i32.const 1)))
  (func (export "run") (result i32)
    (local $o i64)
    (if (i32.ne (i32.load8_u (i32.const 0)) (i32.const 1)) (then unreachable))
    (if (i32.eqz (ref.is_null (table.get $t (i32.const 1)))) (then unreachable))
    (table.set $t (i32.const 1) (ref.func $f))
    (local.set $o (call $alloc (i64.const 1)))
    (call $store_u8 (local.get $o) (i32.const 49))
    (call $output_set (local.get $o) (i64.const 1))
    (i32.const 0)))
