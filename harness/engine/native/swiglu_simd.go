//go:build goexperiment.simd && amd64

package native

import "simd/archsimd"

// The elementwise kernels of SwiGLU and RMSNorm, 8 floats at a time (AVX2),
// SwiGLU's sigmoid 16 at a time where the CPU has AVX-512. Each performs
// the scalar code's float32 operations in the scalar code's order (separate
// multiplies and adds, never fused) on every lane, so it gives the scalar
// code's bits; each returns how many leading elements it did (a multiple
// of 8, or 0 without AVX2) and the caller does the rest with the scalar
// code.

var (
	// haveElem8 says whether the kernels of this file run here (AVX2).
	haveElem8 = archsimd.X86.AVX2()
	// haveElem16 says whether SwiGLU's sigmoid runs 16 floats at a time
	// (AVX-512; with AVX2 only, 8 at a time).
	haveElem16 = archsimd.X86.AVX512()
)

// The constants of expf.
const (
	expLog2e = 1.44269504088896341
	expLn2hi = 0.693359375
	expLn2lo = -2.12194440e-4
	expOver  = 88.72
	expUnder = -87.33
)

// expPoly are the coefficients of expf's polynomial, innermost first.
var expPoly = [8]float32{1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1}

// expf8 holds the constants of the 8-wide expf.
type expf8 struct {
	l2e, half, mhalf, zero, one, hi, lo, two, inf, over, under archsimd.Float32x8
	c                                                          [8]archsimd.Float32x8
	maxN, sign                                                 archsimd.Int32x8
}

func newExpf8() expf8 {
	b := archsimd.BroadcastFloat32x8
	k := expf8{
		l2e: b(expLog2e), half: b(0.5), mhalf: b(-0.5), zero: b(0), one: b(1),
		hi: b(expLn2hi), lo: b(expLn2lo), two: b(2),
		inf: archsimd.BroadcastInt32x8(0x7f800000).AsFloat32x8(), over: b(expOver), under: b(expUnder),
		maxN: archsimd.BroadcastInt32x8(127), sign: archsimd.BroadcastInt32x8(-1 << 31),
	}
	for i, c := range expPoly {
		k.c[i] = b(c)
	}
	return k
}

// exp returns expf of each element of x, for any arguments: it performs
// expf's operations in expf's order on every lane and then takes expf's
// branches lane by lane (x > 88.72 gives +Inf, x < -87.33 gives 0, n > 127
// scales by 2^127 and then by 2), so every lane has expf's bits. A NaN lane
// gives the same NaN, quieted, as in expf.
func (k *expf8) exp(x archsimd.Float32x8) archsimd.Float32x8 {
	t := x.Mul(k.l2e)
	// n = trunc(t ± 0.5) as in expf (through int32, so -0 becomes 0).
	n := t.Add(k.half.Merge(k.mhalf, t.GreaterEqual(k.zero))).ConvertToInt32()
	nf := n.ConvertToFloat32()
	r := x.Sub(nf.Mul(k.hi)).Sub(nf.Mul(k.lo))
	p := k.c[0]
	for _, ci := range k.c[1:] {
		p = ci.Add(r.Mul(p))
	}
	// expf scales by 2^n, or for n > 127 (only 128 reaches here) by 2^127
	// and then by 2.
	big := n.Greater(k.maxN)
	e := p.Mul(n.Min(k.maxN).Add(k.maxN).ShiftAllLeft(23).AsFloat32x8())
	e = e.Mul(k.two).Merge(e, big)
	e = k.zero.Merge(e, x.Less(k.under))
	return k.inf.Merge(e, x.Greater(k.over))
}

// sigmoid returns 1 / (1 + expf(-g)), the minus flipping the sign bit as
// Go's unary minus does.
func (k *expf8) sigmoid(g archsimd.Float32x8) archsimd.Float32x8 {
	return k.one.Div(k.one.Add(k.exp(g.AsInt32x8().Xor(k.sign).AsFloat32x8())))
}

