;; undeclared_user.wat: imports a host function from Extism's default user
;; namespace that nobody provides.
;;
;; Imports extism:host/user.launch_missiles (i64) -> i64.
;; run: calls it with 0, returns 0.
;; Host reports: forbidden, at load, naming extism:host/user.launch_missiles
;; (buddy's functions live in buddy:host/v1; nothing in extism:host/user is
;; ever linked). The guest never runs.
(module
  (import "extism:host/user" "launch_missiles" (func $launch (param i64) (result i64)))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (drop (call $launch (i64.const 0)))
    (i32.const 0)))
