;; fill.wat: bulk-memory work that costs one instruction but touches megabytes.
;;
;; run:      memory.grow(63) (1 -> 64 pages = 4 MiB; traps if refused), then
;;           100,000 times: memory.fill(0, i & 0xff, 4 MiB). That is ~400 GB of
;;           writes (tens of seconds) but only ~1M wasm instructions.
;;           Host reports: fuel_exhausted with the default 1e9 budget, long
;;           before the loop ends (bulk ops must be charged by length: 1e9 is
;;           gone after ~240 fills). Uncharged, it would end in timeout.
;; fill_oob: one memory.fill(0, 0, 0xFFFFFFF0) on the 1-page memory.
;;           Host reports: trap (out of bounds). A host that charges the length
;;           before the bounds check may report fuel_exhausted instead when the
;;           budget is under 4.29e9 (the default 1e9 is): both are correct,
;;           success is not.
;; fill_oob_small: memory.fill(0, 0, 65537) on the 1-page memory: one byte
;;           too far, cheap to charge. Host reports: trap.
;; fill_oob_wrap:  memory.fill(0xFFFFFFF0, 0, 0x20): dst + len wraps past 2^32
;;           (a bounds check done in 32 bits would pass). Host reports: trap.
(module
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (local $i i32)
    (if (i32.eq (memory.grow (i32.const 63)) (i32.const -1)) (then unreachable))
    (block $done (loop $again
      (br_if $done (i32.ge_u (local.get $i) (i32.const 100000)))
      (memory.fill (i32.const 0) (local.get $i) (i32.const 0x400000))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $again)))
    (i32.const 0))
  (func (export "fill_oob") (result i32)
    (memory.fill (i32.const 0) (i32.const 0) (i32.const 0xFFFFFFF0))
    (i32.const 0))
  (func (export "fill_oob_small") (result i32)
    (memory.fill (i32.const 0) (i32.const 0) (i32.const 65537))
    (i32.const 0))
  (func (export "fill_oob_wrap") (result i32)
    (memory.fill (i32.const 0xFFFFFFF0) (i32.const 0) (i32.const 0x20))
    (i32.const 0)))