// expf16 is expf8 16 floats wide (AVX-512).
type expf16 struct {
	l2e, half, mhalf, zero, one, hi, lo, two, inf, over, under archsimd.Float32x16
	c                                                          [8]archsimd.Float32x16
	maxN, sign                                                 archsimd.Int32x16
}

func newExpf16() expf16 {
	b := archsimd.BroadcastFloat32x16
	k := expf16{
		l2e: b(expLog2e), half: b(0.5), mhalf: b(-0.5), zero: b(0), one: b(1),
		hi: b(expLn2hi), lo: b(expLn2lo), two: b(2),
		inf: archsimd.BroadcastInt32x16(0x7f800000).AsFloat32x16(), over: b(expOver), under: b(expUnder),
		maxN: archsimd.BroadcastInt32x16(127), sign: archsimd.BroadcastInt32x16(-1 << 31),
	}
	for i, c := range expPoly {
		k.c[i] = b(c)
	}
	return k
}

// exp is expf8.exp 16 floats wide.
func (k *expf16) exp(x archsimd.Float32x16) archsimd.Float32x16 {
	t := x.Mul(k.l2e)
	n := t.Add(k.half.Merge(k.mhalf, t.GreaterEqual(k.zero))).ConvertToInt32()
	nf := n.ConvertToFloat32()
	r := x.Sub(nf.Mul(k.hi)).Sub(nf.Mul(k.lo))
	p := k.c[0]
	for _, ci := range k.c[1:] {
		p = ci.Add(r.Mul(p))
	}
	big := n.Greater(k.maxN)
	e := p.Mul(n.Min(k.maxN).Add(k.maxN).ShiftAllLeft(23).AsFloat32x16())
	e = e.Mul(k.two).Merge(e, big)
	e = k.zero.Merge(e, x.Less(k.under))
	return k.inf.Merge(e, x.Greater(k.over))
}

// sigmoid is expf8.sigmoid 16 floats wide.
func (k *expf16) sigmoid(g archsimd.Float32x16) archsimd.Float32x16 {
	return k.one.Div(k.one.Add(k.exp(g.AsInt32x16().Xor(k.sign).AsFloat32x16())))
}

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
	if !haveElem8 {
		return 0
	}
	i := 0
	if haveElem16 {
		k := newExpf16()
		for ; i+16 <= len(g); i += 16 {
			gv := archsimd.LoadFloat32x16Slice(g[i : i+16])
			s := k.sigmoid(gv)
			if sig != nil {
				s.StoreSlice(sig[i : i+16])
			}
			gv.Mul(s).Mul(archsimd.LoadFloat32x16Slice(u[i : i+16])).StoreSlice(h[i : i+16])
		}
	}
	k := newExpf8()
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
	if !haveElem8 {
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

// rmsnormScale8 is the scaling loop of a row of rmsnormForward on the first
// multiple of 8 elements: y = x * r * w.
func rmsnormScale8(y, x []float32, r float32, w []float32) int {
	if !haveElem8 {
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
	if !haveElem8 {
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
// columns it did.
func rmsnormWeight8(dw, dy, x, rstd []float32, n, d int) int {
	if !haveElem8 {
		return 0
	}
	d8 := d &^ 7
	for j := 0; j < d8; j += 8 {
		acc := archsimd.LoadFloat32x8Slice(dw[j : j+8])
		for i := 0; i < n; i++ {
			o := i*d + j
			t := archsimd.LoadFloat32x8Slice(dy[o : o+8]).Mul(archsimd.LoadFloat32x8Slice(x[o : o+8])).Mul(archsimd.BroadcastFloat32x8(rstd[i]))
			acc = acc.Add(t)
		}
		acc.StoreSlice(dw[j : j+8])
	}
	archsimd.ClearAVXUpperBits()
	return d8
}
