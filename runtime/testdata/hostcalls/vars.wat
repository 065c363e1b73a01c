;; vars.wat: Extism vars (var_get/var_set), the way the PDKs use them
;; (runtime/vars_test.go). Vars are per call: they start empty every call.
;;
;; roundtrip  var_set("k", input); output var_get("k") (nothing if absent):
;;            output = input; too_large when the input is over 1 MiB - 1
;; count3     three times: n = var_get("n") (0 if absent) + 1; var_set("n", n).
;;            output = n as u64 LE: 3 on every call (nothing survives a call)
;; delete     var_set("k", "v"); var_set("k", 0); output "0" if var_get("k")
;;            is then absent, else "1"
;; many       var_set of 2,000 distinct 8-byte names: too_large at the 1,025th
;; get_oom    var_set("k", a 1 MiB - 2 byte block; the host frees it), take
;;            that memory back with a block of the same size, fill kernel
;;            memory with 64 KiB blocks until alloc fails, then var_get("k"):
;;            memory_limit from var_get (never a write at kernel offset 0)
;; bad_ptr    var_set(far, far): trap
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "load_u64" (func $load_u64 (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "var_get" (func $var_get (param i64) (result i64)))
  (import "extism:host/env" "var_set" (func $var_set (param i64 i64)))

  ;; a one-byte block holding c
  (func $byte (param $c i32) (result i64)
    (local $p i64)
    (local.set $p (call $alloc (i64.const 1)))
    (call $store_u8 (local.get $p) (local.get $c))
    (local.get $p))

  ;; an 8-byte block holding v
  (func $word (param $v i64) (result i64)
    (local $p i64)
    (local.set $p (call $alloc (i64.const 8)))
    (call $store_u64 (local.get $p) (local.get $v))
    (local.get $p))

  (func (export "roundtrip") (result i32)
    (local $n i64) (local $p i64) (local $i i64) (local $r i64)
    (local.set $n (call $input_length))
    (local.set $p (call $alloc (local.get $n)))
    (block $done
      (loop $l
        (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
        (call $store_u8 (i64.add (local.get $p) (local.get $i)) (call $input_load_u8 (local.get $i)))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (br $l)))
    (call $var_set (call $byte (i32.const 0x6b)) (local.get $p))
    (local.set $r (call $var_get (call $byte (i32.const 0x6b))))
    (if (i64.ne (local.get $r) (i64.const 0))
      (then (call $output_set (local.get $r) (call $length (local.get $r)))))
    (i32.const 0))

  (func $incr
    (local $r i64) (local $n i64)
    (local.set $r (call $var_get (call $byte (i32.const 0x6e))))
    (if (i64.ne (local.get $r) (i64.const 0))
      (then (local.set $n (call $load_u64 (local.get $r)))))
    (call $var_set (call $byte (i32.const 0x6e)) (call $word (i64.add (local.get $n) (i64.const 1)))))

  (func (export "count3") (result i32)
    (call $incr) (call $incr) (call $incr)
    (call $output_set (call $var_get (call $byte (i32.const 0x6e))) (i64.const 8))
    (i32.const 0))

  (func (export "delete") (result i32)
    (call $var_set (call $byte (i32.const 0x6b)) (call $byte (i32.const 0x76)))
    (call $var_set (call $byte (i32.const 0x6b)) (i64.const 0))
    (call $output_set
      (call $byte (select (i32.const 0x31) (i32.const 0x30)
        (i64.ne (call $var_get (call $byte (i32.const 0x6b))) (i64.const 0))))
      (i64.const 1))
    (i32.const 0))

  (func (export "many") (result i32)
    (local $i i64)
    (loop $l
      (call $var_set (call $word (local.get $i)) (call $byte (i32.const 0x76)))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br_if $l (i64.lt_u (local.get $i) (i64.const 2000))))
    (i32.const 0))

  (func (export "get_oom") (result i32)
    (call $var_set (call $byte (i32.const 0x6b)) (call $alloc (i64.const 1048574)))
    (drop (call $alloc (i64.const 1048574)))
    (loop $l (br_if $l (i64.ne (call $alloc (i64.const 65536)) (i64.const 0))))
    (drop (call $var_get (call $byte (i32.const 0x6b))))
    (i32.const 0))

  (func (export "bad_ptr") (result i32)
    (call $var_set (i64.const 0xFFFFFFFFFFFF) (i64.const 0xFFFFFFFFFFFF))
    (i32.const 0))
)
