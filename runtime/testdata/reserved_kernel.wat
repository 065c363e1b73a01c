;; reserved_kernel.wat: imports from the other reserved namespace, buddy:kernel.
;;
;; Imports buddy:kernel.alloc (i64) -> i64 (the name does not matter: the whole
;; namespace is reserved).
;; run: alloc(16), returns 0.
;; Host reports: forbidden, at load, naming buddy:kernel.alloc. The guest never
;; runs.
(module
  (import "buddy:kernel" "alloc" (func $alloc (param i64) (result i64)))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (drop (call $alloc (i64.const 16)))
    (i32.const 0)))
