//go:build goexperiment.simd && amd64

#include "textflag.h"

// func ntBlock4x2(a *float32, lda int, b *float32, ldb int, k16 int, alpha float32, c *float32, ldc int)
//
// One 4x2 block of gemmNT for k a multiple of 16 (B rows 16-byte
// aligned): the eight dot products of rows a, a+lda, a+2lda, a+3lda with
// rows b, b+ldb over k16 floats, each as gonum's DotUnitary adds them (one
// 8-lane sum per product over 8-float groups, its two 4-lane sums side by
// side; then lo+hi; then two horizontal adds), and c[r*ldc+j] +=
// alpha*dot(r, j), as gonum's serial NT kernel does. Strides are in floats.
TEXT ·ntBlock4x2(SB), NOSPLIT, $0-64
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), R8
	SHLQ $2, R8
	MOVQ b+16(FP), DI
	MOVQ ldb+24(FP), R9
	SHLQ $2, R9
	MOVQ k16+32(FP), CX
	SHLQ $2, CX
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R14
	SHLQ $2, R14
	LEAQ (SI)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (DI)(R9*1), R13
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX
	TESTQ CX, CX
	JEQ finish

loop:
	VMOVUPS (DI)(AX*1), Y8
	VMOVUPS (R13)(AX*1), Y9
	VMULPS (SI)(AX*1), Y8, Y10
	VMULPS (SI)(AX*1), Y9, Y11
	VADDPS Y10, Y0, Y0
	VADDPS Y11, Y1, Y1
	VMULPS (R10)(AX*1), Y8, Y12
	VMULPS (R10)(AX*1), Y9, Y13
	VADDPS Y12, Y2, Y2
	VADDPS Y13, Y3, Y3
	VMULPS (R11)(AX*1), Y8, Y10
	VMULPS (R11)(AX*1), Y9, Y11
	VADDPS Y10, Y4, Y4
	VADDPS Y11, Y5, Y5
	VMULPS (R12)(AX*1), Y8, Y12
	VMULPS (R12)(AX*1), Y9, Y13
	VADDPS Y12, Y6, Y6
	VADDPS Y13, Y7, Y7
	ADDQ $32, AX
	CMPQ AX, CX
	JLT loop

finish:
	// h_r = [lo(s_r0) + hi(s_r0), lo(s_r1) + hi(s_r1)]
	VPERM2F128 $0x20, Y1, Y0, Y8
	VPERM2F128 $0x31, Y1, Y0, Y9
	VADDPS Y9, Y8, Y8
	VPERM2F128 $0x20, Y3, Y2, Y10
	VPERM2F128 $0x31, Y3, Y2, Y11
	VADDPS Y11, Y10, Y10
	VPERM2F128 $0x20, Y5, Y4, Y12
	VPERM2F128 $0x31, Y5, Y4, Y13
	VADDPS Y13, Y12, Y12
	VPERM2F128 $0x20, Y7, Y6, Y14
	VPERM2F128 $0x31, Y7, Y6, Y15
	VADDPS Y15, Y14, Y14
	// hadd(hadd(h0, h1), hadd(h2, h3))
	VHADDPS Y10, Y8, Y8
	VHADDPS Y14, Y12, Y12
	VHADDPS Y12, Y8, Y8
	// Y8 = [rows 0..3 of column 0 | rows 0..3 of column 1]; times alpha.
	VBROADCASTSS alpha+40(FP), Y9
	VMULPS Y9, Y8, Y8
	VEXTRACTF128 $1, Y8, X10
	// X12 = [r0c0 r0c1 r1c0 r1c1], X13 = [r2c0 r2c1 r3c0 r3c1]
	VUNPCKLPS X10, X8, X12
	VUNPCKHPS X10, X8, X13
	// row r: c[r*ldc : r*ldc+2] += its pair (the other lanes are not stored)
	VMOVSD (DX), X14
	VADDPS X12, X14, X14
	VMOVSD X14, (DX)
	ADDQ R14, DX
	VMOVHLPS X12, X12, X12
	VMOVSD (DX), X14
	VADDPS X12, X14, X14
	VMOVSD X14, (DX)
	ADDQ R14, DX
	VMOVSD (DX), X14
	VADDPS X13, X14, X14
	VMOVSD X14, (DX)
	ADDQ R14, DX
	VMOVHLPS X13, X13, X13
	VMOVSD (DX), X14
	VADDPS X13, X14, X14
	VMOVSD X14, (DX)
	VZEROUPPER
	RET

