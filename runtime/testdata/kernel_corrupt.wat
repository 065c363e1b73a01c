;; kernel_corrupt.wat: tries to corrupt the Extism kernel's allocator.
;;
;; The kernel keeps a 12-byte header before every block ({status u8, size u32,
;; used u32} on wasm32) in the memory the guest writes through store_u8 and
;; store_u64. run allocates a small block and a 60,000-byte one, overwrites
;; the size field of the small block's header with 0xFFFFFFF4, so that "next
;; block = header + 12 + size" wraps (32-bit) back onto the same header, then
;; allocates 6,000 bytes, which no longer fit the first page: the kernel walks
;; its block list and loops forever in unmetered code that nothing can
;; preempt (measured on plain go-sdk v1.7.1: the call never returns).
;; root does the same to the allocator's root record (offset 1..).
;; Host reports: trap naming the store ("outside every block"), promptly.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (local $p i64)
    (local.set $p (call $alloc (i64.const 16)))
    ;; Fill the kernel's first page, so that the next allocation cannot bump
    ;; and must walk the block list (go-sdk's kernel v1.7.0 reuses blocks
    ;; only then).
    (drop (call $alloc (i64.const 60000)))
    ;; The header is {status u8, pad, size u32, used u32} at p-12: size at p-8.
    (call $store_u64 (i64.sub (local.get $p) (i64.const 8)) (i64.const 0x00000010FFFFFFF4))
    (drop (call $alloc (i64.const 6000)))
    (i32.const 0))
  (func (export "root") (result i32)
    (drop (call $alloc (i64.const 16)))
    (call $store_u8 (i64.const 9) (i32.const 0xff))
    (drop (call $alloc (i64.const 16)))
    (i32.const 0)))
