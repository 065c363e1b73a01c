;; init_modes.wat: a reactor whose _initialize does what the first byte of the
;; call's input says (go-sdk runs _initialize inside the call, after the input
;; is set). run returns 0 with no output.
;;   "l"  loops forever: fuel_exhausted, or timeout with a large budget
;;   "t"  unreachable: trap
;;   "m"  grows memory until refused, then unreachable: memory_limit
;;   "o"  sets an output over any cap: too_large (a host function's panic)
;;   else returns: run succeeds
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)
  (func (export "_initialize")
    (local $c i32)
    (if (i64.eqz (call $input_length)) (then (return)))
    (local.set $c (call $input_load_u8 (i64.const 0)))
    (if (i32.eq (local.get $c) (i32.const 0x6c)) ;; l
      (then (loop $l (br $l))))
    (if (i32.eq (local.get $c) (i32.const 0x74)) ;; t
      (then unreachable))
    (if (i32.eq (local.get $c) (i32.const 0x6d)) ;; m
      (then
        (loop $g (br_if $g (i32.ge_s (memory.grow (i32.const 16)) (i32.const 0))))
        unreachable))
    (if (i32.eq (local.get $c) (i32.const 0x6f)) ;; o
      (then (call $output_set (i64.const 0) (i64.const 0x7fffffffffff)))))
  (func (export "run") (result i32) (i32.const 0))
  ;; trap_after_init: _initialize returns normally, then this export traps:
  ;; trap (not the skill's own error)
  (func (export "trap_after_init") (result i32) unreachable)
)
