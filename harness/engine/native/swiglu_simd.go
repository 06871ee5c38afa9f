//go:build goexperiment.simd && amd64

package native

import "simd/archsimd"

// The elementwise kernels of SwiGLU, 8 floats at a time (AVX2), its
// sigmoid 16 at a time where the CPU has AVX-512. Each performs
// the scalar code's float32 operations in the scalar code's order (separate
// multiplies and adds, never fused) on every lane, so it gives the scalar
// code's bits; each returns how many leading elements it did (a multiple
// of 8, or 0 without AVX2) and the caller does the rest with the scalar
// code.

var (
	// haveSwiGLU8 says whether the kernels of this file run here (AVX2).
	haveSwiGLU8 = archsimd.X86.AVX2()
	// haveSwiGLU16 says whether SwiGLU's sigmoid runs 16 floats at a time
	// (AVX-512; with AVX2 only, 8 at a time).
	haveSwiGLU16 = archsimd.X86.AVX512()
)

// swigluForward8 is swigluForward's loop on the first multiple of 8
// elements: s = 1 / (1 + expf(-g)), h = g * s * u.
func swigluForward8(h, g, u []float32) int { return swiglu8(h, nil, g, u) }

// swigluRecompute8 is swigluRecompute's loop on the first multiple of 8
// elements: swigluForward8's, also storing s in sig.
func swigluRecompute8(h, sig, g, u []float32) int { return swiglu8(h, sig, g, u) }

// swiglu8 computes s = 1 / (1 + expf(-g)) and h = g * s * u, and stores s
// in sig unless sig is nil, on the first multiple of 8 elements: 16 at a
// time with AVX-512, then 8 at a time.
func swiglu8(h, sig, g, u []float32) int {
	if !haveSwiGLU8 || !kernelUse[kSwiGLU] {
		return 0
	}
	i := 0
	if haveSwiGLU16 {
		k := exp16Consts()
		for ; i+16 <= len(g); i += 16 {
			gv := archsimd.LoadFloat32x16Slice(g[i : i+16])
			s := k.sigmoid(gv)
			if sig != nil {
				s.StoreSlice(sig[i : i+16])
			}
			gv.Mul(s).Mul(archsimd.LoadFloat32x16Slice(u[i : i+16])).StoreSlice(h[i : i+16])
		}
	}
	k := exp8Consts()
	for ; i+8 <= len(g); i += 8 {
		gv := archsimd.LoadFloat32x8Slice(g[i : i+8])
		s := k.sigmoid(gv)
		if sig != nil {
			s.StoreSlice(sig[i : i+8])
		}
		gv.Mul(s).Mul(archsimd.LoadFloat32x8Slice(u[i : i+8])).StoreSlice(h[i : i+8])
	}
	archsimd.ClearAVXUpperBits()
	return i
}

// swigluBackwardSig8 is swigluBackwardSig's loop on the first multiple of 8
// elements: dg = dh * u * (s + g * s * (1 - s)), du = dh * g * s. Each
// group of 8 is loaded before it is stored, so dg may alias sig.
func swigluBackwardSig8(dg, du, dh, g, u, sig []float32) int {
	if !haveSwiGLU8 || !kernelUse[kSwiGLU] {
		return 0
	}
	one := archsimd.BroadcastFloat32x8(1)
	n8 := len(g) &^ 7
	for i := 0; i < n8; i += 8 {
		gv := archsimd.LoadFloat32x8Slice(g[i : i+8])
		s := archsimd.LoadFloat32x8Slice(sig[i : i+8])
		d := archsimd.LoadFloat32x8Slice(dh[i : i+8])
		uv := archsimd.LoadFloat32x8Slice(u[i : i+8])
		d.Mul(uv).Mul(s.Add(gv.Mul(s).Mul(one.Sub(s)))).StoreSlice(dg[i : i+8])
		d.Mul(gv).Mul(s).StoreSlice(du[i : i+8])
	}
	archsimd.ClearAVXUpperBits()
	return n8
}
