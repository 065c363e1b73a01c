;; spin.wat: the simplest infinite loop.
;;
;; run: (loop (br 0)), never returns.
;;      Host reports: fuel_exhausted (fuel metering charges every back-edge);
;;      timeout if fuel is unlimited and a deadline is set. Never a hang.
(module
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (loop (br 0))
    (i32.const 0)))
