//go:build goexperiment.simd && amd64

#include "textflag.h"

// func ntDot4x2(a *float32, lda int, b *float32, ldb int, k16 int, f *[8]float32)
//
// The eight dot products of rows a, a+lda, a+2lda, a+3lda with rows b,
// b+ldb over k16 floats (a multiple of 16; B rows 16-byte aligned), each as
// gonum's DotUnitary adds them: one 8-lane sum per product over 8-float
// groups (its two 4-lane sums side by side), then lo+hi, then two
// horizontal adds. f gets rows 0..3 of column 0, then rows 0..3 of column 1.
// Strides are in floats.
TEXT ·ntDot4x2(SB), NOSPLIT, $0-48
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), R8
	SHLQ $2, R8
	MOVQ b+16(FP), DI
	MOVQ ldb+24(FP), R9
	SHLQ $2, R9
	MOVQ k16+32(FP), CX
	SHLQ $2, CX
	MOVQ f+40(FP), DX
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
	VMOVUPS Y8, (DX)
	VZEROUPPER
	RET
