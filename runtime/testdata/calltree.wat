;; calltree.wat: a huge amount of work with no loop anywhere in the module.
;;
;; run: calls $f30. Each $fK (K >= 1) calls $f(K-1) twice; $f0 counts itself
;;      in a global. That is 2^30 leaf calls and 2^31 - 1 calls in all, with
;;      call depth 31 and not a single loop, so a meter that only charges
;;      loop back-edges sees almost nothing.
;;      Host reports: fuel_exhausted with the default budget (1e9), which must
;;      charge calls (or function entries). With fuel unlimited and no deadline
;;      it would finish (seconds) with output "1073741824" (2^30 leaf calls),
;;      written without a loop.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)
  (global $leaves (mut i64) (i64.const 0))

  ;; digit stores decimal digit (v / div) % 10 at kernel offset k + pos.
  (func $digit (param $k i64) (param $pos i64) (param $v i64) (param $div i64)
    (call $store_u8 (i64.add (local.get $k) (local.get $pos))
      (i32.add (i32.const 48)
        (i32.wrap_i64 (i64.rem_u (i64.div_u (local.get $v) (local.get $div)) (i64.const 10))))))

  ;; output10 sets the output to v as exactly 10 decimal digits (zero-padded).
  (func $output10 (param $v i64)
    (local $k i64)
    (local.set $k (call $alloc (i64.const 10)))
    (call $digit (local.get $k) (i64.const 0) (local.get $v) (i64.const 1000000000))
    (call $digit (local.get $k) (i64.const 1) (local.get $v) (i64.const 100000000))
    (call $digit (local.get $k) (i64.const 2) (local.get $v) (i64.const 10000000))
    (call $digit (local.get $k) (i64.const 3) (local.get $v) (i64.const 1000000))
    (call $digit (local.get $k) (i64.const 4) (local.get $v) (i64.const 100000))
    (call $digit (local.get $k) (i64.const 5) (local.get $v) (i64.const 10000))
    (call $digit (local.get $k) (i64.const 6) (local.get $v) (i64.const 1000))
    (call $digit (local.get $k) (i64.const 7) (local.get $v) (i64.const 100))
    (call $digit (local.get $k) (i64.const 8) (local.get $v) (i64.const 10))
    (call $digit (local.get $k) (i64.const 9) (local.get $v) (i64.const 1))
    (call $output_set (local.get $k) (i64.const 10)))

  (func $f0 (global.set $leaves (i64.add (global.get $leaves) (i64.const 1))))
  (func $f1 (call $f0) (call $f0))
  (func $f2 (call $f1) (call $f1))
  (func $f3 (call $f2) (call $f2))
  (func $f4 (call $f3) (call $f3))
  (func $f5 (call $f4) (call $f4))
  (func $f6 (call $f5) (call $f5))
  (func $f7 (call $f6) (call $f6))
  (func $f8 (call $f7) (call $f7))
  (func $f9 (call $f8) (call $f8))
  (func $f10 (call $f9) (call $f9))
  (func $f11 (call $f10) (call $f10))
  (func $f12 (call $f11) (call $f11))
  (func $f13 (call $f12) (call $f12))
  (func $f14 (call $f13) (call $f13))
  (func $f15 (call $f14) (call $f14))
  (func $f16 (call $f15) (call $f15))
  (func $f17 (call $f16) (call $f16))
  (func $f18 (call $f17) (call $f17))
  (func $f19 (call $f18) (call $f18))
  (func $f20 (call $f19) (call $f19))
  (func $f21 (call $f20) (call $f20))
  (func $f22 (call $f21) (call $f21))
  (func $f23 (call $f22) (call $f22))
  (func $f24 (call $f23) (call $f23))
  (func $f25 (call $f24) (call $f24))
  (func $f26 (call $f25) (call $f25))
  (func $f27 (call $f26) (call $f26))
  (func $f28 (call $f27) (call $f27))
  (func $f29 (call $f28) (call $f28))
  (func $f30 (call $f29) (call $f29))

  (func (export "run") (result i32)
    (call $f30)
    (call $output10 (global.get $leaves))
    (i32.const 0)))
