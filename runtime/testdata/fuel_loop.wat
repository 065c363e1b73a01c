;; fuel_loop.wat: a known amount of work, for determinism tests.
;;
;; run: N = the input read as a decimal number (leading digits; empty or
;;      non-digit input -> 0). Loops N times over a few integer ops (a 64-bit
;;      LCG step and an xor-shift), then outputs "ok".
;; Host reports: success, output "ok". The same input must cost exactly the
;; same fuel on every run; fuel grows linearly in N (N = 10,000,000 still fits
;; the default 1e9 budget, about 10 ops per iteration; 1,000,000,000 does not:
;; fuel_exhausted).
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)
  (global $sink (mut i64) (i64.const 0))

  (func (export "run") (result i32)
    (local $len i64) (local $i i64) (local $d i32) (local $n i64) (local $acc i64) (local $k i64)
    ;; parse
    (local.set $len (call $input_length))
    (block $parsed (loop $parse
      (br_if $parsed (i64.ge_u (local.get $i) (local.get $len)))
      (local.set $d (i32.sub (call $input_load_u8 (local.get $i)) (i32.const 48)))
      (br_if $parsed (i32.gt_u (local.get $d) (i32.const 9)))
      (local.set $n (i64.add (i64.mul (local.get $n) (i64.const 10)) (i64.extend_i32_u (local.get $d))))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $parse)))
    ;; work
    (local.set $i (i64.const 0))
    (local.set $acc (i64.const 1))
    (block $done (loop $work
      (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
      (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 6364136223846793005)) (local.get $i)))
      (local.set $acc (i64.xor (local.get $acc) (i64.shr_u (local.get $acc) (i64.const 33))))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $work)))
    (global.set $sink (local.get $acc))
    ;; output "ok"
    (local.set $k (call $alloc (i64.const 2)))
    (call $store_u8 (local.get $k) (i32.const 0x6f))
    (call $store_u8 (i64.add (local.get $k) (i64.const 1)) (i32.const 0x6b))
    (call $output_set (local.get $k) (i64.const 2))
    (i32.const 0)))