// func axpyBlock4x16(a *float32, ai, al int, b *float32, ldb, k int, alpha float32, c *float32, ldc int)
//
// One 4x16 block of gemmAxpy: for l = 0..k-1 and rows r = 0..3,
// t = alpha*a[r*ai + l*al]; unless t == 0, C[r, 0:16] += t*B[l, 0:16]
// (the terms in l order, each product rounded before its add, as gonum's
// AxpyUnitary loops do; a NaN t is added). The block of C stays in
// registers over the whole loop. Strides are in floats.
TEXT ·axpyBlock4x16(SB), NOSPLIT, $0-72
	MOVQ a+0(FP), SI
	MOVQ ai+8(FP), R8
	SHLQ $2, R8
	MOVQ al+16(FP), R9
	SHLQ $2, R9
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R10
	SHLQ $2, R10
	MOVQ k+40(FP), CX
	VMOVSS alpha+48(FP), X13
	MOVQ c+56(FP), DX
	MOVQ ldc+64(FP), R14
	SHLQ $2, R14
	VXORPS X12, X12, X12
	LEAQ (DX)(R14*1), R11
	LEAQ (R11)(R14*1), R12
	LEAQ (R12)(R14*1), R13
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS (R11), Y2
	VMOVUPS 32(R11), Y3
	VMOVUPS (R12), Y4
	VMOVUPS 32(R12), Y5
	VMOVUPS (R13), Y6
	VMOVUPS 32(R13), Y7
	TESTQ CX, CX
	JEQ store

loop:
	VMOVUPS (DI), Y8
	VMOVUPS 32(DI), Y9
	MOVQ SI, AX

	VMOVSS (AX), X14
	VMULSS X13, X14, X14
	VUCOMISS X12, X14
	JPS do0
	JEQ skip0
do0:
	VBROADCASTSS X14, Y10
	VMULPS Y8, Y10, Y11
	VADDPS Y11, Y0, Y0
	VMULPS Y9, Y10, Y11
	VADDPS Y11, Y1, Y1
skip0:
	ADDQ R8, AX
	VMOVSS (AX), X14
	VMULSS X13, X14, X14
	VUCOMISS X12, X14
	JPS do1
	JEQ skip1
do1:
	VBROADCASTSS X14, Y10
	VMULPS Y8, Y10, Y11
	VADDPS Y11, Y2, Y2
	VMULPS Y9, Y10, Y11
	VADDPS Y11, Y3, Y3
skip1:
	ADDQ R8, AX
	VMOVSS (AX), X14
	VMULSS X13, X14, X14
	VUCOMISS X12, X14
	JPS do2
	JEQ skip2
do2:
	VBROADCASTSS X14, Y10
	VMULPS Y8, Y10, Y11
	VADDPS Y11, Y4, Y4
	VMULPS Y9, Y10, Y11
	VADDPS Y11, Y5, Y5
skip2:
	ADDQ R8, AX
	VMOVSS (AX), X14
	VMULSS X13, X14, X14
	VUCOMISS X12, X14
	JPS do3
	JEQ skip3
do3:
	VBROADCASTSS X14, Y10
	VMULPS Y8, Y10, Y11
	VADDPS Y11, Y6, Y6
	VMULPS Y9, Y10, Y11
	VADDPS Y11, Y7, Y7
skip3:
	ADDQ R9, SI
	ADDQ R10, DI
	DECQ CX
	JNZ loop

store:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, (R11)
	VMOVUPS Y3, 32(R11)
	VMOVUPS Y4, (R12)
	VMOVUPS Y5, 32(R12)
	VMOVUPS Y6, (R13)
	VMOVUPS Y7, 32(R13)
	VZEROUPPER
	RET

// func axpyBlock4x8(a *float32, ai, al int, b *float32, ldb, k int, alpha float32, c *float32, ldc int)
//
// axpyBlock4x16 for a block of 4 rows by 8 columns: for l = 0..k-1 and
// rows r = 0..3, t = alpha*a[r*ai + l*al]; unless t == 0, C[r, 0:8] +=
// t*B[l, 0:8], in l order, each product rounded before its add. Every
// instruction is VEX-encoded, so no legacy SSE instruction meets dirty
// upper halves of the vector registers (on Intel cores that costs a merge
// per instruction, which a Go loop compiled for GOAMD64=v1 pays on every
// scalar float it broadcasts). Strides are in floats.
TEXT ·axpyBlock4x8(SB), NOSPLIT, $0-72
	MOVQ a+0(FP), SI
	MOVQ ai+8(FP), R8
	SHLQ $2, R8
	MOVQ al+16(FP), R9
	SHLQ $2, R9
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R10
	SHLQ $2, R10
	MOVQ k+40(FP), CX
	VMOVSS alpha+48(FP), X13
	MOVQ c+56(FP), DX
	MOVQ ldc+64(FP), R14
	SHLQ $2, R14
	VXORPS X12, X12, X12
	LEAQ (DX)(R14*1), R11
	LEAQ (R11)(R14*1), R12
	LEAQ (R12)(R14*1), R13
	VMOVUPS (DX), Y0
	VMOVUPS (R11), Y2
	VMOVUPS (R12), Y4
	VMOVUPS (R13), Y6
	TESTQ CX, CX
	JEQ store8

loop8:
	VMOVUPS (DI), Y8
	MOVQ SI, AX

	VMOVSS (AX), X14
	VMULSS X13, X14, X14
	VUCOMISS X12, X14
	JPS do80
	JEQ skip80
