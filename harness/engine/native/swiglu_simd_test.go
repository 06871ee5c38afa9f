//go:build goexperiment.simd && amd64

package native

import (
	"context"
	"fmt"
	"math"
	"simd/archsimd"
	"slices"
	"testing"

	"github.com/marlowlab/marlow/harness/internal/procstat"
	"github.com/marlowlab/marlow/keyed"
)

// sameBits says whether a and b have the same bits, or are both NaN: x86
// hands on the payload of one NaN operand of a multiplication, chosen by
// operand order, and the Go compiler may swap the operands of a scalar
// product, so a NaN's payload is not part of what the kernels reproduce.
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// edgeFloats are arguments at expf's branches and the float32 extremes.
func edgeFloats() []float32 {
	next := func(x float32, d float64) float32 { return float32(math.Nextafter32(x, float32(d))) }
	v := []float32{
		0, float32(math.Copysign(0, -1)), 1, -1, 88.5, -88.5, 88.8, -88.8, -87.5, -87.2, 87.5, 87.2,
		88.72, -88.72, 87.33, -87.33, 88.38, -88.38, 88.3763, -88.3763,
		1e30, -1e30, math.MaxFloat32, -math.MaxFloat32, 1e-30, -1e-30,
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1e-40, -1e-40, 1.1754942e-38, -1.1754942e-38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0xffc00001),
		0.34657359, -0.34657359, 0.34657362, -0.34657362,
	}
	for _, x := range []float32{88.72, -88.72, 87.33, -87.33} {
		v = append(v, next(x, math.Inf(1)), next(x, math.Inf(-1)))
	}
	return v
}

// elemInputs returns n floats: mostly moderate values of scale s, every
// fifth an edge value, every seventh an arbitrary bit pattern.
func elemInputs(n int, key uint64, s float64) []float32 {
	v, edge := randVec(n, key, s), edgeFloats()
	for i := range v {
		switch {
		case i%5 == 2:
			v[i] = edge[(i/5+int(key))%len(edge)]
		case i%7 == 3:
			v[i] = math.Float32frombits(uint32(keyed.SplitMix64(key<<32 | uint64(i))))
		}
	}
	return v
}

// TestExpf8MatchesExpf: the 8- and 16-wide exponentials give expf's bits for
// float32 arguments spread over every exponent and sign (every 997th bit
// pattern), for the 8000 float32 around each of expf's cut-offs, around
// ±ln2/2 and 127.5 ln2 (where its rounding of n changes, the latter to the
// n > 127 path) and around ±50.6, and at the edge values.
func TestExpf8MatchesExpf(t *testing.T) {
	if !haveSwiGLU8 {
		t.Skip("no AVX2")
	}
	var src []float32
	for b := uint64(0); b < 1<<32; b += 997 {
		src = append(src, math.Float32frombits(uint32(b)))
	}
	for _, c := range []float32{88.72, -87.33, 88.3763, 0.34657359, -0.34657359, 50.6, -50.6} { // 88.3763 = 127.5 ln2
		x := c
		for i := 0; i < 4000; i++ {
			x = math.Nextafter32(x, float32(math.Inf(-1)))
		}
		for i := 0; i < 8000; i++ {
			src = append(src, x)
			x = math.Nextafter32(x, float32(math.Inf(1)))
		}
	}
	src = append(src, edgeFloats()...)
	for len(src)%16 != 0 {
		src = append(src, 0)
	}
	for _, width := range []int{8, 16} {
		dst := make([]float32, len(src))
		switch {
		case width == 8:
			k := newExpf8()
			for j := 0; j < len(src); j += 8 {
				k.exp(archsimd.LoadFloat32x8Slice(src[j : j+8])).StoreSlice(dst[j : j+8])
			}
		case haveSwiGLU16:
			k := newExpf16()
			for j := 0; j < len(src); j += 16 {
				k.exp(archsimd.LoadFloat32x16Slice(src[j : j+16])).StoreSlice(dst[j : j+16])
			}
		default:
			t.Log("no AVX-512: 16-wide exponential not tested")
			continue
		}
		for j, x := range src {
			if w := expf(x); !sameBits(dst[j], w) {
				t.Fatalf("%d wide: exp(%v) = %v (%#x), expf %v (%#x)", width, x, dst[j], math.Float32bits(dst[j]), w, math.Float32bits(w))
			}
		}
	}
}

// setElemKernels switches the elementwise SIMD kernels of SwiGLU and
// RMSNorm on or off (wide: SwiGLU's 16-wide sigmoid).
func setElemKernels(on, wide bool) {
	haveSwiGLU8, haveRMSNorm8, haveSwiGLU16 = on, on, wide
}

// elemCase runs f on the scalar code, with the 8-wide kernels and (with
// AVX-512) with the 16-wide ones, and says which outputs differ.
func elemCase(t *testing.T, name string, f func() [][]float32) {
	t.Helper()
	defer setElemKernels(haveSwiGLU8, haveSwiGLU16)
	setElemKernels(false, false)
	want := f()
	for _, wide := range []bool{false, true} {
		if wide && !archsimd.X86.AVX512() {
			continue
		}
		setElemKernels(true, wide)
		got := f()
		for o := range want {
			for i := range want[o] {
				if !sameBits(got[o][i], want[o][i]) {
					t.Fatalf("%s (16 wide %v): output %d at %d: SIMD %v (%#x), scalar %v (%#x)", name, wide, o, i,
						got[o][i], math.Float32bits(got[o][i]), want[o][i], math.Float32bits(want[o][i]))
				}
			}
		}
	}
}

