//go:build goexperiment.simd && amd64

package native

import (
	"simd/archsimd"
	"unsafe"
)

// SIMD kernels for the tiles of pool.gemm. Each output element is computed
// with the operations gonum's serial Sgemm kernels perform for it, in their
// order, so these kernels give gonum's bits; they are faster because they
// keep a block of outputs in registers instead of calling an assembly dot
// product or axpy per element or per row.
//
// The three cases, as gonum computes them (after C = beta·C, or C = 0 when
// beta is 0):
//
//	NT  C[i,j] += alpha · dot(A[i,:], B[j,:])  (dot as gonum's DotUnitary)
//	NN  for l: t = alpha·A[i,l]; if t != 0 { C[i,:] += t·B[l,:] }
//	TN  for l: t = alpha·A[l,i]; if t != 0 { C[i,:] += t·B[l,:] }
//
// DotUnitary on SSE adds products of 16-float blocks into two 4-lane sums
// (floats 0-3 and 8-11 of each block into the first, 4-7 and 12-15 into the
// second), adds the second sum to the first, then remaining 4-float groups
// into the first and single products into its lane 0, and finishes with two
// horizontal adds: (s0+s1)+(s2+s3). An 8-lane accumulator over 8-float
// groups holds exactly the two sums in its halves. DotUnitary first peels
// single products until y is 16-byte aligned, so the NT kernel requires
// aligned B rows (gemmTile falls back to gonum otherwise).

// haveGemm says whether the SIMD GEMM kernels run here (AVX2).
var haveGemm = archsimd.X86.AVX2()

// gemmTile computes one tile of pool.gemm: C = alpha op(A) op(B) + beta C,
// giving the bits of gonum's serial Sgemm on the same tile.
func gemmTile(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if !haveGemm || !kernelUse[gemmKernel(tB, k, n)] || (tA && tB) || (tB && !rowsAligned16(b, ldb)) || m == 0 || n == 0 {
		gonumTile(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if !operandsFit(tA, tB, m, n, k, a, lda, b, ldb, c, ldc) {
		// gonum names the short operand in its panic.
		gonumTile(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if (alpha == 0 || k == 0) && beta == 1 {
		return
	}
	if beta != 1 {
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(row)
				continue
			}
			for j := range row {
				row[j] *= beta
			}
		}
	}
	switch {
	case tB && k == 8 && n <= tileN:
		gemmNT8(m, n, alpha, a, lda, b, ldb, c, ldc)
	case tB:
		gemmNT(m, n, k, alpha, a, lda, b, ldb, c, ldc)
	case tA:
		gemmAxpyChunked(m, n, k, alpha, a, 1, lda, b, ldb, c, ldc)
	default:
		gemmAxpyChunked(m, n, k, alpha, a, lda, 1, b, ldb, c, ldc)
	}
	archsimd.ClearAVXUpperBits()
}

// gemmKernel is the kernel gemmTile runs for a tile (kernels.go chooses
// its path).
func gemmKernel(tB bool, k, n int) kernel {
	switch {
	case tB && k == 8 && n <= tileN:
		return kGemmNT8
	case tB:
		return kGemmNT
	}
	return kGemmAxpy
}

// operandsFit says whether a, b and c hold op(A) [m, k], op(B) [k, n] and
// C [m, n] at their strides (gemmTile's loads do not check bounds).
func operandsFit(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) bool {
	ar, ac, br, bc := m, k, k, n
	if tA {
		ar, ac = k, m
	}
	if tB {
		br, bc = n, k
	}
	fits := func(s []float32, rows, cols, ld int) bool {
		return rows == 0 || cols == 0 || (ld >= cols && len(s) >= (rows-1)*ld+cols)
	}
	return fits(a, ar, ac, lda) && fits(b, br, bc, ldb) && fits(c, m, n, ldc)
}

// rowsAligned16 says whether every row of b (stride ld floats) starts on a
// 16-byte boundary.
func rowsAligned16(b []float32, ld int) bool {
	return len(b) > 0 && ld%4 == 0 && uintptr(unsafe.Pointer(&b[0]))%16 == 0
}

// load8 loads s[i : i+8] without a bounds check: gemmTile checked the
// lengths of its operands once, as gonum's Sgemm does.
func load8(s []float32, i int) archsimd.Float32x8 {
	return archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(s)), 4*i)))
}