do80:
	VBROADCASTSS X14, Y10
	VMULPS Y8, Y10, Y11
	VADDPS Y11, Y0, Y0
skip80:
	ADDQ R8, AX
	VMOVSS (AX), X14
	VMULSS X13, X14, X14
	VUCOMISS X12, X14
	JPS do81
	JEQ skip81
do81:
	VBROADCASTSS X14, Y10
	VMULPS Y8, Y10, Y11
	VADDPS Y11, Y2, Y2
skip81:
	ADDQ R8, AX
	VMOVSS (AX), X14
	VMULSS X13, X14, X14
	VUCOMISS X12, X14
	JPS do82
	JEQ skip82
do82:
	VBROADCASTSS X14, Y10
	VMULPS Y8, Y10, Y11
	VADDPS Y11, Y4, Y4
skip82:
	ADDQ R8, AX
	VMOVSS (AX), X14
	VMULSS X13, X14, X14
	VUCOMISS X12, X14
	JPS do83
	JEQ skip83
do83:
	VBROADCASTSS X14, Y10
	VMULPS Y8, Y10, Y11
	VADDPS Y11, Y6, Y6
skip83:
	ADDQ R9, SI
	ADDQ R10, DI
	DECQ CX
	JNZ loop8

store8:
	VMOVUPS Y0, (DX)
	VMOVUPS Y2, (R11)
	VMOVUPS Y4, (R12)
	VMOVUPS Y6, (R13)
	VZEROUPPER
	RET

// func axpyRow(a *float32, al int, b *float32, ldb, k int, alpha float32, c *float32, n16, n8 int)
//
// One row of gemmAxpy over its first n16 + 8·n8 columns (n16 a multiple of
// 16, n8 0 or 1): for l = 0..k-1, t = alpha*a[l*al]; unless t == 0,
// C[0:n] += t*B[l, 0:n], in l order, each product rounded before its add,
// the row kept in memory and updated 16 (then 8) columns at a time, all
// VEX-encoded (see axpyBlock4x8). Strides are in floats.
TEXT ·axpyRow(SB), NOSPLIT, $0-72
	MOVQ a+0(FP), SI
	MOVQ al+8(FP), R9
	SHLQ $2, R9
	MOVQ b+16(FP), DI
	MOVQ ldb+24(FP), R10
	SHLQ $2, R10
	MOVQ k+32(FP), CX
	VMOVSS alpha+40(FP), X13
	MOVQ c+48(FP), DX
	MOVQ n16+56(FP), R11
	SHLQ $2, R11
	MOVQ n8+64(FP), R12
	VXORPS X12, X12, X12
	TESTQ CX, CX
	JEQ rowdone

rowloop:
	VMOVSS (SI), X14
	VMULSS X13, X14, X14
	VUCOMISS X12, X14
	JPS rowdo
	JEQ rowskip
rowdo:
	VBROADCASTSS X14, Y10
	XORQ AX, AX
	CMPQ AX, R11
	JGE row8
row16:
	VMULPS (DI)(AX*1), Y10, Y11
	VMULPS 32(DI)(AX*1), Y10, Y9
	VMOVUPS (DX)(AX*1), Y0
	VMOVUPS 32(DX)(AX*1), Y1
	VADDPS Y11, Y0, Y0
	VADDPS Y9, Y1, Y1
	VMOVUPS Y0, (DX)(AX*1)
	VMOVUPS Y1, 32(DX)(AX*1)
	ADDQ $64, AX
	CMPQ AX, R11
	JLT row16
row8:
	TESTQ R12, R12
	JEQ rowskip
	VMULPS (DI)(AX*1), Y10, Y11
	VMOVUPS (DX)(AX*1), Y0
	VADDPS Y11, Y0, Y0
	VMOVUPS Y0, (DX)(AX*1)
rowskip:
	ADDQ R9, SI
	ADDQ R10, DI
	DECQ CX
	JNZ rowloop

rowdone:
	VZEROUPPER
	RET

// func dotK16(x, y *float32, k16 int) float32
//
// gonum's DotUnitary of x[:k16] and y[:k16] for k16 a multiple of 16 and y
// 16-byte aligned: one 8-lane sum of products over 8-float groups (its two
// 4-lane sums side by side), then lo+hi, then two horizontal adds, all
// VEX-encoded (see axpyBlock4x8).
TEXT ·dotK16(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ k16+16(FP), CX
	SHLQ $2, CX
	VXORPS Y0, Y0, Y0
	XORQ AX, AX
	TESTQ CX, CX
	JEQ dotdone
dotloop:
	VMOVUPS (SI)(AX*1), Y1
	VMULPS (DI)(AX*1), Y1, Y1
	VADDPS Y1, Y0, Y0
	ADDQ $32, AX
	CMPQ AX, CX
	JLT dotloop
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
dotdone:
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET
