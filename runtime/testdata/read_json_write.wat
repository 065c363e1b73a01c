;; read_json_write.wat: read_json.wat with fs_write too (generated from it by
;; hand: keep the two alike), for write_retry: a first fs_read_json with cap,
;; then fs_write of "rewritten" to the same path, then another fs_read_json
;; with 64 KiB of room (what a stashed read must not survive).
;;
;; Input: buf (u32 LE), cap (u32 LE), then the path. The input is copied to
;; address 0 of the guest's memory (two pages, 128 KiB), so the path lies at
;; 8; buf and cap are passed as they are, however wrong.
;; Output: the i64 result (u64 LE), then min(n, cap) bytes at buf, n being
;; the result's low 32 bits.
;; Exports: run (the path at 8), bad_path (the path at 0xFFFFFFF0, 16
;; bytes: outside the memory), long_path (the path at 8, 0x7FFFFFFF bytes
;; long: over the path cap, and outside the memory); retry (a first call
;; with cap, then, as read_file does, another with the room the result
;; asked for). read_json_write.wat is the same with fs_write.
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_offset" (func $input_offset (result i64)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "buddy:host/v1" "kernel_read" (func $kernel_read (param i64 i32 i32)))
  (import "buddy:host/v1" "kernel_write" (func $kernel_write (param i64 i32 i32)))
  (import "buddy:host/v1" "fs_read_json" (func $fs_read_json (param i32 i32 i32 i32) (result i64)))
  (import "buddy:host/v1" "fs_write" (func $fs_write (param i64 i64) (result i64)))
  (memory (export "memory") 2)
  (data (i32.const 131000) "rewritten")

  ;; call copies the input to 0, calls fs_read_json(path, path_len, buf, cap)
  ;; and outputs the result and the buffer.
  ;; A room other than 0 replaces cap.
  (func $call (param $path i32) (param $path_len i32) (param $room i32) (result i32)
    (local $r i64) (local $m i32) (local $buf i32) (local $out i64)
    (call $kernel_read (call $input_offset) (i32.const 0) (i32.wrap_i64 (call $input_length)))
    (local.set $buf (i32.load (i32.const 0)))
    (local.set $m (i32.load (i32.const 4)))
    (if (local.get $room) (then (local.set $m (local.get $room))))
    (local.set $r (call $fs_read_json (local.get $path) (local.get $path_len) (local.get $buf) (local.get $m)))
    ;; m = min(n, cap)
    (if (i32.lt_u (i32.wrap_i64 (local.get $r)) (local.get $m))
      (then (local.set $m (i32.wrap_i64 (local.get $r)))))
    (i64.store (i32.const 0) (local.get $r))
    (local.set $out (call $alloc (i64.add (i64.const 8) (i64.extend_i32_u (local.get $m)))))
    (call $kernel_write (local.get $out) (i32.const 0) (i32.const 8))
    (call $kernel_write (i64.add (local.get $out) (i64.const 8)) (local.get $buf) (local.get $m))
    (call $output_set (local.get $out) (i64.add (i64.const 8) (i64.extend_i32_u (local.get $m))))
    (i32.const 0))

  (func $path_len (result i32) (i32.sub (i32.wrap_i64 (call $input_length)) (i32.const 8)))
  (func $first (result i64)
    (call $kernel_read (call $input_offset) (i32.const 0) (i32.wrap_i64 (call $input_length)))
    (call $fs_read_json (i32.const 8) (call $path_len) (i32.load (i32.const 0)) (i32.load (i32.const 4))))

  (func (export "run") (result i32)
    (call $call (i32.const 8) (call $path_len) (i32.const 0)))
  (func (export "bad_path") (result i32) (call $call (i32.const 0xFFFFFFF0) (i32.const 16) (i32.const 0)))
  (func (export "long_path") (result i32) (call $call (i32.const 8) (i32.const 0x7FFFFFFF) (i32.const 0)))
  (func (export "retry") (result i32)
    (call $call (i32.const 8) (call $path_len) (i32.wrap_i64 (call $first))))
  (func (export "write_retry") (result i32)
    (local $p i64) (local $d i64)
    (drop (call $first))
    (local.set $p (call $alloc (i64.extend_i32_u (call $path_len))))
    (call $kernel_write (local.get $p) (i32.const 8) (call $path_len))
    (local.set $d (call $alloc (i64.const 9)))
    (call $kernel_write (local.get $d) (i32.const 131000) (i32.const 9))
    (drop (call $fs_write (local.get $p) (local.get $d)))
    (call $call (i32.const 8) (call $path_len) (i32.const 65536))))