// gemmNT: C[m, n] += alpha · A[m, k] · B[n, k]ᵀ, in blocks of 4 rows of A by
// 2 rows of B over the 16-float blocks of k, then dotFinish per element.
func gemmNT(m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	k16 := k &^ 15
	z := archsimd.BroadcastFloat32x8(0)
	i := 0
	for ; i+4 <= m; i += 4 {
		a0, a1, a2, a3 := a[i*lda:], a[(i+1)*lda:], a[(i+2)*lda:], a[(i+3)*lda:]
		j := 0
		for ; j+2 <= n; j += 2 {
			b0, b1 := b[j*ldb:], b[(j+1)*ldb:]
			if k16 == k {
				ntBlock4x2(&a0[0], lda, &b0[0], ldb, k16, alpha, &c[i*ldc+j], ldc)
				continue
			}
			s00, s01, s10, s11 := z, z, z, z
			s20, s21, s30, s31 := z, z, z, z
			for l := 0; l < k16; l += 8 {
				y0, y1 := load8(b0, l), load8(b1, l)
				x := load8(a0, l)
				s00, s01 = s00.Add(x.Mul(y0)), s01.Add(x.Mul(y1))
				x = load8(a1, l)
				s10, s11 = s10.Add(x.Mul(y0)), s11.Add(x.Mul(y1))
				x = load8(a2, l)
				s20, s21 = s20.Add(x.Mul(y0)), s21.Add(x.Mul(y1))
				x = load8(a3, l)
				s30, s31 = s30.Add(x.Mul(y0)), s31.Add(x.Mul(y1))
			}
			if k%4 == 0 {
				ntFinish4x2(s00, s01, s10, s11, s20, s21, s30, s31, [4][]float32{a0, a1, a2, a3}, b0, b1, k16, k, alpha, c[i*ldc+j:], ldc)
				continue
			}
			c[i*ldc+j] += alpha * dotFinish(s00, a0, b0, k16, k)
			c[i*ldc+j+1] += alpha * dotFinish(s01, a0, b1, k16, k)
			c[(i+1)*ldc+j] += alpha * dotFinish(s10, a1, b0, k16, k)
			c[(i+1)*ldc+j+1] += alpha * dotFinish(s11, a1, b1, k16, k)
			c[(i+2)*ldc+j] += alpha * dotFinish(s20, a2, b0, k16, k)
			c[(i+2)*ldc+j+1] += alpha * dotFinish(s21, a2, b1, k16, k)
			c[(i+3)*ldc+j] += alpha * dotFinish(s30, a3, b0, k16, k)
			c[(i+3)*ldc+j+1] += alpha * dotFinish(s31, a3, b1, k16, k)
		}
		for ; j < n; j++ {
			for r, ar := range [4][]float32{a0, a1, a2, a3} {
				c[(i+r)*ldc+j] += alpha * dotNT(ar, b[j*ldb:], k16, k)
			}
		}
	}
	for ; i < m; i++ {
		ar := a[i*lda:]
		for j := 0; j < n; j++ {
			c[i*ldc+j] += alpha * dotNT(ar, b[j*ldb:], k16, k)
		}
	}
}

// ntFinish4x2 completes the eight dot products of a 4x2 block of gemmNT
// for k a multiple of 4 and adds alpha times each to its element of c (the
// block's top-left at c[0]): per row, h = [first sum + second sum of column
// j, the same of column j+1] (zero when k16 is 0), then the 4-float groups
// after k16 lane by lane, then the two horizontal adds of all eight at once.
func ntFinish4x2(s00, s01, s10, s11, s20, s21, s30, s31 archsimd.Float32x8, a [4][]float32, b0, b1 []float32, k16, k int, alpha float32, c []float32, ldc int) {
	z := archsimd.BroadcastFloat32x8(0)
	h0, h1, h2, h3 := z, z, z, z
	if k16 > 0 {
		h0, h1 = halvesSum(s00, s01), halvesSum(s10, s11)
		h2, h3 = halvesSum(s20, s21), halvesSum(s30, s31)
	}
	for l := k16; l < k; l += 4 {
		y := z.SetLo(load4(b0, l)).SetHi(load4(b1, l))
		h0 = h0.Add(dup4(a[0], l).Mul(y))
		h1 = h1.Add(dup4(a[1], l).Mul(y))
		h2 = h2.Add(dup4(a[2], l).Mul(y))
		h3 = h3.Add(dup4(a[3], l).Mul(y))
	}
	// f holds rows 0..3 of column j, then of column j+1.
	var f [8]float32
	h0.AddPairsGrouped(h1).AddPairsGrouped(h2.AddPairsGrouped(h3)).Store(&f)
	for r := 0; r < 4; r++ {
		c[r*ldc] += alpha * f[r]
		c[r*ldc+1] += alpha * f[4+r]
	}
}

// load4 loads s[i : i+4].
func load4(s []float32, i int) archsimd.Float32x4 {
	return archsimd.LoadFloat32x4((*[4]float32)(s[i : i+4]))
}

// dup4 returns [s[i:i+4], s[i:i+4]].
func dup4(s []float32, i int) archsimd.Float32x8 {
	v := load4(s, i)
	return archsimd.BroadcastFloat32x8(0).SetLo(v).SetHi(v)
}

