;; hostile_text.wat: a guest whose logs and error messages try to take over the
;; terminal they are shown on.
;;
;; run: log_info(T), log_error(T), then error_set(T), each from its own kernel
;;      block (go-sdk frees a block it logged), returns 1, where T is 68
;;      bytes of terminal attacks: an OSC title ("ESC ]0;pwned BEL"), a clear
;;      screen (ESC [2J), a CR overwrite, a newline that forges a log line, a C1
;;      CSI (U+009B), a bidi override (U+202E) and isolate (U+2066), invalid
;;      UTF-8 (FF FE), DEL and NUL.
;;      Host reports: skill_error with T escaped; the log lines escaped.
;; big: alloc(8 MiB) filled with "ESC [2J" (store_u64 by words), then
;;      error_set of that block, returns 1.
;;      Host reports: skill_error whose text as shown is capped and escaped.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "log_info" (func $log_info (param i64)))
  (import "extism:host/env" "log_error" (func $log_error (param i64)))
  (import "extism:host/env" "error_set" (func $error_set (param i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\1b]0;pwned\07\1b[2J\0dforged\0a[other] info: ok \c2\9b31m \e2\80\aetxt.exe \e2\81\a6 \ff\fe\7f\00 end") ;; 68 bytes

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
    (call $log_info (call $kcopy (i32.const 0) (i32.const 68)))
    (call $log_error (call $kcopy (i32.const 0) (i32.const 68)))
    (call $error_set (call $kcopy (i32.const 0) (i32.const 68)))
    (i32.const 1))

  (func (export "big") (result i32)
    (local $k i64) (local $i i64)
    (local.set $k (call $alloc (i64.const 8388608)))
    (if (i64.eqz (local.get $k)) (then (return (i32.const 2))))
    (block $done (loop $fill
      (br_if $done (i64.ge_u (local.get $i) (i64.const 8388608)))
      (call $store_u64 (i64.add (local.get $k) (local.get $i)) (i64.const 0x4a325b1b4a325b1b))
      (local.set $i (i64.add (local.get $i) (i64.const 8)))
      (br $fill)))
    (call $error_set (local.get $k))
    (i32.const 1)))
