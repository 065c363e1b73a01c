;; undeclared.wat: uses a buddy host function its manifest does not grant.
;;
;; Imports buddy:host/v1.http_get. Load it with no network capability/grant.
;; run: http_get("https://example.com/"), returns 0 with output = the status
;;      byte of the result, if it ever gets that far.
;; Host reports: forbidden, at load (instantiation), naming the import
;; buddy:host/v1.http_get; the guest never runs. (With a network grant for
;; example.com the module is valid and links.)
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "load_u8" (func $load_u8 (param i64) (result i32)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "buddy:host/v1" "http_get" (func $http_get (param i64) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "https://example.com/")  ;; 20 bytes

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
    (local $res i64)
    (local.set $res (call $http_get (call $kcopy (i32.const 0) (i32.const 20))))
    ;; output = one ASCII digit: '0' + status
    (i32.store8 (i32.const 32) (i32.add (i32.const 48) (call $load_u8 (local.get $res))))
    (call $output_set (call $kcopy (i32.const 32) (i32.const 1)) (i64.const 1))
    (i32.const 0)))
