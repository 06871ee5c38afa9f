//go:build goexperiment.simd && amd64

package native

import "simd/archsimd"

// haveAttn16 says whether the SIMD attention kernels for head dim 16 run
// here (built with GOEXPERIMENT=simd on a CPU with AVX).
var haveAttn16 = archsimd.X86.AVX()

// scores16 computes c[i*ldc+j] = 0 + alpha·(q_i · k_j) for m query rows
// (stride ldq) and n key rows (stride ldk) of head dim 16, adding the
// products in gonum's DotUnitary order for 16 aligned floats (lanes
// (0 + x0..3 + x8..11) + (0 + x4..7 + x12..15), then pairwise), so that it
// gives the bits of sgemmSerial(false, true, ...) with beta 0.
func scores16(m, n int, alpha float32, q []float32, ldq int, k []float32, ldk int, c []float32, ldc int) {
	zero := archsimd.BroadcastFloat32x8(0)
	al := archsimd.BroadcastFloat32x8(alpha)
	// order puts the eight finished sums of a block of keys, which come out
	// as keys 0 2 4 6 1 3 5 7, back in key order.
	order := archsimd.LoadUint32x8(&[8]uint32{0, 4, 1, 5, 2, 6, 3, 7})
	n8 := n &^ 7
	i := 0
	if haveGemm && n >= 2 {
		// Four query rows by two keys at a time on gemmNT's assembly block
		// (beta 0: the block is zeroed, then alpha·dot is added, as here).
		n2 := n &^ 1
		for ; i+4 <= m; i += 4 {
			_ = q[(i+3)*ldq+15]
			_ = k[(n2-1)*ldk+15]
			_ = c[(i+3)*ldc+n-1]
			for r := i; r < i+4; r++ {
				clear(c[r*ldc : r*ldc+n2])
			}
			for j := 0; j < n2; j += 2 {
				ntBlock4x2(&q[i*ldq], ldq, &k[j*ldk], ldk, 16, alpha, &c[i*ldc+j], ldc)
			}
			if n2 < n {
				scores16(4, 1, alpha, q[i*ldq:], ldq, k[n2*ldk:], ldk, c[i*ldc+n2:], ldc)
			}
		}
	}
	for ; i < m; i++ {
		q0 := archsimd.LoadFloat32x8Slice(q[i*ldq : i*ldq+8])
		q1 := archsimd.LoadFloat32x8Slice(q[i*ldq+8 : i*ldq+16])
		row := c[i*ldc : i*ldc+n]
		dot := func(j int) archsimd.Float32x8 {
			kj := k[j*ldk : j*ldk+16]
			return zero.Add(q0.Mul(archsimd.LoadFloat32x8Slice(kj[:8]))).Add(q1.Mul(archsimd.LoadFloat32x8Slice(kj[8:16])))
		}
		for j := 0; j < n8; j += 8 {
			// Eight keys at once: the halves' sums side by side, then the
			// two horizontal adds of all eight.
			h01, h23 := halvesSum(dot(j), dot(j+1)), halvesSum(dot(j+2), dot(j+3))
			h45, h67 := halvesSum(dot(j+4), dot(j+5)), halvesSum(dot(j+6), dot(j+7))
			f := h01.AddPairsGrouped(h23).AddPairsGrouped(h45.AddPairsGrouped(h67)).Permute(order)
			zero.Add(al.Mul(f)).StoreSlice(row[j : j+8])
		}
		for j := n8; j < n; j++ {
			s := dot(j)
			h := s.GetLo().Add(s.GetHi())
			h = h.AddPairs(h)
			h = h.AddPairs(h)
			var acc float32
			acc += alpha * h.GetElem(0)
			row[j] = acc
		}
	}
	archsimd.ClearAVXUpperBits()
}

// pv16 computes out_i = (beta ? out_i : 0) + Σ_j p[i*ldp+j] v_j over n
// value rows (stride ldv) of head dim 16, skipping zero weights and adding
// in key order as gonum's AxpyUnitary does, so that it gives the bits of
// sgemmSerial(false, false, ...) with alpha 1 and beta 0 or 1.
//
// Four rows at a time run on gemmAxpy's assembly block (alpha 1, which
// leaves every weight as it is), their outputs in registers over the keys;
// the rows left over (every row of a decode step) on axpyRow. Without AVX2
// it is the scalar loop.
func pv16(m, n int, p []float32, ldp int, v []float32, ldv int, beta bool, out []float32, ldo int) {
	i := 0
	if haveGemm && n > 0 {
		for ; i+4 <= m; i += 4 {
			if !beta {
				for r := i; r < i+4; r++ {
					clear(out[r*ldo : r*ldo+16])
				}
			}
			_ = p[(i+3)*ldp+n-1]
			_ = v[(n-1)*ldv+15]
			_ = out[(i+3)*ldo+15]
			axpyBlock4x16(&p[i*ldp], ldp, 1, &v[0], ldv, n, 1, &out[i*ldo], ldo)
		}
	}
	for ; i < m; i++ {
		o := out[i*ldo : i*ldo+16]
		if !beta {
			clear(o)
		}
		if haveGemm && n > 0 {
			_ = p[i*ldp+n-1]
			_ = v[(n-1)*ldv+15]
			axpyRow(&p[i*ldp], 1, &v[0], ldv, n, 1, &o[0], 16, 0)
			continue
		}
		for j, w := range p[i*ldp : i*ldp+n] {
			if w == 0 {
				continue
			}
			vj := v[j*ldv : j*ldv+16]
			for c := range o {
				o[c] += w * vj[c]
			}
		}
	}
}
