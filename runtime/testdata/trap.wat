;; trap.wat: plain wasm traps.
;;
;; run:      unreachable.
;; div0:     i32.div_s(1, 0): integer divide by zero.
;; oob_load: i32.load at 0xFFFFFFF0 on a 1-page memory: out of bounds.
;; Host reports: trap for each, with wazero's reason in the detail
;; ("unreachable", "integer divide by zero", "out of bounds memory access").
(module
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    unreachable)
  (func (export "div0") (result i32)
    (i32.div_s (i32.const 1) (i32.const 0)))
  (func (export "oob_load") (result i32)
    (i32.load (i32.const 0xFFFFFFF0))))
