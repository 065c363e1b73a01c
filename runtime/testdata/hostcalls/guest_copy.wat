;; buddy:host/v1.kernel_read and kernel_write: bulk copies between the Extism
;; kernel and the guest's own linear memory (one page).
;; run                 echo: kernel_read the input into guest memory at 1024,
;;                     kernel_write it into a fresh block, output it:
;;                     output = input (inputs up to 60 KiB)
;; read_kernel_oob     kernel_read(far, 0, 8): trap "outside kernel memory"
;; read_guest_oob      kernel_read(input, 65530, 16): trap "outside the guest's memory"
;; write_guest_oob     kernel_write(block, 65530, 16): trap "outside the guest's memory"
;; write_past_block    kernel_write(block+4, 0, 8) into an 8-byte block: trap "outside every block"
;; write_freed         kernel_write into a freed block: trap "outside every block"
;; zero                kernel_read and kernel_write of 0 bytes at offset 0, and
;;                     kernel_read/kernel_write of 0 bytes far outside either memory:
;;                     success, output "" (a copy of nothing is a no-op)
;; out_write           output_write: kernel_read the input into guest memory
;;                     at 1024 and output it from there: output = input
;; out_write_oob       output_write(65530, 16): trap "outside the guest's memory"
;; out_write_then_set  output_write("guest"), then output_set of a block
;;                     "kernel": output "kernel" (the last one wins)
;; out_set_then_write  the other way round: output "guest"
;; out_write_empty     output_write(0, 0) after output_set("kernel"): output ""
;; in_read             input_read of the whole input to 1024, output_write of
;;                     it: output = input
;; in_read_over        input_read of one byte more than the input: trap
;; in_read_oob         input_read(65530, 16): trap "outside the guest's memory"
;; in_read_after_set   input_set to a block "kernel", then input_read of 6
;;                     bytes: output "kernel"
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_offset" (func $input_offset (result i64)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "free" (func $free (param i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "buddy:host/v1" "kernel_read" (func $kread (param i64 i32 i32)))
  (import "buddy:host/v1" "kernel_write" (func $kwrite (param i64 i32 i32)))
  (import "buddy:host/v1" "output_write" (func $owrite (param i32 i32)))
  (import "buddy:host/v1" "input_read" (func $iread (param i32 i32)))
  (import "extism:host/env" "input_set" (func $input_set (param i64 i64)))
  (memory 1)
  (data (i32.const 256) "guest")
  (data (i32.const 512) "kernel")

  (func (export "run") (result i32)
    (local $n i64) (local $b i64)
    (local.set $n (call $input_length))
    (call $kread (call $input_offset) (i32.const 1024) (i32.wrap_i64 (local.get $n)))
    (local.set $b (call $alloc (local.get $n)))
    (call $kwrite (local.get $b) (i32.const 1024) (i32.wrap_i64 (local.get $n)))
    (call $output_set (local.get $b) (local.get $n))
    (i32.const 0))

  (func (export "read_kernel_oob") (result i32)
    (call $kread (i64.const 0xFFFFFFFFFFFF) (i32.const 0) (i32.const 8))
    (i32.const 0))

  (func (export "read_guest_oob") (result i32)
    (call $kread (call $input_offset) (i32.const 65530) (i32.const 16))
    (i32.const 0))

  (func (export "write_guest_oob") (result i32)
    (call $kwrite (call $alloc (i64.const 16)) (i32.const 65530) (i32.const 16))
    (i32.const 0))

  (func (export "write_past_block") (result i32)
    (call $kwrite (i64.add (call $alloc (i64.const 8)) (i64.const 4)) (i32.const 0) (i32.const 8))
    (i32.const 0))

  (func (export "write_freed") (result i32)
    (local $b i64)
    (local.set $b (call $alloc (i64.const 8)))
    (call $free (local.get $b))
    (call $kwrite (local.get $b) (i32.const 0) (i32.const 8))
    (i32.const 0))

  (func (export "zero") (result i32)
    (call $kread (i64.const 0) (i32.const 0) (i32.const 0))
    (call $kwrite (i64.const 0) (i32.const 0) (i32.const 0))
    (call $kwrite (i64.const 0xFFFFFFFFFFFF) (i32.const 0) (i32.const 0))
    (call $kread (i64.const 0xFFFFFFFFFFFF) (i32.const 0xFFFFFFF0) (i32.const 0))
    (call $output_set (i64.const 0) (i64.const 0))
    (i32.const 0))

  (func (export "out_write") (result i32)
    (local $n i32)
    (local.set $n (i32.wrap_i64 (call $input_length)))
    (call $kread (call $input_offset) (i32.const 1024) (local.get $n))
    (call $owrite (i32.const 1024) (local.get $n))
    (i32.const 0))

  (func (export "out_write_oob") (result i32)
    (call $owrite (i32.const 65530) (i32.const 16))
    (i32.const 0))

  (func $kernel_block (result i64)
    (local $b i64)
    (local.set $b (call $alloc (i64.const 6)))
    (call $kwrite (local.get $b) (i32.const 512) (i32.const 6))
    (local.get $b))

  (func (export "out_write_then_set") (result i32)
    (call $owrite (i32.const 256) (i32.const 5))
    (call $output_set (call $kernel_block) (i64.const 6))
    (i32.const 0))

  (func (export "out_set_then_write") (result i32)
    (call $output_set (call $kernel_block) (i64.const 6))
    (call $owrite (i32.const 256) (i32.const 5))
    (i32.const 0))

  (func (export "out_write_empty") (result i32)
    (call $output_set (call $kernel_block) (i64.const 6))
    (call $owrite (i32.const 0) (i32.const 0))
    (i32.const 0))

  (func (export "in_read") (result i32)
    (local $n i32)
    (local.set $n (i32.wrap_i64 (call $input_length)))
    (call $iread (i32.const 1024) (local.get $n))
    (call $owrite (i32.const 1024) (local.get $n))
    (i32.const 0))

  (func (export "in_read_over") (result i32)
    (call $iread (i32.const 1024) (i32.add (i32.wrap_i64 (call $input_length)) (i32.const 1)))
    (i32.const 0))

  (func (export "in_read_oob") (result i32)
    (call $iread (i32.const 65530) (i32.const 16))
    (i32.const 0))

  (func (export "in_read_after_set") (result i32)
    (call $input_set (call $kernel_block) (i64.const 6))
    (call $iread (i32.const 1024) (i32.const 6))
    (call $owrite (i32.const 1024) (i32.const 6))
    (i32.const 0))
)
