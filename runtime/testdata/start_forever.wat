;; start_forever.wat: the start function never returns.
;;
;; The start section names $forever, a (loop (br 0)); it runs during
;; instantiation, before any export can be called. run returns 0 (never
;; reached).
;; Host reports: fuel_exhausted (if instantiation runs under the call's fuel)
;; or timeout (the deadline must cover instantiation too). Never a hang at
;; load.
(module
  (memory (export "memory") 1)
  (func $forever (loop (br 0)))
  (start $forever)
  (func (export "run") (result i32) (i32.const 0)))
