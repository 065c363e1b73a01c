;; reserved_fuel.wat: imports from the namespace reserved for buddy's fuel
;; instrumentation, as if to refill its own tank.
;;
;; Imports buddy:fuel.refuel (i64) -> ().
;; run: refuel(2^62), then spins forever.
;; Host reports: forbidden, at load, naming buddy:fuel.refuel (only the
;; instrumenter may emit buddy:fuel imports; a module that brings its own is
;; refused before instrumentation). The guest never runs.
(module
  (import "buddy:fuel" "refuel" (func $refuel (param i64)))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (call $refuel (i64.const 0x4000000000000000))
    (loop (br 0))
    (i32.const 0)))
