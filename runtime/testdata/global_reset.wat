;; global_reset.wat: INVALID ON PURPOSE. Built with `wat2wasm --no-check` by
;; scripts/build-fixtures.sh; plain wat2wasm (and wasm-validate) refuse it.
;;
;; The module defines one global (index 0) but run does `global.set 1`, an
;; index out of range: invalid per the spec ("unknown global"). It is aimed at
;; an instrumenter that appends its fuel counter as the next global: after
;; instrumentation index 1 WOULD exist, and this would reset the counter to
;; 2^63-1 and then spin forever on unlimited fuel.
;; Host reports: invalid_input, at load, from validation of the module as
;; submitted (before any instrumentation). The guest never runs.
(module
  (global $mine (mut i64) (i64.const 0))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (global.set 1 (i64.const 0x7FFFFFFFFFFFFFFF))
    (loop (br 0))
    (i32.const 0)))
