;; alloc_spam.wat: kernel work the guest's own instruction count hides.
;;
;; run: loops forever calling extism:host/env.alloc(1) and dropping the result.
;;      Each call runs the kernel's allocator (a walk over its blocks, then a
;;      memory.grow of kernel memory), which is far more work than the 4 guest
;;      instructions around it; once the kernel memory is full, alloc returns 0
;;      and the loop keeps going.
;;      Host reports: fuel_exhausted (host/kernel calls must be charged, the
;;      kernel's instructions too or a fixed cost per call); the kernel memory
;;      must stay within the memory cap. timeout only if fuel is unlimited.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (loop $forever
      (drop (call $alloc (i64.const 1)))
      (br $forever))
    (i32.const 0)))