// gemmNT8 is gemmNT for k = 8 (a LoRA adapter's B at rank 8), where
// DotUnitary is (0 + x[0:4]·y[0:4]) + x[4:8]·y[4:8] lane by lane, then the
// two horizontal adds. With B's tile transposed into bt [8, n], the lanes
// of a vector are eight output columns and all of it is vertical: s_q =
// (0 + x_q·bt[q,:]) + x_{q+4}·bt[q+4,:], out = (s_0 + s_1) + (s_2 + s_3).
func gemmNT8(m, n int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	var bt [8 * tileN]float32
	for j := 0; j < n; j++ {
		for l := 0; l < 8; l++ {
			bt[l*n+j] = b[j*ldb+l]
		}
	}
	z := archsimd.BroadcastFloat32x8(0)
	al := archsimd.BroadcastFloat32x8(alpha)
	n8 := n &^ 7
	for i := 0; i < m; i++ {
		x := a[i*lda : i*lda+8]
		x0, x1, x2, x3 := archsimd.BroadcastFloat32x8(x[0]), archsimd.BroadcastFloat32x8(x[1]), archsimd.BroadcastFloat32x8(x[2]), archsimd.BroadcastFloat32x8(x[3])
		x4, x5, x6, x7 := archsimd.BroadcastFloat32x8(x[4]), archsimd.BroadcastFloat32x8(x[5]), archsimd.BroadcastFloat32x8(x[6]), archsimd.BroadcastFloat32x8(x[7])
		ci := c[i*ldc:]
		for j := 0; j < n8; j += 8 {
			s0 := z.Add(x0.Mul(load8(bt[:], j))).Add(x4.Mul(load8(bt[:], 4*n+j)))
			s1 := z.Add(x1.Mul(load8(bt[:], n+j))).Add(x5.Mul(load8(bt[:], 5*n+j)))
			s2 := z.Add(x2.Mul(load8(bt[:], 2*n+j))).Add(x6.Mul(load8(bt[:], 6*n+j)))
			s3 := z.Add(x3.Mul(load8(bt[:], 3*n+j))).Add(x7.Mul(load8(bt[:], 7*n+j)))
			out := s0.Add(s1).Add(s2.Add(s3))
			load8(ci, j).Add(al.Mul(out)).Store((*[8]float32)(ci[j : j+8]))
		}
		for j := n8; j < n; j++ {
			ci[j] += alpha * dotFinish(z, x, b[j*ldb:], 0, 8)
		}
	}
}

// ntBlock4x2 (gemm_amd64.s) computes a 4x2 block of gemmNT when k is a
// multiple of 16 and adds alpha times each dot product to its element of c
// (the block's top-left at c), with the bits of gonum's serial kernel.
//
//go:noescape
func ntBlock4x2(a *float32, lda int, b *float32, ldb int, k16 int, alpha float32, c *float32, ldc int)

// halvesSum returns [lo(x)+hi(x), lo(y)+hi(y)]: for two 8-lane dot sums,
// DotUnitary's first sum plus its second, side by side.
func halvesSum(x, y archsimd.Float32x8) archsimd.Float32x8 {
	return x.Select128FromPair(0, 2, y).Add(x.Select128FromPair(1, 3, y))
}

// dotNT is DotUnitary(x[:k], y[:k]) for a 16-byte aligned y: dotK16's
// assembly when k is a multiple of 16 (the tails of gemmNT: in Go, its
// zero broadcast and the scalar finish met dirty upper halves).
func dotNT(x, y []float32, k16, k int) float32 {
	if k16 == k {
		if k == 0 {
			return 0
		}
		return dotK16(&x[0], &y[0], k16)
	}
	s := archsimd.BroadcastFloat32x8(0)
	for l := 0; l < k16; l += 8 {
		s = s.Add(load8(x, l).Mul(load8(y, l)))
	}
	return dotFinish(s, x, y, k16, k)
}

// dotK16 (gemm_amd64.s) is DotUnitary(x[:k16], y[:k16]) for k16 a
// multiple of 16 and y 16-byte aligned.
//
//go:noescape
func dotK16(x, y *float32, k16 int) float32

// dotFinish completes DotUnitary(x[:k], y[:k]) from the 8-lane sum s of its
// first k16 (a multiple of 16) products: the two halves are added (only
// when k16 > 0, as DotUnitary adds its second sum only after its 16-float
// loop ran), then the 4-float groups and single products of the rest, then
// the two horizontal adds.
func dotFinish(s archsimd.Float32x8, x, y []float32, k16, k int) float32 {
	var h [4]float32
	if k16 > 0 {
		s.GetLo().Add(s.GetHi()).Store(&h)
	}
	l := k16
	for ; l+4 <= k; l += 4 {
		h[0] += x[l] * y[l]
		h[1] += x[l+1] * y[l+1]
		h[2] += x[l+2] * y[l+2]
		h[3] += x[l+3] * y[l+3]
	}
	for ; l < k; l++ {
		h[0] += x[l] * y[l]
	}
	return (h[0] + h[1]) + (h[2] + h[3])
}

