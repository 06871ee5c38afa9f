//go:build goexperiment.simd && amd64

package native

import "simd/archsimd"

// The loops of softmaxInPlace (attention.go), 8 floats at a time: the
// maximum, the exponentials (expf8, expf's bits) and the normalisation.
// Each returns how many leading entries it did, or false or 0 when it does
// not run, and softmaxInPlace does the rest with its scalar code.

var (
	// haveSoftmax8 says whether max8 and scale8 run here (AVX).
	haveSoftmax8 = archsimd.X86.AVX()
	// haveExp8 says whether expDiff8 runs here (AVX2).
	haveExp8 = archsimd.X86.AVX2()
)

// expDiff8 writes dst[j] = expf(src[j] - mx) for the first multiple of 8
// entries of src, 8 at a time (expf8.exp, which gives expf's bits), and
// returns how many it wrote.
func expDiff8(dst, src []float32, mx float32) int {
	if !haveExp8 || !kernelUse[kSoftmax] {
		return 0
	}
	k := exp8Consts()
	bmx := archsimd.BroadcastFloat32x8(mx)
	n8 := len(src) &^ 7
	for j := 0; j < n8; j += 8 {
		k.exp(archsimd.LoadFloat32x8Slice(src[j : j+8]).Sub(bmx)).StoreSlice(dst[j : j+8])
	}
	archsimd.ClearAVXUpperBits()
	return n8
}

// max8 returns the maximum of s, 8 entries at a time, and true; or false
// when s is shorter than 8, there is no AVX, or s holds a NaN (for which
// softmaxInPlace's scalar loop defines the result). The maximum of the
// other values does not depend on the order they are compared in, up to
// the sign of a zero maximum, which changes no difference s[j] - mx that
// softmax exponentiates except -0 - ±0, whose exponential is 1 either way.
func max8(s []float32) (float32, bool) {
	if !haveSoftmax8 || !kernelUse[kSoftmax] || len(s) < 8 {
		return 0, false
	}
	n8 := len(s) &^ 7
	m := archsimd.LoadFloat32x8Slice(s[:8])
	nan := m.IsNaN()
	for j := 8; j < n8; j += 8 {
		v := archsimd.LoadFloat32x8Slice(s[j : j+8])
		m = m.Max(v)
		nan = nan.Or(v.IsNaN())
	}
	var lanes [8]float32
	m.Store(&lanes)
	bad := nan.ToBits() != 0
	archsimd.ClearAVXUpperBits()
	if bad {
		return 0, false
	}
	mx := lanes[0]
	for _, v := range lanes[1:] {
		mx = max(mx, v)
	}
	for _, v := range s[n8:] {
		if v != v {
			return 0, false
		}
		mx = max(mx, v)
	}
	return mx, true
}

// scale8 multiplies the first multiple of 8 entries of s by f and returns
// how many it did (the products are softmaxInPlace's, entry by entry).
func scale8(s []float32, f float32) int {
	if !haveSoftmax8 || !kernelUse[kSoftmax] {
		return 0
	}
	n8 := len(s) &^ 7
	b := archsimd.BroadcastFloat32x8(f)
	for j := 0; j < n8; j += 8 {
		archsimd.LoadFloat32x8Slice(s[j : j+8]).Mul(b).StoreSlice(s[j : j+8])
	}
	archsimd.ClearAVXUpperBits()
	return n8
}
