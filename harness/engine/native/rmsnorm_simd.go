//go:build goexperiment.simd && amd64

package native

import "simd/archsimd"

// The elementwise loops of RMSNorm, 8 floats at a time (AVX2). Each
// performs the scalar code's float32 operations (ops.go) in its order,
// unfused, on every lane, so it gives the scalar code's bits; each returns
// how many leading elements it did (a multiple of 8, or 0 when it does not
// run) and the caller does the rest with the scalar code. RMSNorm's sums
// stay scalar, in their order.

// haveRMSNorm8 says whether the kernels of this file run here (AVX2).
var haveRMSNorm8 = archsimd.X86.AVX2()

// rmsnormScale8 is the scaling loop of a row of rmsnormForward on the first
// multiple of 8 elements: y = x * r * w.
func rmsnormScale8(y, x []float32, r float32, w []float32) int {
	if !haveRMSNorm8 || !kernelUse[kRMSNorm] {
		return 0
	}
	rv := archsimd.BroadcastFloat32x8(r)
	n8 := len(x) &^ 7
	for j := 0; j < n8; j += 8 {
		archsimd.LoadFloat32x8Slice(x[j : j+8]).Mul(rv).Mul(archsimd.LoadFloat32x8Slice(w[j : j+8])).StoreSlice(y[j : j+8])
	}
	archsimd.ClearAVXUpperBits()
	return n8
}

// rmsnormBackwardRow8 is the update loop of a row of rmsnormBackward on the
// first multiple of 8 elements: dx += r * w * dy - c * x.
func rmsnormBackwardRow8(dx, dy, x, w []float32, r, c float32) int {
	if !haveRMSNorm8 || !kernelUse[kRMSNorm] {
		return 0
	}
	rv, cv := archsimd.BroadcastFloat32x8(r), archsimd.BroadcastFloat32x8(c)
	n8 := len(x) &^ 7
	for j := 0; j < n8; j += 8 {
		t := rv.Mul(archsimd.LoadFloat32x8Slice(w[j : j+8])).Mul(archsimd.LoadFloat32x8Slice(dy[j : j+8]))
		t = t.Sub(cv.Mul(archsimd.LoadFloat32x8Slice(x[j : j+8])))
		archsimd.LoadFloat32x8Slice(dx[j : j+8]).Add(t).StoreSlice(dx[j : j+8])
	}
	archsimd.ClearAVXUpperBits()
	return n8
}

// rmsnormWeight8 is rmsnormWeightBackward on the first multiple of 8
// columns: dw[j] += dy[i, j] * x[i, j] * rstd[i], row after row, so each
// column is summed in the scalar code's order. It returns how many leading
// columns it did. The loop runs over rows outside and columns inside, so
// each row's rstd is broadcast once (a broadcast of a scalar in the inner
// loop costs a merge of a register's upper half on Intel cores).
func rmsnormWeight8(dw, dy, x, rstd []float32, n, d int) int {
	if !haveRMSNorm8 || !kernelUse[kRMSNorm] {
		return 0
	}
	d8 := d &^ 7
	if d8 == 0 {
		return 0
	}
	for i := 0; i < n; i++ {
		r := archsimd.BroadcastFloat32x8(rstd[i])
		dyr, xr := dy[i*d:i*d+d8], x[i*d:i*d+d8]
		for j := 0; j < d8; j += 8 {
			t := archsimd.LoadFloat32x8Slice(dyr[j : j+8]).Mul(archsimd.LoadFloat32x8Slice(xr[j : j+8])).Mul(r)
			archsimd.LoadFloat32x8Slice(dw[j : j+8]).Add(t).StoreSlice(dw[j : j+8])
		}
	}
	archsimd.ClearAVXUpperBits()
	return d8
}
