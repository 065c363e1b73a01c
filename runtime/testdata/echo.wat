;; echo.wat: the well-behaved baseline.
;;
;; run:        output = input, byte for byte. Copies 8 bytes at a time
;;             (input_load_u64 -> store_u64), then the tail one byte at a time
;;             (input_load_u8 -> store_u8), into one kernel block from alloc(n),
;;             then output_set(block, n). Empty input -> empty output.
;;             If the kernel refuses the alloc (returns 0) it returns 1 with no
;;             error message.
;; fail:       error_set("invalid_input: bad thing"), returns 1.
;;             Host reports: invalid_input, message "bad thing" (the guest claims
;;             the kind with the "<kind>: " prefix).
;; fail_plain: error_set("something broke"), returns 1.
;;             Host reports: skill_error, message "something broke".
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "input_load_u64" (func $input_load_u64 (param i64) (result i64)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "error_set" (func $error_set (param i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "invalid_input: bad thing")  ;; 24 bytes
  (data (i32.const 32) "something broke")          ;; 15 bytes

  ;; kcopy copies n bytes of guest memory at src into a new kernel block.
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

  (func (export "run") (result i32)
    (local $n i64) (local $out i64) (local $i i64)
    (local.set $n (call $input_length))
    (if (i64.eqz (local.get $n)) (then (return (i32.const 0))))
    (local.set $out (call $alloc (local.get $n)))
    (if (i64.eqz (local.get $out)) (then (return (i32.const 1))))
    ;; whole words
    (block $done (loop $words
      (br_if $done (i64.gt_u (i64.add (local.get $i) (i64.const 8)) (local.get $n)))
      (call $store_u64 (i64.add (local.get $out) (local.get $i))
                       (call $input_load_u64 (local.get $i)))
      (local.set $i (i64.add (local.get $i) (i64.const 8)))
      (br $words)))
    ;; tail bytes
    (block $done (loop $bytes
      (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
      (call $store_u8 (i64.add (local.get $out) (local.get $i))
                      (call $input_load_u8 (local.get $i)))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $bytes)))
    (call $output_set (local.get $out) (local.get $n))
    (i32.const 0))

  (func (export "fail") (result i32)
    (call $error_set (call $kcopy (i32.const 0) (i32.const 24)))
    (i32.const 1))

  (func (export "fail_plain") (result i32)
    (call $error_set (call $kcopy (i32.const 32) (i32.const 15)))
    (i32.const 1)))
