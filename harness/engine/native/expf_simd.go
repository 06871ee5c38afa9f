//go:build goexperiment.simd && amd64

package native

import (
	"simd/archsimd"
	"sync"
)

// expf8 and expf16 are expf (ops.go) 8 and 16 lanes wide, for SwiGLU's
// sigmoid (swiglu_simd.go) and softmax's exponential (softmax_simd.go).
// They perform expf's float32 operations in expf's order on every lane,
// unfused, and take its branches lane by lane, so every lane has expf's
// bits. Their constants are broadcast once per process (exp8Consts,
// exp16Consts): broadcasting scalars in every call cost a merge of a vector
// register's upper half per scalar instruction on Intel cores (a build for
// GOAMD64=v1 computes scalars with SSE instructions).

// expPoly are the coefficients of expf's polynomial, innermost first.
var expPoly = [8]float32{expC7, expC6, expC5, expC4, expC3, expC2, 1, 1}

// expf8 holds the constants of the 8-wide expf.
type expf8 struct {
	l2e, half, mhalf, zero, one, hi, lo, two, inf, over, under archsimd.Float32x8
	c                                                          [8]archsimd.Float32x8
	maxN, sign                                                 archsimd.Int32x8
}

// exp8Consts are expf8's constants, built on first use (on a CPU with
// AVX2: the broadcasts are AVX2 instructions).
var exp8Consts = sync.OnceValue(func() *expf8 { k := newExpf8(); return &k })

// exp16Consts are expf16's constants, built on first use (AVX-512).
var exp16Consts = sync.OnceValue(func() *expf16 { k := newExpf16(); return &k })

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
