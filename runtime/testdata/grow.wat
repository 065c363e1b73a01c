;; grow.wat: a guest that eats all the memory it can get.
;;
;; run:   memory.grow(1) until it returns -1, then `unreachable` (what a real
;;        allocator does when it runs out). Host reports: memory_limit (the
;;        trap follows a refused memory.grow, so it is the cap's doing, not a
;;        bug in the guest), within the memory cap, never an uncapped grow.
;; count: memory.grow(1) until it returns -1, returns 0 with output = the page
;;        count reached in decimal. Host reports: success, output = the guest
;;        page cap (e.g. "256" under memory_mb = 16 if the whole cap is the
;;        guest's; less if the kernel's share is subtracted).
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)

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

  (func $grow_all
    (block $full (loop $more
      (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
      (br $more))))

  (func (export "run") (result i32)
    (call $grow_all)
    unreachable)

  (func (export "count") (result i32)
    (call $grow_all)
    (call $output_u64 (i64.extend_i32_u (memory.size)))
    (i32.const 0)))
