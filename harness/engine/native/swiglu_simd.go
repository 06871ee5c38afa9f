//go:build goexperiment.simd && amd64

package native

import "simd/archsimd"

// The elementwise kernels of SwiGLU and RMSNorm, 8 floats at a time (AVX2).
// Each performs the scalar code's float32 operations in the scalar code's
// order (separate multiplies and adds, never fused), so it gives the scalar
// code's bits; each returns how many leading elements it did (a multiple of
// 8, or 0 without AVX2) and the caller does the rest with the scalar code.

// haveElem8 says whether the kernels of this file run here (AVX2).
var haveElem8 = archsimd.X86.AVX2()

// expf8 holds the constants of expf8.
type expf8 struct {
	l2e, half, mhalf, zero, hi, lo2, two, inf, over, under archsimd.Float32x8
	c                                                      [8]archsimd.Float32x8
	bias, maxN                                             archsimd.Int32x8
}

func newExpf8() expf8 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	b := archsimd.BroadcastFloat32x8
	return expf8{
		l2e: b(log2e), half: b(0.5), mhalf: b(-0.5), zero: b(0),
		hi: b(ln2hi), lo2: b(ln2lo), two: b(2),
		inf: archsimd.BroadcastInt32x8(0x7f800000).AsFloat32x8(), over: b(88.72), under: b(-87.33),
		c: [8]archsimd.Float32x8{
			b(1.0 / 5040), b(1.0 / 720), b(1.0 / 120), b(1.0 / 24), b(1.0 / 6), b(0.5), b(1), b(1),
		},
		bias: archsimd.BroadcastInt32x8(127), maxN: archsimd.BroadcastInt32x8(127),
	}
}

// exp returns expf of each element of x, for any arguments: it performs
// expf's operations in expf's order on every lane and then takes expf's
// branches lane by lane (x > 88.72 gives +Inf, x < -87.33 gives 0, n > 127
// scales by 2^127 and then by 2), so every lane has expf's bits. A NaN lane
// stays the same NaN, quieted, as in expf.
func (k *expf8) exp(x archsimd.Float32x8) archsimd.Float32x8 {
	t := x.Mul(k.l2e)
	// n = trunc(t ± 0.5) as in expf (through int32, so -0 becomes 0).
	n := t.Add(k.half.Merge(k.mhalf, t.GreaterEqual(k.zero))).ConvertToInt32()
	nf := n.ConvertToFloat32()
	r := x.Sub(nf.Mul(k.hi)).Sub(nf.Mul(k.lo2))
	p := k.c[0]
	for _, ci := range k.c[1:] {
		p = ci.Add(r.Mul(p))
	}
	// expf scales by 2^n, or for n > 127 (only 128 reaches here) by 2^127
	// and then by 2.
	big := n.Greater(k.maxN)
	scale := n.Min(k.maxN).Add(k.bias).ShiftAllLeft(23).AsFloat32x8()
	e := p.Mul(scale)
	e = e.Mul(k.two).Merge(e, big)
	e = k.zero.Merge(e, x.Less(k.under))
	return k.inf.Merge(e, x.Greater(k.over))
}

// neg8 flips the sign bits of x, as Go's unary minus does.
func neg8(x archsimd.Float32x8) archsimd.Float32x8 {
	return x.AsInt32x8().Xor(archsimd.BroadcastInt32x8(-1 << 31)).AsFloat32x8()
}

// swigluForward8 is swigluForward's loop on the first multiple of 8
// elements: s = 1 / (1 + expf(-g)), h = g * s * u.
func swigluForward8(h, g, u []float32) int {
	if !haveElem8 {
		return 0
	}
	k := newExpf8()
	one := archsimd.BroadcastFloat32x8(1)
	n8 := len(g) &^ 7
	for i := 0; i < n8; i += 8 {
		gv := archsimd.LoadFloat32x8Slice(g[i : i+8])
		s := one.Div(one.Add(k.exp(neg8(gv))))
		gv.Mul(s).Mul(archsimd.LoadFloat32x8Slice(u[i : i+8])).StoreSlice(h[i : i+8])
	}
	archsimd.ClearAVXUpperBits()
	return n8
}

// swigluRecompute8 is swigluRecompute's loop on the first multiple of 8
// elements: swigluForward8's, also storing s in sig.
func swigluRecompute8(h, sig, g, u []float32) int {
	if !haveElem8 {
		return 0
	}
	k := newExpf8()
	one := archsimd.BroadcastFloat32x8(1)
	n8 := len(g) &^ 7
	for i := 0; i < n8; i += 8 {
		gv := archsimd.LoadFloat32x8Slice(g[i : i+8])
		s := one.Div(one.Add(k.exp(neg8(gv))))
		s.StoreSlice(sig[i : i+8])
		gv.Mul(s).Mul(archsimd.LoadFloat32x8Slice(u[i : i+8])).StoreSlice(h[i : i+8])
	}
	archsimd.ClearAVXUpperBits()
	return n8
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
