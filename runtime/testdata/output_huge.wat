;; output_huge.wat: output blocks that are too big or not there at all.
;;
;; run:         p = alloc(1 GiB); output_set(p, 1 GiB). Under a memory cap the
;;              kernel refuses the alloc and p = 0, so this is output_set(0,
;;              1 GiB): a length far over the output cap and over kernel memory.
;;              Host reports: too_large (output over its cap), decided from the
;;              length alone, before reading or allocating 1 GiB on the host;
;;              memory_limit is also acceptable if the refused alloc is noticed
;;              first. Never a 1 GiB allocation on the host, never success.
;; bogus:       output_set(0x7FFFFFFF0000, 0x10000000000): offset and length
;;              (1 TiB) far outside kernel memory. Host reports: too_large (the
;;              length check comes first) or trap; never success with an empty
;;              output (plain go-sdk 1.7.1 returns rc=0 and empty output here).
;; bogus_small: output_set(0xFFFFFFFFFFF0, 16): a small length at an offset
;;              outside kernel memory. Host reports: trap.
;; bogus_alias: output_set(0x100000000, 16): 2^32 truncates to kernel offset 0
;;              in go-sdk (uint32(offset)), which would hand the kernel's own
;;              header to the host as output. Host reports: trap.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (call $output_set (call $alloc (i64.const 0x40000000)) (i64.const 0x40000000))
    (i32.const 0))
  (func (export "bogus") (result i32)
    (call $output_set (i64.const 0x7FFFFFFF0000) (i64.const 0x10000000000))
    (i32.const 0))
  (func (export "bogus_small") (result i32)
    (call $output_set (i64.const 0xFFFFFFFFFFF0) (i64.const 16))
    (i32.const 0))
  (func (export "bogus_alias") (result i32)
    (call $output_set (i64.const 0x100000000) (i64.const 16))
    (i32.const 0)))
