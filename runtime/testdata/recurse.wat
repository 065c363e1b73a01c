;; recurse.wat: unbounded recursion, no loop.
;;
;; run: calls $down, which calls itself forever (the add after the call keeps
;;      it from being a tail call).
;;      Host reports: fuel_exhausted if per-call fuel runs out first (the
;;      default 1e9 budget does); otherwise trap (wazero's stack overflow) or
;;      timeout. Never a host crash.
(module
  (memory (export "memory") 1)
  (func $down (param $d i64) (result i64)
    (i64.add (call $down (i64.add (local.get $d) (i64.const 1))) (i64.const 1)))
  (func (export "run") (result i32)
    (drop (call $down (i64.const 0)))
    (i32.const 0)))
