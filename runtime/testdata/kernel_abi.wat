;; kernel_abi.wat: the Extism kernel ABI, one area per export, for the
;; differential test runtime/kernel_abi_test.go (plain go-sdk vs buddy).
;;
;; Most exports write a transcript as their output: little-endian u64 values
;; ("emit") and raw bytes ("emit8"), gathered in guest memory and copied into
;; one kernel block at the end. A transcript holds values and relations (1 =
;; true, 0 = false), never an absolute kernel offset: another kernel hands out
;; other offsets.
;;
;; alloc         alloc(0) == 0; length(0); for n in 1, 7, 8, 9, 16, 100, 4096,
;;               65536, 1 MiB: alloc(n) != 0, length, length_unsafe,
;;               length(p+1), length(p-1); alloc(17 MiB) == 0
;; free          free then length; alloc after free; free(0), free(p+1),
;;               double free leave live blocks alone; a block allocated after
;;               a dirty block was freed: its first and last word
;; blocks        40 blocks of varied sizes (1 to 4,126 bytes) filled with a
;;               pattern (store_u64 words, store_u8 tail); every 4th freed; 16
;;               more allocated and filled; every live block read back
;;               (load_u8 dump, load_u64 check); then mismatches, overlapping
;;               pairs, wrong lengths, live blocks
;; input         input_length; input_load_u8 at every position; input_load_u64
;;               at every position a word fits; length(input_offset()); load_u8
;;               and load_u64 at input_offset() + every position
;; output_sub    output_set(p + 3, 5) in a 16-byte block "0123456789abcdef":
;;               output "34567"
;; output_empty  output_set(p, 0) of a filled block: empty output
;; output_none   returns 0 without output_set: empty output
;; output_twice  output_set(p + 3, 5); output_set(k, 32) of a fresh block k,
;;               then writes into k: output_offset() == p + 3 and
;;               output_length() as they were after the first set, then
;;               output_offset() == k and output_length() (last set wins; the
;;               output is read when the call ends)
;; error_ret1    output_set("partial output"); error_set(input, or "something
;;               broke" if empty); returns 1
;; error_ret0    output_set("partial output"); error_set(input, or "set but
;;               returned 0" if empty); returns 0
;; error_get     error_get() == 0 before any error_set; error_set(e):
;;               error_get() == e, length(error_get()); error_set(0), then
;;               error_get() == 0; returns 0
;; exit_code     output_set("partial output"), returns 2 without an error
;; reset         (input "abcdefgh") with a block p filled, error and output
;;               set: reset, then before any alloc: input_length(),
;;               length(p), error_get() == 0, output_length(),
;;               input_load_u8(0); then alloc(8): != 0, length, its word
;; misc          memory_bytes() != 0; config_get("no-such-key") == 0 and the
;;               key's length after; get_log_level()
;; vars          var_get("k") == 0 (absent) and the key's length after;
;;               var_set("k", "value-1") and both blocks' lengths after;
;;               var_get("k"): length and bytes of the value; var_set("k", 0)
;;               (delete), var_get("k") == 0
;; log           log_info("kernel_abi log line"), log_debug("kernel_abi debug
;;               line"); each block's length after
;; store_outside input picks where store_u8 writes, then outputs "stored":
;;               "inside" p + 7 of an 8-byte block p; "earlier" p + 7 after
;;               another alloc(8); "past" p + 8; "input" the input block
;;               (input_offset()); "freed" p after free(p); "reset" p after
;;               reset
;;
;; Host reports: what go-sdk v1.7.1 gives, except where buddy's contract
;; differs (listed with the reasons in kernel_abi_test.go).
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "free" (func $free (param i64)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "length_unsafe" (func $length_unsafe (param i64) (result i64)))
  (import "extism:host/env" "load_u8" (func $load_u8 (param i64) (result i32)))
  (import "extism:host/env" "load_u64" (func $load_u64 (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_offset" (func $input_offset (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "input_load_u64" (func $input_load_u64 (param i64) (result i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "output_offset" (func $output_offset (result i64)))
  (import "extism:host/env" "output_length" (func $output_length (result i64)))
  (import "extism:host/env" "error_set" (func $error_set (param i64)))
  (import "extism:host/env" "error_get" (func $error_get (result i64)))
  (import "extism:host/env" "reset" (func $reset))
  (import "extism:host/env" "memory_bytes" (func $memory_bytes (result i64)))
  (import "extism:host/env" "config_get" (func $config_get (param i64) (result i64)))
  (import "extism:host/env" "var_get" (func $var_get (param i64) (result i64)))
  (import "extism:host/env" "var_set" (func $var_set (param i64 i64)))
  (import "extism:host/env" "get_log_level" (func $get_log_level (result i32)))
  (import "extism:host/env" "log_info" (func $log_info (param i64)))
  (import "extism:host/env" "log_debug" (func $log_debug (param i64)))
  (memory (export "memory") 1)
  ;; 0..1023: block pointers (u64); 1024..2047: block sizes (u64, 0 = freed)
  (data (i32.const 2048) "0123456789abcdef")       ;; 16
  (data (i32.const 2080) "something broke")        ;; 15
  (data (i32.const 2112) "set but returned 0")     ;; 18
  (data (i32.const 2144) "partial output")         ;; 14
  (data (i32.const 2176) "no-such-key")            ;; 11
  (data (i32.const 2208) "k")                      ;; 1
  (data (i32.const 2216) "value-1")                ;; 7
  (data (i32.const 2240) "kernel_abi log line")    ;; 19
  (data (i32.const 2272) "kernel_abi debug line")  ;; 21
  (data (i32.const 2304) "stored")                 ;; 6
  (data (i32.const 2320) "inside")                 ;; 6
  (data (i32.const 2336) "past")                   ;; 4
  (data (i32.const 2344) "input")                  ;; 5
  (data (i32.const 2352) "freed")                  ;; 5
  (data (i32.const 2360) "reset")                  ;; 5
  (data (i32.const 2368) "earlier")                ;; 7

  ;; The transcript is written to guest memory at 64 KiB and copied into a
  ;; kernel block at the end: a guest that keeps one kernel block for its
  ;; output and allocates others in between would trip buddy's false trap on
  ;; stores into a block right before a newer one (store_outside "earlier").
  (global $pos (mut i64) (i64.const 0)) ;; bytes of transcript so far

  ;; begin makes room for cap bytes of transcript.
  (func $begin (param $cap i64)
    (local $pages i32)
    (local.set $pages (i32.add (i32.const 2)
      (i32.wrap_i64 (i64.shr_u (local.get $cap) (i64.const 16)))))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then (drop (memory.grow (i32.sub (local.get $pages) (memory.size))))))
    (global.set $pos (i64.const 0)))
  (func $emit (param $v i64)
    (i64.store (i32.wrap_i64 (i64.add (i64.const 65536) (global.get $pos))) (local.get $v))
    (global.set $pos (i64.add (global.get $pos) (i64.const 8))))
  (func $emit8 (param $b i32)
    (i32.store8 (i32.wrap_i64 (i64.add (i64.const 65536) (global.get $pos))) (local.get $b))
    (global.set $pos (i64.add (global.get $pos) (i64.const 1))))
  (func $flag (param $c i32)
    (call $emit (i64.extend_i32_u (local.get $c))))
  ;; finish copies the transcript into a new kernel block (store_u64 words,
  ;; store_u8 tail) and makes it the output.
  (func $finish
    (local $k i64) (local $i i64)
    (local.set $k (call $alloc (global.get $pos)))
    (block $done (loop $words
      (br_if $done (i64.gt_u (i64.add (local.get $i) (i64.const 8)) (global.get $pos)))
      (call $store_u64 (i64.add (local.get $k) (local.get $i))
        (i64.load (i32.wrap_i64 (i64.add (i64.const 65536) (local.get $i)))))
      (local.set $i (i64.add (local.get $i) (i64.const 8)))
      (br $words)))
    (block $done (loop $bytes
      (br_if $done (i64.ge_u (local.get $i) (global.get $pos)))
      (call $store_u8 (i64.add (local.get $k) (local.get $i))
        (i32.load8_u (i32.wrap_i64 (i64.add (i64.const 65536) (local.get $i)))))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $bytes)))
    (call $output_set (local.get $k) (global.get $pos)))

  ;; str copies n bytes of guest memory at src into a new kernel block.
  (func $str (param $src i32) (param $n i32) (result i64)
    (local $k i64) (local $i i32)
    (local.set $k (call $alloc (i64.extend_i32_u (local.get $n))))
    (block $done (loop $copy
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (call $store_u8 (i64.add (local.get $k) (i64.extend_i32_u (local.get $i)))
                      (i32.load8_u (i32.add (local.get $src) (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $copy)))
    (local.get $k))

  ;; input_block copies the input into a new kernel block (via input_load_u8).
  (func $input_block (result i64)
    (local $k i64) (local $n i64) (local $i i64)
    (local.set $n (call $input_length))
    (local.set $k (call $alloc (local.get $n)))
    (block $done (loop $copy
      (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
      (call $store_u8 (i64.add (local.get $k) (local.get $i)) (call $input_load_u8 (local.get $i)))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $copy)))
    (local.get $k))

  ;; input_is reports whether the input equals n bytes of guest memory at src.
  (func $input_is (param $src i32) (param $n i32) (result i32)
    (local $i i32)
    (if (i64.ne (call $input_length) (i64.extend_i32_u (local.get $n))) (then (return (i32.const 0))))
    (block $done (loop $cmp
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (if (i32.ne (call $input_load_u8 (i64.extend_i32_u (local.get $i)))
                  (i32.load8_u (i32.add (local.get $src) (local.get $i))))
        (then (return (i32.const 0))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $cmp)))
    (i32.const 1))

  ;; ---- alloc ----
  (func $probe (param $n i64)
    (local $p i64)
    (local.set $p (call $alloc (local.get $n)))
    (call $flag (i64.ne (local.get $p) (i64.const 0)))
    (call $emit (call $length (local.get $p)))
    (call $emit (call $length_unsafe (local.get $p)))
    (call $emit (call $length (i64.add (local.get $p) (i64.const 1))))
    (call $emit (call $length (i64.sub (local.get $p) (i64.const 1)))))

  (func (export "alloc") (result i32)
    (call $begin (i64.const 1024))
    (call $flag (i64.eqz (call $alloc (i64.const 0))))
    (call $emit (call $length (i64.const 0)))
    (call $probe (i64.const 1))
    (call $probe (i64.const 7))
    (call $probe (i64.const 8))
    (call $probe (i64.const 9))
    (call $probe (i64.const 16))
    (call $probe (i64.const 100))
    (call $probe (i64.const 4096))
    (call $probe (i64.const 65536))
    (call $probe (i64.const 1048576))
    (call $flag (i64.eqz (call $alloc (i64.const 17825792))))
    (call $finish)
    (i32.const 0))

  ;; ---- free ----
  (func (export "free") (result i32)
    (local $p i64) (local $q i64) (local $a i64) (local $b i64) (local $c i64) (local $i i64)
    (call $begin (i64.const 1024))
    (local.set $p (call $alloc (i64.const 16)))
    (call $free (local.get $p))
    (call $emit (call $length (local.get $p)))
    (local.set $q (call $alloc (i64.const 16)))
    (call $flag (i64.ne (local.get $q) (i64.const 0)))
    (call $emit (call $length (local.get $q)))
    (call $free (i64.const 0))
    (call $emit (call $length (local.get $q)))
    (call $free (i64.add (local.get $q) (i64.const 1)))
    (call $emit (call $length (local.get $q)))
    (local.set $a (call $alloc (i64.const 24)))
    (local.set $b (call $alloc (i64.const 24)))
    (call $free (local.get $a))
    (call $free (local.get $a))
    (call $emit (call $length (local.get $a)))
    (call $emit (call $length (local.get $b)))
    (call $emit (call $length (local.get $q)))
    (local.set $c (call $alloc (i64.const 8)))
    (call $flag (i64.ne (local.get $c) (local.get $b)))
    (call $emit (call $length (local.get $c)))
    (call $emit (call $length (local.get $b)))
    ;; a dirty block, freed, then a block of the same size
    (local.set $p (call $alloc (i64.const 64)))
    (block $done (loop $fill
      (br_if $done (i64.ge_u (local.get $i) (i64.const 64)))
      (call $store_u64 (i64.add (local.get $p) (local.get $i)) (i64.const 0xABABABABABABABAB))
      (local.set $i (i64.add (local.get $i) (i64.const 8)))
      (br $fill)))
    (call $free (local.get $p))
    (local.set $p (call $alloc (i64.const 64)))
    (call $emit (call $length (local.get $p)))
    (call $emit (call $load_u64 (local.get $p)))
    (call $emit (call $load_u64 (i64.add (local.get $p) (i64.const 56))))
    (call $finish)
    (i32.const 0))

  ;; ---- blocks ----
  (func $pat (param $i i64) (param $j i64) (result i64)
    (i64.and (i64.add (i64.add (i64.mul (local.get $i) (i64.const 31))
                               (i64.mul (local.get $j) (i64.const 7)))
                      (i64.const 1))
             (i64.const 0xFF)))
  (func $word (param $i i64) (param $j i64) (result i64)
    (local $w i64) (local $k i64)
    (local.set $k (i64.const 8))
    (block $done (loop $next
      (br_if $done (i64.eqz (local.get $k)))
      (local.set $k (i64.sub (local.get $k) (i64.const 1)))
      (local.set $w (i64.or (i64.shl (local.get $w) (i64.const 8))
                            (call $pat (local.get $i) (i64.add (local.get $j) (local.get $k)))))
      (br $next)))
    (local.get $w))
  (func $size_of (param $i i64) (result i64)
    (if (result i64) (i64.eq (i64.rem_u (local.get $i) (i64.const 16)) (i64.const 15))
      (then (i64.add (i64.const 4096) (local.get $i)))
      (else (i64.add (i64.const 1)
              (i64.rem_u (i64.add (i64.mul (i64.mul (local.get $i) (local.get $i)) (i64.const 7))
                                  (i64.mul (local.get $i) (i64.const 13)))
                         (i64.const 150))))))
  (func $ptr (param $i i64) (result i64)
    (i64.load (i32.wrap_i64 (i64.mul (local.get $i) (i64.const 8)))))
  (func $size (param $i i64) (result i64)
    (i64.load (i32.wrap_i64 (i64.add (i64.const 1024) (i64.mul (local.get $i) (i64.const 8))))))
  ;; make allocates block i and fills it with its pattern.
  (func $make (param $i i64)
    (local $p i64) (local $n i64) (local $j i64)
    (local.set $n (call $size_of (local.get $i)))
    (local.set $p (call $alloc (local.get $n)))
    (i64.store (i32.wrap_i64 (i64.mul (local.get $i) (i64.const 8))) (local.get $p))
    (i64.store (i32.wrap_i64 (i64.add (i64.const 1024) (i64.mul (local.get $i) (i64.const 8)))) (local.get $n))
    (block $done (loop $words
      (br_if $done (i64.gt_u (i64.add (local.get $j) (i64.const 8)) (local.get $n)))
      (call $store_u64 (i64.add (local.get $p) (local.get $j)) (call $word (local.get $i) (local.get $j)))
      (local.set $j (i64.add (local.get $j) (i64.const 8)))
      (br $words)))
    (block $done (loop $bytes
      (br_if $done (i64.ge_u (local.get $j) (local.get $n)))
      (call $store_u8 (i64.add (local.get $p) (local.get $j))
                      (i32.wrap_i64 (call $pat (local.get $i) (local.get $j))))
      (local.set $j (i64.add (local.get $j) (i64.const 1)))
      (br $bytes))))

  (func (export "blocks") (result i32)
    (local $i i64) (local $j i64) (local $k i64) (local $p i64) (local $n i64)
    (local $bad i64) (local $over i64) (local $badlen i64) (local $live i64)
    (call $begin (i64.const 65536))
    (block $done (loop $next
      (br_if $done (i64.ge_u (local.get $i) (i64.const 40)))
      (call $make (local.get $i))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $next)))
    ;; free every 4th (1, 5, 9, ...)
    (local.set $i (i64.const 1))
    (block $done (loop $next
      (br_if $done (i64.ge_u (local.get $i) (i64.const 40)))
      (call $free (call $ptr (local.get $i)))
      (i64.store (i32.wrap_i64 (i64.add (i64.const 1024) (i64.mul (local.get $i) (i64.const 8)))) (i64.const 0))
      (local.set $i (i64.add (local.get $i) (i64.const 4)))
      (br $next)))
    (local.set $i (i64.const 40))
    (block $done (loop $next
      (br_if $done (i64.ge_u (local.get $i) (i64.const 56)))
      (call $make (local.get $i))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $next)))
    ;; read every live block back
    (local.set $i (i64.const 0))
    (block $done (loop $next
      (br_if $done (i64.ge_u (local.get $i) (i64.const 56)))
      (local.set $p (call $ptr (local.get $i)))
      (local.set $n (call $size (local.get $i)))
      (if (i64.ne (local.get $n) (i64.const 0)) (then
        (local.set $live (i64.add (local.get $live) (i64.const 1)))
        (if (i64.ne (call $length (local.get $p)) (local.get $n))
          (then (local.set $badlen (i64.add (local.get $badlen) (i64.const 1)))))
        (local.set $j (i64.const 0))
        (block $d2 (loop $b
          (br_if $d2 (i64.ge_u (local.get $j) (local.get $n)))
          (call $emit8 (call $load_u8 (i64.add (local.get $p) (local.get $j))))
          (local.set $j (i64.add (local.get $j) (i64.const 1)))
          (br $b)))
        (local.set $j (i64.const 0))
        (block $d2 (loop $w
          (br_if $d2 (i64.gt_u (i64.add (local.get $j) (i64.const 8)) (local.get $n)))
          (if (i64.ne (call $load_u64 (i64.add (local.get $p) (local.get $j)))
                      (call $word (local.get $i) (local.get $j)))
            (then (local.set $bad (i64.add (local.get $bad) (i64.const 1)))))
          (local.set $j (i64.add (local.get $j) (i64.const 1)))
          (br $w)))))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $next)))
    ;; pairs of live blocks that overlap
    (local.set $i (i64.const 0))
    (block $done (loop $next
      (br_if $done (i64.ge_u (local.get $i) (i64.const 56)))
      (local.set $k (i64.add (local.get $i) (i64.const 1)))
      (block $d2 (loop $pair
        (br_if $d2 (i64.ge_u (local.get $k) (i64.const 56)))
        (if (i32.and (i32.and (i64.ne (call $size (local.get $i)) (i64.const 0))
                              (i64.ne (call $size (local.get $k)) (i64.const 0)))
                     (i32.and (i64.lt_u (call $ptr (local.get $i))
                                        (i64.add (call $ptr (local.get $k)) (call $size (local.get $k))))
                              (i64.lt_u (call $ptr (local.get $k))
                                        (i64.add (call $ptr (local.get $i)) (call $size (local.get $i))))))
          (then (local.set $over (i64.add (local.get $over) (i64.const 1)))))
        (local.set $k (i64.add (local.get $k) (i64.const 1)))
        (br $pair)))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $next)))
    (call $emit (local.get $bad))
    (call $emit (local.get $over))
    (call $emit (local.get $badlen))
    (call $emit (local.get $live))
    (call $finish)
    (i32.const 0))

  ;; ---- input ----
  (func (export "input") (result i32)
    (local $n i64) (local $i i64) (local $in i64)
    (local.set $n (call $input_length))
    (local.set $in (call $input_offset))
    (call $begin (i64.add (i64.const 64) (i64.mul (local.get $n) (i64.const 18))))
    (call $emit (local.get $n))
    (call $emit (call $length (local.get $in)))
    (block $done (loop $next
      (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
      (call $emit8 (call $input_load_u8 (local.get $i)))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $next)))
    (local.set $i (i64.const 0))
    (block $done (loop $next
      (br_if $done (i64.gt_u (i64.add (local.get $i) (i64.const 8)) (local.get $n)))
      (call $emit (call $input_load_u64 (local.get $i)))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $next)))
    (local.set $i (i64.const 0))
    (block $done (loop $next
      (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
      (call $emit8 (call $load_u8 (i64.add (local.get $in) (local.get $i))))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $next)))
    (local.set $i (i64.const 0))
    (block $done (loop $next
      (br_if $done (i64.gt_u (i64.add (local.get $i) (i64.const 8)) (local.get $n)))
      (call $emit (call $load_u64 (i64.add (local.get $in) (local.get $i))))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $next)))
    (call $finish)
    (i32.const 0))

  ;; ---- output ----
  (func (export "output_sub") (result i32)
    (local $p i64)
    (local.set $p (call $str (i32.const 2048) (i32.const 16)))
    (call $output_set (i64.add (local.get $p) (i64.const 3)) (i64.const 5))
    (i32.const 0))

  (func (export "output_empty") (result i32)
    (local $p i64)
    (local.set $p (call $str (i32.const 2048) (i32.const 16)))
    (call $output_set (local.get $p) (i64.const 0))
    (i32.const 0))

  (func (export "output_none") (result i32)
    (drop (call $str (i32.const 2048) (i32.const 16)))
    (i32.const 0))

  (func (export "output_twice") (result i32)
    (local $p i64) (local $k i64) (local $off i64) (local $len i64)
    (local.set $p (call $str (i32.const 2048) (i32.const 16)))
    (call $output_set (i64.add (local.get $p) (i64.const 3)) (i64.const 5))
    (local.set $off (call $output_offset))
    (local.set $len (call $output_length))
    (local.set $k (call $alloc (i64.const 32)))
    (call $output_set (local.get $k) (i64.const 32))
    ;; written after output_set: the output is read when the call ends
    (call $store_u64 (local.get $k)
      (i64.extend_i32_u (i64.eq (local.get $off) (i64.add (local.get $p) (i64.const 3)))))
    (call $store_u64 (i64.add (local.get $k) (i64.const 8)) (local.get $len))
    (call $store_u64 (i64.add (local.get $k) (i64.const 16))
      (i64.extend_i32_u (i64.eq (call $output_offset) (local.get $k))))
    (call $store_u64 (i64.add (local.get $k) (i64.const 24)) (call $output_length))
    (i32.const 0))

  ;; ---- errors ----
  (func $partial
    (call $output_set (call $str (i32.const 2144) (i32.const 14)) (i64.const 14)))

  (func (export "error_ret1") (result i32)
    (call $partial)
    (if (i64.eqz (call $input_length))
      (then (call $error_set (call $str (i32.const 2080) (i32.const 15))))
      (else (call $error_set (call $input_block))))
    (i32.const 1))

  (func (export "error_ret0") (result i32)
    (call $partial)
    (if (i64.eqz (call $input_length))
      (then (call $error_set (call $str (i32.const 2112) (i32.const 18))))
      (else (call $error_set (call $input_block))))
    (i32.const 0))

  (func (export "error_get") (result i32)
    (local $e i64)
    (call $begin (i64.const 64))
    (call $flag (i64.eqz (call $error_get)))
    (local.set $e (call $str (i32.const 2080) (i32.const 15)))
    (call $error_set (local.get $e))
    (call $flag (i64.eq (call $error_get) (local.get $e)))
    (call $emit (call $length (call $error_get)))
    (call $error_set (i64.const 0))
    (call $flag (i64.eqz (call $error_get)))
    (call $finish)
    (i32.const 0))

  (func (export "exit_code") (result i32)
    (call $partial)
    (i32.const 2))

  ;; ---- reset ----
  (func (export "reset") (result i32)
    (local $p i64) (local $q i64)
    (local $inlen i64) (local $plen i64) (local $err i64) (local $outlen i64) (local $in0 i64)
    (local.set $p (call $str (i32.const 2048) (i32.const 16)))
    (call $error_set (call $str (i32.const 2080) (i32.const 15)))
    (call $output_set (local.get $p) (i64.const 16))
    (call $reset)
    (local.set $inlen (call $input_length))
    (local.set $plen (call $length (local.get $p)))
    (local.set $err (i64.extend_i32_u (i64.eqz (call $error_get))))
    (local.set $outlen (call $output_length))
    (local.set $in0 (i64.extend_i32_u (call $input_load_u8 (i64.const 0))))
    (call $begin (i64.const 128))
    (call $emit (local.get $inlen))
    (call $emit (local.get $plen))
    (call $emit (local.get $err))
    (call $emit (local.get $outlen))
    (call $emit (local.get $in0))
    (local.set $q (call $alloc (i64.const 8)))
    (call $flag (i64.ne (local.get $q) (i64.const 0)))
    (call $emit (call $length (local.get $q)))
    (call $emit (call $load_u64 (local.get $q)))
    (call $finish)
    (i32.const 0))

  ;; ---- misc ----
  (func (export "misc") (result i32)
    (local $k i64)
    (call $begin (i64.const 64))
    (call $flag (i64.ne (call $memory_bytes) (i64.const 0)))
    (local.set $k (call $str (i32.const 2176) (i32.const 11)))
    (call $emit (call $config_get (local.get $k)))
    (call $emit (call $length (local.get $k)))
    (call $emit (i64.extend_i32_u (call $get_log_level)))
    (call $finish)
    (i32.const 0))

  ;; ---- vars ----
  (func (export "vars") (result i32)
    (local $k i64) (local $v i64) (local $r i64) (local $n i64) (local $i i64)
    (call $begin (i64.const 128))
    (local.set $k (call $str (i32.const 2208) (i32.const 1)))
    (call $emit (call $var_get (local.get $k)))
    (call $emit (call $length (local.get $k)))
    (local.set $k (call $str (i32.const 2208) (i32.const 1)))
    (local.set $v (call $str (i32.const 2216) (i32.const 7)))
    (call $var_set (local.get $k) (local.get $v))
    (call $emit (call $length (local.get $k)))
    (call $emit (call $length (local.get $v)))
    (local.set $r (call $var_get (call $str (i32.const 2208) (i32.const 1))))
    (local.set $n (call $length (local.get $r)))
    (call $emit (local.get $n))
    (block $done (loop $next
      (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
      (call $emit8 (call $load_u8 (i64.add (local.get $r) (local.get $i))))
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br $next)))
    (call $var_set (call $str (i32.const 2208) (i32.const 1)) (i64.const 0))
    (call $emit (call $var_get (call $str (i32.const 2208) (i32.const 1))))
    (call $finish)
    (i32.const 0))

  ;; ---- log ----
  (func (export "log") (result i32)
    (local $m i64) (local $d i64)
    (call $begin (i64.const 64))
    (local.set $m (call $str (i32.const 2240) (i32.const 19)))
    (local.set $d (call $str (i32.const 2272) (i32.const 21)))
    (call $log_info (local.get $m))
    (call $log_debug (local.get $d))
    (call $emit (call $length (local.get $m)))
    (call $emit (call $length (local.get $d)))
    (call $finish)
    (i32.const 0))

  ;; ---- stores outside a live guest block ----
  (func (export "store_outside") (result i32)
    (local $p i64)
    (local.set $p (call $alloc (i64.const 8)))
    (if (call $input_is (i32.const 2320) (i32.const 6)) ;; inside
      (then (call $store_u8 (i64.add (local.get $p) (i64.const 7)) (i32.const 1))))
    (if (call $input_is (i32.const 2368) (i32.const 7)) ;; earlier
      (then (drop (call $alloc (i64.const 8)))
            (call $store_u8 (i64.add (local.get $p) (i64.const 7)) (i32.const 1))))
    (if (call $input_is (i32.const 2336) (i32.const 4)) ;; past
      (then (call $store_u8 (i64.add (local.get $p) (i64.const 8)) (i32.const 1))))
    (if (call $input_is (i32.const 2344) (i32.const 5)) ;; input
      (then (call $store_u8 (call $input_offset) (i32.const 88))))
    (if (call $input_is (i32.const 2352) (i32.const 5)) ;; freed
      (then (call $free (local.get $p))
            (call $store_u8 (local.get $p) (i32.const 1))))
    (if (call $input_is (i32.const 2360) (i32.const 5)) ;; reset
      (then (call $reset)
            (call $store_u8 (local.get $p) (i32.const 1))))
    (call $output_set (call $str (i32.const 2304) (i32.const 6)) (i64.const 6))
    (i32.const 0)))
