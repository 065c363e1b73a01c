;; isolation.wat: a guest whose initialiser and start function are pure (they
;; call no import), so buddy runs them once at Load and starts every call's
;; fresh instance from their state (runtime/snapshot_test.go). Every call must
;; still see exactly the initialised state, whatever ran before it.
;;
;; _initialize  writes 0x5A over [1024, 5120), grows memory to 2 pages, sets
;;              $g = 41 (i64) and $f = 2.5 (f64)
;; start        (runs after _initialize, as a call runs them) writes 0xA5 over
;;              [65636, 65836) of the page _initialize grew, sets $h = 7
;; dirty        grows memory to 4 pages and fills all of it with 0xAB, sets
;;              $g, $h and $f to other values, fills a 64 KiB kernel block
;;              with 0xAB and sets the var "k"
;; check        traps (unreachable) unless: memory is 2 pages; [1024, 5120) is
;;              0x5A, [65636, 65836) is 0xA5 and every other byte is 0; $g = 41,
;;              $h = 7, $f = 2.5; table slots 0 and 1 call functions returning 1
;;              and 2; a new 64 KiB kernel block is all zeros; the var "k" is
;;              absent. Then increments $g and outputs it in decimal: "42" on
;;              every call.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "load_u64" (func $load_u64 (param i64) (result i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "var_get" (func $var_get (param i64) (result i64)))
  (import "extism:host/env" "var_set" (func $var_set (param i64 i64)))
  (memory (export "memory") 1)
  (global $g (mut i64) (i64.const 0))
  (global $h (mut i32) (i32.const 0))
  (global $f (mut f64) (f64.const 0))
  (type $ret (func (result i32)))
  (table 2 funcref)
  (elem (i32.const 0) $one $two)
  (func $one (result i32) (i32.const 1))
  (func $two (result i32) (i32.const 2))

  (func (export "_initialize")
    (memory.fill (i32.const 1024) (i32.const 0x5A) (i32.const 4096))
    (drop (memory.grow (i32.const 1)))
    (global.set $g (i64.const 41))
    (global.set $f (f64.const 2.5)))

  (func $start
    (memory.fill (i32.const 65636) (i32.const 0xA5) (i32.const 200))
    (global.set $h (i32.const 7)))
  (start $start)

  ;; a one-byte kernel block holding c
  (func $byte (param $c i32) (result i64)
    (local $p i64)
    (local.set $p (call $alloc (i64.const 1)))
    (call $store_u8 (local.get $p) (local.get $c))
    (local.get $p))

  (func (export "dirty") (result i32)
    (local $k i64) (local $i i64)
    (drop (memory.grow (i32.sub (i32.const 4) (memory.size))))
    (memory.fill (i32.const 0) (i32.const 0xAB) (i32.const 0x40000))
    (global.set $g (i64.const -1))
    (global.set $h (i32.const -1))
    (global.set $f (f64.const -1))
    (local.set $k (call $alloc (i64.const 65536)))
    (block $done
      (loop $next
        (br_if $done (i64.ge_u (local.get $i) (i64.const 65536)))
        (call $store_u64 (i64.add (local.get $k) (local.get $i)) (i64.const 0xABABABABABABABAB))
        (local.set $i (i64.add (local.get $i) (i64.const 8)))
        (br $next)))
    (call $var_set (call $byte (i32.const 0x6b)) (call $byte (i32.const 0x76)))
    (i32.const 0))

  ;; want returns the byte every address a holds in the initialised state.
  (func $want (param $a i32) (result i32)
    (if (i32.and (i32.ge_u (local.get $a) (i32.const 1024)) (i32.lt_u (local.get $a) (i32.const 5120)))
      (then (return (i32.const 0x5A))))
    (if (i32.and (i32.ge_u (local.get $a) (i32.const 65636)) (i32.lt_u (local.get $a) (i32.const 65836)))
      (then (return (i32.const 0xA5))))
    (i32.const 0))

  (func (export "check") (result i32)
    (local $a i32) (local $k i64) (local $j i64) (local $o i64)
    (if (i32.ne (memory.size) (i32.const 2)) (then unreachable))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $a) (i32.const 0x20000)))
        (if (i32.ne (i32.load8_u (local.get $a)) (call $want (local.get $a))) (then unreachable))
        (local.set $a (i32.add (local.get $a) (i32.const 1)))
        (br $next)))
    (if (i64.ne (global.get $g) (i64.const 41)) (then unreachable))
    (if (i32.ne (global.get $h) (i32.const 7)) (then unreachable))
    (if (f64.ne (global.get $f) (f64.const 2.5)) (then unreachable))
    (if (i32.ne (call_indirect (type $ret) (i32.const 0)) (i32.const 1)) (then unreachable))
    (if (i32.ne (call_indirect (type $ret) (i32.const 1)) (i32.const 2)) (then unreachable))
    (local.set $k (call $alloc (i64.const 65536)))
    (block $done2
      (loop $next2
        (br_if $done2 (i64.ge_u (local.get $j) (i64.const 65536)))
        (if (i64.ne (call $load_u64 (i64.add (local.get $k) (local.get $j))) (i64.const 0)) (then unreachable))
        (local.set $j (i64.add (local.get $j) (i64.const 8)))
        (br $next2)))
    (if (i64.ne (call $var_get (call $byte (i32.const 0x6b))) (i64.const 0)) (then unreachable))
    (global.set $g (i64.add (global.get $g) (i64.const 1)))
    ;; output "42": the two digits of $g
    (local.set $o (call $alloc (i64.const 2)))
    (call $store_u8 (local.get $o) (i32.add (i32.const 48) (i32.wrap_i64 (i64.div_u (global.get $g) (i64.const 10)))))
    (call $store_u8 (i64.add (local.get $o) (i64.const 1)) (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (global.get $g) (i64.const 10)))))
    (call $output_set (local.get $o) (i64.const 2))
    (i32.const 0)))
