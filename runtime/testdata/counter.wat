;; counter.wat: proves every call gets a fresh instance.
;;
;; run: increments a mutable global (initially 0) and outputs its value in
;;      decimal. Host reports: success, output "1" on every call. "2" on a
;;      second call means an instance (and its globals) was reused.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)
  (global $calls (mut i64) (i64.const 0))

  (func $kcopy (param $src i32) (param $n i32) (result i64)
    (local $k i64) (local $i i32)
    (local.set $k (call $alloc (i64.extend_i32_u (local.get $n))))
    (block $done (loop $copy
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (call $store_u8 (i64.add (local.get $k) (i64.extend_i32_u (local.get $i)))
                      (i32.load8_u (i32.add (local.get $src) (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $copy)))
    (local.get $k))

  ;; output_u64 sets the output to v in decimal (digits built backwards in
  ;; guest memory [0, 32)).
  (func $output_u64 (param $v i64)
    (local $p i32)
    (local.set $p (i32.const 32))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p)
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $v) (i64.const 10)))))
      (local.set $v (i64.div_u (local.get $v) (i64.const 10)))
      (br_if $digit (i64.ne (local.get $v) (i64.const 0))))
    (call $output_set
      (call $kcopy (local.get $p) (i32.sub (i32.const 32) (local.get $p)))
      (i64.extend_i32_u (i32.sub (i32.const 32) (local.get $p)))))

  (func (export "run") (result i32)
    (global.set $calls (i64.add (global.get $calls) (i64.const 1)))
    (call $output_u64 (global.get $calls))
    (i32.const 0)))
