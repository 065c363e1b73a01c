;; import_memory.wat: a non-function import.
;;
;; Imports a memory, extism:host/env.memory (min 1 page), instead of defining
;; one (on wazero it would be the kernel's memory if the kernel module were
;; registered under that name and exported it as "memory").
;; run: stores 42 at offset 0 of the imported memory, returns 0.
;; Host reports: forbidden, at load: only function imports are allowed. The
;; guest never runs.
(module
  (import "extism:host/env" "memory" (memory 1))
  (func (export "run") (result i32)
    (i32.store8 (i32.const 0) (i32.const 42))
    (i32.const 0)))
