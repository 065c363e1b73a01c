;; sleep.wat: blocks inside a host function.
;;
;; Imports buddy:test.sleep (ms i64) -> (), a function only the tests link: it
;; blocks for ms milliseconds (it should watch its context).
;; run: sleep(10000), returns 0.
;; Host reports: timeout at the call's deadline (e.g. 300 ms), not after 10 s:
;; the deadline must end a call that is blocked in a host function, not only
;; one that is executing wasm.
(module
  (import "buddy:test" "sleep" (func $sleep (param i64)))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (call $sleep (i64.const 10000))
    (i32.const 0)))
