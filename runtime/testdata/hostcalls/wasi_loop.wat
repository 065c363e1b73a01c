;; wasi_loop.wat: WASI calls that move many bytes, in loops and once
;; (runtime/hostcalls_test.go). The input, when 8 bytes or more, is n as a
;; u64 LE; memory grows to hold n bytes.
;;
;; random_loop    random_get(0, n) forever: timeout at the deadline, however
;;                few instructions the loop runs between calls
;; random_once    one random_get(0, n): fuel grows by ~1 per byte
;; fd_write_once  one fd_write(stdout) of one n-byte vector: fuel grows by
;;                ~1 per 64 bytes (stdout goes nowhere)
;; fd_write_loop  fd_write(stdout) of 1,024 vectors spanning all memory, forever:
;;                timeout (or fuel_exhausted under a small budget)
;; fd_write_many  fd_write with 1,025 vectors (over IOV_MAX): trap
;; poll_loop      poll_oneoff with 1,024 zero-timeout clock subscriptions, forever:
;;                timeout
;; poll_many      poll_oneoff with 1,025 subscriptions: trap
(module
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u64" (func $input_load_u64 (param i64) (result i64)))
  (memory (export "memory") 32)

  (func $n (result i32)
    (if (result i32) (i64.ge_u (call $input_length) (i64.const 8))
      (then (i32.wrap_i64 (call $input_load_u64 (i64.const 0))))
      (else (i32.const 0))))

  ;; grow memory to at least $bytes
  (func $ensure (param $bytes i32)
    (local $pages i32)
    (local.set $pages (i32.shr_u (i32.add (local.get $bytes) (i32.const 65535)) (i32.const 16)))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then (if (i32.lt_s (memory.grow (i32.sub (local.get $pages) (memory.size))) (i32.const 0))
        (then unreachable)))))

  ;; $iovecs writes k vectors at offset 0, each spanning the whole memory
  (func $iovecs (param $k i32)
    (local $i i32)
    (loop $l
      (i32.store (i32.mul (local.get $i) (i32.const 8)) (i32.const 0))
      (i32.store (i32.add (i32.mul (local.get $i) (i32.const 8)) (i32.const 4))
        (i32.shl (memory.size) (i32.const 16)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (local.get $k)))))

  (func (export "random_loop") (result i32)
    (local $n i32)
    (local.set $n (call $n))
    (call $ensure (local.get $n))
    (loop $l
      (drop (call $random_get (i32.const 0) (local.get $n)))
      (br $l))
    (i32.const 0))

  (func (export "random_once") (result i32)
    (local $n i32)
    (local.set $n (call $n))
    (call $ensure (local.get $n))
    (drop (call $random_get (i32.const 0) (local.get $n)))
    (i32.const 0))

  (func (export "fd_write_once") (result i32)
    (local $n i32)
    (local.set $n (call $n))
    (call $ensure (i32.add (local.get $n) (i32.const 16)))
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (local.get $n))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
    (i32.const 0))

  (func (export "fd_write_loop") (result i32)
    (call $iovecs (i32.const 1024))
    (loop $l
      (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1024) (i32.const 16384)))
      (br $l))
    (i32.const 0))

  (func (export "fd_write_many") (result i32)
    (call $iovecs (i32.const 1025))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1025) (i32.const 16384)))
    (i32.const 0))

  ;; subscriptions at 0 (48 bytes each, all zero: clock 0, timeout 0),
  ;; events at 65536, nevents at 131072
  (func (export "poll_loop") (result i32)
    (loop $l
      (drop (call $poll (i32.const 0) (i32.const 65536) (i32.const 1024) (i32.const 131072)))
      (br $l))
    (i32.const 0))

  (func (export "poll_many") (result i32)
    (drop (call $poll (i32.const 0) (i32.const 65536) (i32.const 1025) (i32.const 131072)))
    (i32.const 0))
)
