;; bigmem.wat: asks for more memory than the cap up front.
;;
;; Declares (memory 1000): a 1000-page (62.5 MiB) minimum.
;; run: returns 0 (never reached).
;; Host reports: memory_limit, at load: the minimum is over a 16 MiB cap
;; (256 pages). No 62.5 MiB allocation happens.
(module
  (memory (export "memory") 1000)
  (func (export "run") (result i32) (i32.const 0)))