// axpyChunk is the number of rows of B gemmAxpyChunked streams through a
// tile of C at a time (128 rows of a 192-column tile: 96 KiB, in L2).
const axpyChunk = 128

// gemmAxpyChunked is gemmAxpy over consecutive chunks of l: each element of
// C still receives its terms in l order, so the bits do not change, while
// the rows of B a chunk reads stay in cache across the blocks of C.
func gemmAxpyChunked(m, n, k int, alpha float32, a []float32, ai, al int, b []float32, ldb int, c []float32, ldc int) {
	for l0 := 0; l0 < k; l0 += axpyChunk {
		kc := min(axpyChunk, k-l0)
		gemmAxpy(m, n, kc, alpha, a[l0*al:], ai, al, b[l0*ldb:], ldb, c, ldc)
	}
}

// gemmAxpy: C[m, n] += Σ_l t(i,l)·B[l, :] with t(i,l) = alpha·A[i·ai + l·al]
// (NN: ai = lda, al = 1; TN: ai = 1, al = lda), adding in l order and
// skipping t == 0, as gonum's AxpyUnitary loops do. Blocks of 4 rows by 16
// (then 8) columns stay in registers over the whole l loop; rows left over
// run one at a time. Every vector loop is assembly (gemm_amd64.s): in Go,
// broadcasting a scalar computed by GOAMD64=v1 (SSE) code into a vector
// register costs a merge of the register's upper half per instruction on
// Intel cores, which made a Go version of the 4x8 block slower than gonum.
// The columns after the last multiple of 8 are scalar Go, run after the
// assembly left the upper halves clean.
func gemmAxpy(m, n, k int, alpha float32, a []float32, ai, al int, b []float32, ldb int, c []float32, ldc int) {
	if k == 0 {
		return
	}
	n16 := n &^ 15
	n8 := (n - n16) / 8
	j8 := n16 + 8*n8
	i := 0
	for ; i+4 <= m; i += 4 {
		for j := 0; j < n16; j += 16 {
			axpyBlock4x16(&a[i*ai], ai, al, &b[j], ldb, k, alpha, &c[i*ldc+j], ldc)
		}
		if n8 > 0 {
			axpyBlock4x8(&a[i*ai], ai, al, &b[n16], ldb, k, alpha, &c[i*ldc+n16], ldc)
		}
		if j8 < n {
			for r := 0; r < 4; r++ {
				axpyCols(c[(i+r)*ldc:], j8, n, k, alpha, a, (i+r)*ai, al, b, ldb)
			}
		}
	}
	for ; i < m; i++ {
		if j8 > 0 {
			axpyRow(&a[i*ai], al, &b[0], ldb, k, alpha, &c[i*ldc], n16, n8)
		}
		if j8 < n {
			axpyCols(c[i*ldc:], j8, n, k, alpha, a, i*ai, al, b, ldb)
		}
	}
}

// axpyBlock4x16 (gemm_amd64.s) is gemmAxpy's block of 4 rows by 16
// columns (a at the block's first coefficient, b and c at its first
// column), with the block of C in registers over the whole l loop.
//
//go:noescape
func axpyBlock4x16(a *float32, ai, al int, b *float32, ldb, k int, alpha float32, c *float32, ldc int)

// axpyBlock4x8 (gemm_amd64.s) is axpyBlock4x16 for 4 rows by 8 columns.
//
//go:noescape
func axpyBlock4x8(a *float32, ai, al int, b *float32, ldb, k int, alpha float32, c *float32, ldc int)

// axpyRow (gemm_amd64.s) is gemmAxpy for one row of C over its first
// n16 + 8·n8 columns (n16 a multiple of 16, n8 0 or 1): for l in order,
// t = alpha·a[l·al] and, unless t == 0, c[j] += t·b[l·ldb + j].
//
//go:noescape
func axpyRow(a *float32, al int, b *float32, ldb, k int, alpha float32, c *float32, n16, n8 int)

// axpyCols adds, for one row of C, Σ_l t_l·B[l, j0:j1] with t_l =
// alpha·a[base + l·al], in l order, skipping t_l == 0 (scalar: gemmAxpy
// calls it for fewer than 8 columns).
func axpyCols(c []float32, j0, j1, k int, alpha float32, a []float32, base, al int, b []float32, ldb int) {
	for l := 0; l < k; l++ {
		t := alpha * a[base+l*al]
		if t == 0 {
			continue
		}
		br := b[l*ldb:]
		for j := j0; j < j1; j++ {
			c[j] += t * br[j]
		}
	}
}
