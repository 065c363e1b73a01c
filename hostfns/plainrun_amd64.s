//go:build !purego

#include "textflag.h"

// The bytes compared with, 32 of each: 0x20 (signed 0x20 > b: b below 0x20
// or at or above 0x80), then " & < > \. Loaded from memory: six
// VPBROADCASTBs cost 5x the scan of 4 KiB on the reference machine.
DATA consts<>+0(SB)/8, $0x2020202020202020
DATA consts<>+8(SB)/8, $0x2020202020202020
DATA consts<>+16(SB)/8, $0x2020202020202020
DATA consts<>+24(SB)/8, $0x2020202020202020
DATA consts<>+32(SB)/8, $0x2222222222222222
DATA consts<>+40(SB)/8, $0x2222222222222222
DATA consts<>+48(SB)/8, $0x2222222222222222
DATA consts<>+56(SB)/8, $0x2222222222222222
DATA consts<>+64(SB)/8, $0x2626262626262626
DATA consts<>+72(SB)/8, $0x2626262626262626
DATA consts<>+80(SB)/8, $0x2626262626262626
DATA consts<>+88(SB)/8, $0x2626262626262626
DATA consts<>+96(SB)/8, $0x3c3c3c3c3c3c3c3c
DATA consts<>+104(SB)/8, $0x3c3c3c3c3c3c3c3c
DATA consts<>+112(SB)/8, $0x3c3c3c3c3c3c3c3c
DATA consts<>+120(SB)/8, $0x3c3c3c3c3c3c3c3c
DATA consts<>+128(SB)/8, $0x3e3e3e3e3e3e3e3e
DATA consts<>+136(SB)/8, $0x3e3e3e3e3e3e3e3e
DATA consts<>+144(SB)/8, $0x3e3e3e3e3e3e3e3e
DATA consts<>+152(SB)/8, $0x3e3e3e3e3e3e3e3e
DATA consts<>+160(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA consts<>+168(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA consts<>+176(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA consts<>+184(SB)/8, $0x5c5c5c5c5c5c5c5c
GLOBL consts<>(SB), RODATA|NOPTR, $192

// func plainRunAVX2(s []byte) int
//
// How many bytes at the start of s are plain in a JSON string, counted in
// whole 32-byte blocks: the index of the first byte that needs more than a
// copy (below 0x20, at or above 0x80, or one of " & < > \), or the start of
// the last incomplete block when there is none before it.
TEXT ·plainRunAVX2(SB), NOSPLIT, $0-32
	MOVQ s_base+0(FP), DI
	MOVQ s_len+8(FP), CX
	MOVQ DI, SI
	LEAQ (DI)(CX*1), R11 // end
	VMOVDQU consts<>+0(SB), Y1
	VMOVDQU consts<>+32(SB), Y3
	VMOVDQU consts<>+64(SB), Y5
	VMOVDQU consts<>+96(SB), Y6
	VMOVDQU consts<>+128(SB), Y7
	VMOVDQU consts<>+160(SB), Y8
	LEAQ 32(DI), AX
	CMPQ AX, R11
	JGT  done

	PCALIGN $32
loop:
	VMOVDQU  (DI), Y0
	VPCMPGTB Y0, Y1, Y2
	VPCMPEQB Y0, Y3, Y4
	VPCMPEQB Y0, Y5, Y9
	VPCMPEQB Y0, Y6, Y10
	VPCMPEQB Y0, Y7, Y11
	VPCMPEQB Y0, Y8, Y12
	VPOR     Y4, Y2, Y2
	VPOR     Y10, Y9, Y9
	VPOR     Y12, Y11, Y11
	VPOR     Y9, Y2, Y2
	VPOR     Y11, Y2, Y2
	VPTEST   Y2, Y2
	JNZ      found
	ADDQ     $32, DI
	LEAQ     32(DI), AX
	CMPQ     AX, R11
	JLE      loop

done:
	SUBQ SI, DI
	VZEROUPPER
	MOVQ DI, ret+24(FP)
	RET

found:
	VPMOVMSKB Y2, BX
	BSFL      BX, BX
	ADDQ      BX, DI
	JMP       done
