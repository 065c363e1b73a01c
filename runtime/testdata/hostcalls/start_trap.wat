;; start_trap.wat: a start section that traps (unreachable). Every call of
;; run must fail with trap.
(module
  (func $start unreachable)
  (start $start)
  (func (export "run") (result i32) (i32.const 0))
)