// TestElem8MatchesScalar: swigluForward, swigluRecompute,
// swigluBackwardSig and the RMSNorm forward and backward give the scalar
// code's bits with the SIMD kernels, at every length from 0 to 53 (so every
// tail of both widths), on moderate values mixed with edge values and arbitrary bits.
func TestElem8MatchesScalar(t *testing.T) {
	if !haveSwiGLU8 {
		t.Skip("no AVX2")
	}
	for n := 0; n <= 53; n++ {
		key := uint64(n) * 16
		g, u := elemInputs(n+1, key+1, 6)[1:], elemInputs(n, key+2, 2)
		dh := elemInputs(n, key+3, 1)
		elemCase(t, "swigluForward", func() [][]float32 {
			h := make([]float32, n)
			swigluForward(h, g, u)
			return [][]float32{h}
		})
		elemCase(t, "swigluRecompute", func() [][]float32 {
			h, sig := make([]float32, n), make([]float32, n)
			swigluRecompute(h, sig, g, u)
			return [][]float32{h, sig}
		})
		sig := make([]float32, n)
		swigluRecompute(make([]float32, n), sig, g, u)
		elemCase(t, "swigluBackwardSig", func() [][]float32 {
			// dg aliases sig, as in the train step.
			dg, du := slices.Clone(sig), make([]float32, n)
			swigluBackwardSig(dg, du, dh, g, u, dg)
			return [][]float32{dg, du}
		})

		const rows = 3
		d := n
		x, w := elemInputs(rows*d, key+4, 2), elemInputs(d, key+5, 1)
		for i := 0; i < len(x); i += 4 {
			x[i] = float32(keyed.UniformAt(key+6, uint64(i))) // fewer Inf and NaN rows
		}
		dy, dx0 := elemInputs(rows*d, key+7, 1), elemInputs(rows*d, key+8, 1)
		dw0 := elemInputs(d, key+9, 1)
		rstd := []float32{0.7, 1.3e-5, 42}
		elemCase(t, "rmsnormForward", func() [][]float32 {
			y, rs := make([]float32, rows*d), make([]float32, rows)
			rmsnormForward(y, rs, x, w, rows, d, 1e-6)
			return [][]float32{y, rs}
		})
		elemCase(t, "rmsnormBackward", func() [][]float32 {
			dx := slices.Clone(dx0)
			rmsnormBackward(dx, dy, x, w, rstd, rows, d)
			return [][]float32{dx}
		})
		elemCase(t, "rmsnormWeightBackward", func() [][]float32 {
			dw := slices.Clone(dw0)
			rmsnormWeightBackward(dw, dy, x, rstd, rows, d)
			return [][]float32{dw}
		})
	}
}

// TestElem8Engine: a shared train step of the scale-l model gives the same
// statistics and gradients with and without the elementwise SIMD kernels.
func TestElem8Engine(t *testing.T) {
	if !haveSwiGLU8 {
		t.Skip("no AVX2")
	}
	defer setElemKernels(haveSwiGLU8, haveSwiGLU16)
	gen, agg := votingRequests()
	reqs := append(gen[:6:6], agg[:3]...)
	for i := range reqs {
		reqs[i].MaxNewTokens = 6
	}
	e := votingEngine(t, 2)
	comps, err := e.Generate(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	turns := votingTurns(reqs[:6], reqs[6:], comps[:6], comps[6:])
	var stats [2]struct{ loss, ent, kl, norm float64 }
	var grads [2][]float32
	for i, simd := range []bool{false, true} {
		setElemKernels(simd, simd && archsimd.X86.AVX512())
		e := votingEngine(t, 2)
		s, g, err := e.grpoStep(context.Background(), "policy", turns, votingTrainOptions(), false)
		if err != nil {
			t.Fatal(err)
		}
		stats[i] = struct{ loss, ent, kl, norm float64 }{s.Total.Loss, s.Total.Entropy, s.Total.KL, s.Total.GradNorm}
		grads[i] = g.total
	}
	if stats[0] != stats[1] || !slices.Equal(grads[0], grads[1]) {
		t.Errorf("train step: SIMD %+v, scalar %+v (gradients equal: %v)", stats[1], stats[0], slices.Equal(grads[0], grads[1]))
	}
}

// BenchmarkSwiGLU times swigluForward and swigluRecompute on 4096
// elements (16 rows of the intermediate width 256) with the scalar code,
// the 8-wide kernels and the 16-wide ones (elements per CPU second).
func BenchmarkSwiGLU(b *testing.B) {
	const n = 4096
	g, u := randVec(n, 1, 4), randVec(n, 2, 1)
	h, sig := make([]float32, n), make([]float32, n)
	defer setElemKernels(haveSwiGLU8, haveSwiGLU16)
	for _, width := range []int{1, 8, 16} {
		setElemKernels(width > 1 && archsimd.X86.AVX2(), width > 8 && archsimd.X86.AVX512())
		if (width == 8 && !haveSwiGLU8) || (width == 16 && !haveSwiGLU16) {
			continue
		}
		b.Run(fmt.Sprintf("width=%d/forward", width), func(b *testing.B) {
			c0 := procstat.CPUTime()
			for b.Loop() {
				swigluForward(h, g, u)
			}
			b.ReportMetric(float64(b.N*n)/(procstat.CPUTime()-c0), "elem/cpu-s")
		})
		b.Run(fmt.Sprintf("width=%d/recompute", width), func(b *testing.B) {
			c0 := procstat.CPUTime()
			for b.Loop() {
				swigluRecompute(h, sig, g, u)
			}
			b.ReportMetric(float64(b.N*n)/(procstat.CPUTime()-c0), "elem/cpu-s")
		})
	}
}
