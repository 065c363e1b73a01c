;; oob_kernel.wat: every Extism kernel function handed a pointer it must not
;; accept. One export per kernel function, named after it; "far" below is
;; 0xFFFFFFFFFFFF, far outside any kernel memory.
;;
;;   load_u8, load_u64        load at far; if it returns, output = value (decimal)
;;   store_u8, store_u64      store 42 at far
;;   input_load_u8            input_load_u8(input_length()): first byte PAST the
;;                            input (still inside kernel memory); output = value
;;   input_load_u64           input_load_u64(input_length()): same, 8 bytes
;;   free                     free(far)
;;   length, length_unsafe    length(far); output = the returned length
;;   output_set               output_set(far, 16)
;;   error_set                error_set(far)
;;   config_get, var_get      config_get(far) / var_get(far); output = returned offset
;;   var_set                  var_set(far, far)
;;   log_info, log_error      log_info(far) / log_error(far)
;; Extra variants:
;;   load_u64_alias           load_u64(0x100000000): go-sdk truncates to uint32,
;;                            so this reads kernel offset 0 (the allocator root)
;;   store_u64_alias          store_u64(0x100000000, -1): would overwrite it
;;   input_load_u8_far        input_load_u8(far)
;;   input_load_u64_straddle  input_load_u64(input_length() - 4): half inside
;;                            the input, half past it (call with >= 4 bytes)
;;   free_mid                 p = alloc(16); free(p + 3): a pointer into a block
;;   error_set_mid            p = alloc(16); error_set(p + 3)
;;
;; Every export returns 0 if the call comes back, so "success" is visible.
;; Host reports: see runtime/testdata/README.md (trap for a pointer outside
;; kernel memory; never a host panic, never bytes from outside the block).
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "input_load_u64" (func $input_load_u64 (param i64) (result i64)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "free" (func $free (param i64)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "length_unsafe" (func $length_unsafe (param i64) (result i64)))
  (import "extism:host/env" "load_u8" (func $load_u8 (param i64) (result i32)))
  (import "extism:host/env" "load_u64" (func $load_u64 (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "error_set" (func $error_set (param i64)))
  (import "extism:host/env" "config_get" (func $config_get (param i64) (result i64)))
  (import "extism:host/env" "var_get" (func $var_get (param i64) (result i64)))
  (import "extism:host/env" "var_set" (func $var_set (param i64 i64)))
  (import "extism:host/env" "log_info" (func $log_info (param i64)))
  (import "extism:host/env" "log_error" (func $log_error (param i64)))
  (memory (export "memory") 1)
  (global $far i64 (i64.const 0xFFFFFFFFFFFF))
  (global $alias i64 (i64.const 0x100000000))

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

  ;; output_u64 sets the output to v in decimal.
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

  ;; block16 returns a fresh 16-byte kernel block filled with 0x41 ('A').
  (func $block16 (result i64)
    (local $k i64)
    (local.set $k (call $alloc (i64.const 16)))
    (call $store_u64 (local.get $k) (i64.const 0x4141414141414141))
    (call $store_u64 (i64.add (local.get $k) (i64.const 8)) (i64.const 0x4141414141414141))
    (local.get $k))

  (func (export "load_u8") (result i32)
    (call $output_u64 (i64.extend_i32_u (call $load_u8 (global.get $far))))
    (i32.const 0))
  (func (export "load_u64") (result i32)
    (call $output_u64 (call $load_u64 (global.get $far)))
    (i32.const 0))
  (func (export "store_u8") (result i32)
    (call $store_u8 (global.get $far) (i32.const 42))
    (i32.const 0))
  (func (export "store_u64") (result i32)
    (call $store_u64 (global.get $far) (i64.const 42))
    (i32.const 0))
  (func (export "input_load_u8") (result i32)
    (call $output_u64 (i64.extend_i32_u (call $input_load_u8 (call $input_length))))
    (i32.const 0))
  (func (export "input_load_u64") (result i32)
    (call $output_u64 (call $input_load_u64 (call $input_length)))
    (i32.const 0))
  (func (export "free") (result i32)
    (call $free (global.get $far))
    (i32.const 0))
  (func (export "length") (result i32)
    (call $output_u64 (call $length (global.get $far)))
    (i32.const 0))
  (func (export "length_unsafe") (result i32)
    (call $output_u64 (call $length_unsafe (global.get $far)))
    (i32.const 0))
  (func (export "output_set") (result i32)
    (call $output_set (global.get $far) (i64.const 16))
    (i32.const 0))
  (func (export "error_set") (result i32)
    (call $error_set (global.get $far))
    (i32.const 0))
  (func (export "config_get") (result i32)
    (call $output_u64 (call $config_get (global.get $far)))
    (i32.const 0))
  (func (export "var_get") (result i32)
    (call $output_u64 (call $var_get (global.get $far)))
    (i32.const 0))
  (func (export "var_set") (result i32)
    (call $var_set (global.get $far) (global.get $far))
    (i32.const 0))
  (func (export "log_info") (result i32)
    (call $log_info (global.get $far))
    (i32.const 0))
  (func (export "log_error") (result i32)
    (call $log_error (global.get $far))
    (i32.const 0))

  (func (export "load_u64_alias") (result i32)
    (call $output_u64 (call $load_u64 (global.get $alias)))
    (i32.const 0))
  (func (export "store_u64_alias") (result i32)
    (call $store_u64 (global.get $alias) (i64.const -1))
    (i32.const 0))
  (func (export "input_load_u8_far") (result i32)
    (call $output_u64 (i64.extend_i32_u (call $input_load_u8 (global.get $far))))
    (i32.const 0))
  (func (export "input_load_u64_straddle") (result i32)
    (call $output_u64 (call $input_load_u64 (i64.sub (call $input_length) (i64.const 4))))
    (i32.const 0))
  (func (export "free_mid") (result i32)
    (call $free (i64.add (call $block16) (i64.const 3)))
    (i32.const 0))
  (func (export "error_set_mid") (result i32)
    (call $error_set (i64.add (call $block16) (i64.const 3)))
    (i32.const 0)))
