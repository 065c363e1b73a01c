;; start_grow.wat: a start section that grows memory until refused, then
;; traps, as a guest's allocator aborts. Every call of run must fail with
;; memory_limit.
(module
  (memory 1)
  (func $start
    (loop $l (br_if $l (i32.ge_s (memory.grow (i32.const 16)) (i32.const 0))))
    unreachable)
  (start $start)
  (func (export "run") (result i32) (i32.const 0))
)
