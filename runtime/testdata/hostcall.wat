;; hostcall.wat: calls one buddy:host/v1 function with arguments taken from the
;; input and outputs the raw result block (status byte + payload), so that the
;; host ABI can be tested byte for byte from Go (hostfns tests).
;;
;; Input: the single argument, or for fs_write, kv_set and http_request
;; "arg1\0arg2". For log: the first byte is the level, the rest the message
;; (output empty).
;; Exports are named after the functions they call.
;; Host reports: success; the output is the result block.
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "buddy:host/v1" "log" (func $log (param i32 i64)))
  (import "buddy:host/v1" "fs_read" (func $fs_read (param i64) (result i64)))
  (import "buddy:host/v1" "fs_write" (func $fs_write (param i64 i64) (result i64)))
  (import "buddy:host/v1" "http_get" (func $http_get (param i64) (result i64)))
  (import "buddy:host/v1" "http_request" (func $http_request (param i64 i64) (result i64)))
  (import "buddy:host/v1" "env_get" (func $env_get (param i64) (result i64)))
  (import "buddy:host/v1" "kv_get" (func $kv_get (param i64) (result i64)))
  (import "buddy:host/v1" "kv_set" (func $kv_set (param i64 i64) (result i64)))
  (import "buddy:host/v1" "kv_delete" (func $kv_delete (param i64) (result i64)))
  (import "buddy:host/v1" "memory_remember" (func $remember (param i64) (result i64)))
  (import "buddy:host/v1" "memory_recall" (func $recall (param i64) (result i64)))
  (memory (export "memory") 1)

  ;; block copies input bytes [from, to) into a new kernel block.
  (func $block (param $from i64) (param $to i64) (result i64)
    (local $p i64) (local $i i64)
    (if (i64.ge_u (local.get $from) (local.get $to)) (then (return (i64.const 0))))
    (local.set $p (call $alloc (i64.sub (local.get $to) (local.get $from))))
    (local.set $i (local.get $from))
    (block $done
      (loop $next
        (br_if $done (i64.ge_u (local.get $i) (local.get $to)))
        (call $store_u8 (i64.add (local.get $p) (i64.sub (local.get $i) (local.get $from)))
          (call $input_load_u8 (local.get $i)))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (br $next)))
    (local.get $p))

  ;; nul is the index of the first 0 byte of the input, or its length.
  (func $nul (result i64)
    (local $i i64) (local $n i64)
    (local.set $n (call $input_length))
    (block $done
      (loop $next
        (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
        (br_if $done (i32.eqz (call $input_load_u8 (local.get $i))))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (br $next)))
    (local.get $i))

  (func $all (result i64) (call $block (i64.const 0) (call $input_length)))
  (func $first (result i64) (call $block (i64.const 0) (call $nul)))
  (func $second (result i64) (call $block (i64.add (call $nul) (i64.const 1)) (call $input_length)))
  (func $out (param $r i64) (call $output_set (local.get $r) (call $length (local.get $r))))

  (func (export "log") (result i32)
    (call $log (call $input_load_u8 (i64.const 0)) (call $block (i64.const 1) (call $input_length)))
    (i32.const 0))
  (func (export "fs_read") (result i32) (call $out (call $fs_read (call $all))) (i32.const 0))
  (func (export "fs_write") (result i32) (call $out (call $fs_write (call $first) (call $second))) (i32.const 0))
  (func (export "http_get") (result i32) (call $out (call $http_get (call $all))) (i32.const 0))
  (func (export "http_request") (result i32) (call $out (call $http_request (call $first) (call $second))) (i32.const 0))
  (func (export "env_get") (result i32) (call $out (call $env_get (call $all))) (i32.const 0))
  (func (export "kv_get") (result i32) (call $out (call $kv_get (call $all))) (i32.const 0))
  (func (export "kv_set") (result i32) (call $out (call $kv_set (call $first) (call $second))) (i32.const 0))
  (func (export "kv_delete") (result i32) (call $out (call $kv_delete (call $all))) (i32.const 0))
  (func (export "memory_remember") (result i32) (call $out (call $remember (call $all))) (i32.const 0))
  (func (export "memory_recall") (result i32) (call $out (call $recall (call $all))) (i32.const 0)))
