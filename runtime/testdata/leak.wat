;; leak.wat: probes that no memory survives from one call to the next.
;;
;; dirty: grows its memory to 16 pages and fills all of it with 0xAB, then
;;        allocates 64 KiB in the Extism kernel and fills that with 0xAB too.
;; clean: grows its memory to 16 pages and checks every byte is 0; allocates
;;        64 KiB in the kernel and checks every byte is 0. Traps (unreachable)
;;        on the first non-zero byte, outputs "clean" otherwise.
;; Host reports: dirty succeeds; clean succeeds on every call, whatever ran
;; before it, however instances or their memory are recycled.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "load_u64" (func $load_u64 (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)

  (func $grow
    (drop (memory.grow (i32.sub (i32.const 16) (memory.size)))))

  (func (export "dirty") (result i32)
    (local $k i64) (local $i i64)
    (call $grow)
    (memory.fill (i32.const 0) (i32.const 0xAB) (i32.const 0x100000))
    (local.set $k (call $alloc (i64.const 65536)))
    (block $done
      (loop $next
        (br_if $done (i64.ge_u (local.get $i) (i64.const 65536)))
        (call $store_u64 (i64.add (local.get $k) (local.get $i)) (i64.const 0xABABABABABABABAB))
        (local.set $i (i64.add (local.get $i) (i64.const 8)))
        (br $next)))
    (i32.const 0))

  (func (export "clean") (result i32)
    (local $i i32) (local $k i64) (local $j i64) (local $o i64)
    (call $grow)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (i32.const 0x100000)))
        (if (i64.ne (i64.load (local.get $i)) (i64.const 0)) (then unreachable))
        (local.set $i (i32.add (local.get $i) (i32.const 8)))
        (br $next)))
    (local.set $k (call $alloc (i64.const 65536)))
    (block $done2
      (loop $next2
        (br_if $done2 (i64.ge_u (local.get $j) (i64.const 65536)))
        (if (i64.ne (call $load_u64 (i64.add (local.get $k) (local.get $j))) (i64.const 0)) (then unreachable))
        (local.set $j (i64.add (local.get $j) (i64.const 8)))
        (br $next2)))
    ;; output "clean"
    (local.set $o (call $alloc (i64.const 5)))
    (call $store_u8 (local.get $o) (i32.const 99))
    (call $store_u8 (i64.add (local.get $o) (i64.const 1)) (i32.const 108))
    (call $store_u8 (i64.add (local.get $o) (i64.const 2)) (i32.const 101))
    (call $store_u8 (i64.add (local.get $o) (i64.const 3)) (i32.const 97))
    (call $store_u8 (i64.add (local.get $o) (i64.const 4)) (i32.const 110))
    (call $output_set (local.get $o) (i64.const 5))
    (i32.const 0)))
