;; http_request.wat: tries the Extism kernel's own HTTP client.
;;
;; Imports extism:host/env.http_request (req i64, body i64) -> i64.
;; run: http_request(0, 0), returns 0.
;; Host reports: forbidden, at load, naming extism:host/env.http_request (the
;; only route to the network is buddy:host/v1.http_get, which checks grants).
;; The guest never runs.
(module
  (import "extism:host/env" "http_request" (func $http_request (param i64 i64) (result i64)))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (drop (call $http_request (i64.const 0) (i64.const 0)))
    (i32.const 0)))
