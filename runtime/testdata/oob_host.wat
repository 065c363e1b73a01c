;; oob_host.wat: every buddy:host/v1 function handed garbage pointers.
;; One export per host function, named after it: log, fs_read, fs_write,
;; http_get, env_get, kv_get, kv_set, kv_delete, memory_remember,
;; memory_recall. Link it with every capability granted (the module imports
;; all ten functions, so a host that links only granted ones refuses it
;; otherwise with forbidden).
;;
;; The input picks the garbage (first byte; empty input = "f"):
;;   "0"  offset 0 (the null block; buddy reads it as an empty argument)
;;   "f"  0xFFFFFFFFFFFF, far outside kernel memory
;;   "m"  an offset in the middle of a live 16-byte block (block + 5)
;;   "a"  0x100000000 + a live block: wraps to that block if truncated to u32
;; A second byte "2" puts the garbage only in the second pointer of fs_write
;; and kv_set (the first is then a valid block holding "k"); otherwise every
;; pointer argument is garbage. log always gets level 2 (info).
;;
;; If the host function returns, the export returns 0 with output = the status
;; byte of the result block in decimal (log, which has no result: "logged").
;; Host reports: trap for "f" and "a" (a pointer outside kernel memory breaks
;; the memory contract); for "0" and "m" the argument reads as empty, so
;; success with output = the function's status for an empty argument (e.g.
;; "4" invalid_input for fs_read, "1" forbidden for http_get; see README.md);
;; log with "0"/"m" logs an empty line: success "logged". Never a host panic.
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "load_u8" (func $load_u8 (param i64) (result i32)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "buddy:host/v1" "log" (func $log (param i32 i64)))
  (import "buddy:host/v1" "fs_read" (func $fs_read (param i64) (result i64)))
  (import "buddy:host/v1" "fs_write" (func $fs_write (param i64 i64) (result i64)))
  (import "buddy:host/v1" "http_get" (func $http_get (param i64) (result i64)))
  (import "buddy:host/v1" "env_get" (func $env_get (param i64) (result i64)))
  (import "buddy:host/v1" "kv_get" (func $kv_get (param i64) (result i64)))
  (import "buddy:host/v1" "kv_set" (func $kv_set (param i64 i64) (result i64)))
  (import "buddy:host/v1" "kv_delete" (func $kv_delete (param i64) (result i64)))
  (import "buddy:host/v1" "memory_remember" (func $memory_remember (param i64) (result i64)))
  (import "buddy:host/v1" "memory_recall" (func $memory_recall (param i64) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 64) "logged")

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

  ;; status outputs the status byte of a result block and returns 0.
  (func $status (param $res i64) (result i32)
    (call $output_u64 (i64.extend_i32_u (call $load_u8 (local.get $res))))
    (i32.const 0))

  (func $block16 (result i64)
    (local $k i64)
    (local.set $k (call $alloc (i64.const 16)))
    (call $store_u64 (local.get $k) (i64.const 0x4141414141414141))
    (call $store_u64 (i64.add (local.get $k) (i64.const 8)) (i64.const 0x4141414141414141))
    (local.get $k))

  ;; input byte i, or -1 past the end.
  (func $in (param $i i64) (result i32)
    (if (result i32) (i64.lt_u (local.get $i) (call $input_length))
      (then (call $input_load_u8 (local.get $i)))
      (else (i32.const -1))))

  ;; garbage is the pointer chosen by the input's first byte.
  (func $garbage (result i64)
    (local $mode i32)
    (local.set $mode (call $in (i64.const 0)))
    (if (i32.eq (local.get $mode) (i32.const 0x30)) (then (return (i64.const 0))))            ;; "0"
    (if (i32.eq (local.get $mode) (i32.const 0x6d))                                            ;; "m"
      (then (return (i64.add (call $block16) (i64.const 5)))))
    (if (i32.eq (local.get $mode) (i32.const 0x61))                                            ;; "a"
      (then (return (i64.add (call $block16) (i64.const 0x100000000)))))
    (i64.const 0xFFFFFFFFFFFF))                                                                ;; "f", default

  ;; first is the first pointer of a two-pointer call: garbage, or a valid
  ;; block "k" when the input's second byte is "2".
  (func $first (result i64)
    (local $k i64)
    (if (i32.eq (call $in (i64.const 1)) (i32.const 0x32))
      (then
        (local.set $k (call $alloc (i64.const 1)))
        (call $store_u8 (local.get $k) (i32.const 0x6b))
        (return (local.get $k))))
    (call $garbage))

  (func (export "log") (result i32)
    (call $log (i32.const 2) (call $garbage))
    (call $output_set (call $kcopy (i32.const 64) (i32.const 6)) (i64.const 6))
    (i32.const 0))
  (func (export "fs_write") (result i32)
    (call $status (call $fs_write (call $first) (call $garbage))))
  (func (export "kv_set") (result i32)
    (call $status (call $kv_set (call $first) (call $garbage))))
  (func (export "fs_read") (result i32)
    (call $status (call $fs_read (call $garbage))))
  (func (export "http_get") (result i32)
    (call $status (call $http_get (call $garbage))))
  (func (export "env_get") (result i32)
    (call $status (call $env_get (call $garbage))))
  (func (export "kv_get") (result i32)
    (call $status (call $kv_get (call $garbage))))
  (func (export "kv_delete") (result i32)
    (call $status (call $kv_delete (call $garbage))))
  (func (export "memory_remember") (result i32)
    (call $status (call $memory_remember (call $garbage))))
  (func (export "memory_recall") (result i32)
    (call $status (call $memory_recall (call $garbage)))))
