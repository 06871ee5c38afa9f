//go:build goexperiment.simd && amd64

package native

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
)

// TestAttn16MatchesGonum: the SIMD kernels give the bits of the gonum
// calls they replace, with zero and negative-zero weights among them.
func TestAttn16MatchesGonum(t *testing.T) {
	if !haveAttn16 {
		t.Skip("no AVX")
	}
	const m, n, ld = 21, 70, 48
	q, k, v := randVec(m*ld, 1, 1), randVec(n*ld, 2, 1), randVec(n*ld, 3, 1)
	p := randVec(m*n, 4, 1)
	for i := 0; i < len(p); i += 7 {
		p[i] = 0
	}
	for i := 3; i < len(p); i += 11 {
		p[i] = float32(math.Copysign(0, -1))
	}
	q[5] = 0
	k[ld+5] = float32(math.Copysign(0, -1))
	// want is gonum's; the SIMD kernels under test use the GEMM blocks.
	simdGemm := haveGemm
	defer func() { haveGemm = simdGemm }()
	gonum := func(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
		haveGemm = false
		sgemmSerial(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		haveGemm = simdGemm
	}
	for _, alpha := range []float32{1, 0.25} {
		for _, nk := range []int{n, n - 1, 1} { // even, odd and one key
			want, got := make([]float32, m*nk), make([]float32, m*nk)
			gonum(false, true, m, nk, 16, alpha, q[16:], ld, k[32:], ld, 0, want, nk)
			scores16(m, nk, alpha, q[16:], ld, k[32:], ld, got, nk)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("scores alpha %v, %d keys, at %d: %v, gonum %v", alpha, nk, i, got[i], want[i])
				}
			}
		}
	}
	for _, beta := range []bool{false, true} {
		want, got := randVec(m*ld, 5, 1), randVec(m*ld, 5, 1)
		b := float32(0)
		if beta {
			b = 1
		}
		gonum(false, false, m, 16, n, 1, p, n, v[16:], ld, b, want[32:], ld)
		pv16(m, n, p, n, v[16:], ld, beta, got[32:], ld)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("pv beta %v at %d: %v, gonum %v", beta, i, got[i], want[i])
			}
		}
	}
}

// TestAttn16Engine: sampling and a shared train step of the scale-l model
// (head dim 16) give the same bits with and without the SIMD kernels
// (attention, softmax's exponential and the GEMM tiles).
func TestAttn16Engine(t *testing.T) {
	if !haveAttn16 {
		t.Skip("no AVX")
	}
	defer func(h, s, x, g bool) { haveAttn16, haveSoftmax8, haveExp8, haveGemm = h, s, x, g }(haveAttn16, haveSoftmax8, haveExp8, haveGemm)
	simdExp, simdGemm := haveExp8, haveGemm
	gen, agg := votingRequests()
	reqs := append(gen[:6:6], agg[:3]...)
	for i := range reqs {
		reqs[i].MaxNewTokens = 6
	}
	var comps [2][]engine.Completion
	var stats [2]engine.StepStats
	var grads [2]*grpoGrads
	for i, simd := range []bool{false, true} {
		haveAttn16, haveSoftmax8, haveExp8, haveGemm = simd, simd, simd && simdExp, simd && simdGemm
		e := votingEngine(t, 2)
		c, err := e.Generate(context.Background(), reqs)
		if err != nil {
			t.Fatal(err)
		}
		comps[i] = c
		turns := votingTurns(reqs[:6], reqs[6:], c[:6], c[6:])
		stats[i], grads[i], err = e.grpoStep(context.Background(), "policy", turns, votingTrainOptions(), false)
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range reqs {
		if !slices.Equal(comps[0][i].IDs, comps[1][i].IDs) || !slices.Equal(comps[0][i].LogProbs, comps[1][i].LogProbs) {
			t.Errorf("request %d: SIMD %v %v, gonum %v %v", i, comps[1][i].IDs, comps[1][i].LogProbs, comps[0][i].IDs, comps[0][i].LogProbs)
		}
	}
	a, b := stats[0].Total, stats[1].Total
	if a.Loss != b.Loss || a.Entropy != b.Entropy || a.KL != b.KL || a.GradNorm != b.GradNorm || !slices.Equal(grads[0].total, grads[1].total) {
		t.Errorf("train step: SIMD %+v, gonum %+v (gradients equal: %v)", stats[1].Total, stats[0].Total, slices.Equal(grads[0].total, grads[1].total))
	}
}

// TestExpDiff8MatchesExpf: the SIMD exponential of softmax gives expf's
// bits for every argument from 0 down past its underflow cut.
func TestExpDiff8MatchesExpf(t *testing.T) {
	if !haveExp8 {
		t.Skip("no AVX2")
	}
	var src []float32
	for x := float32(0); x > -95; x -= 0.0003 {
		src = append(src, x)
	}
	src = append(src, float32(math.Copysign(0, -1)), -87.33, -87.329994, -87.33001, float32(math.Inf(-1)), 1e-30, -1e-30)
	for _, mx := range []float32{0, 1e-30, -2.5} {
		dst := make([]float32, len(src))
		n := expDiff8(dst, src, mx)
		if n != len(src)&^7 {
			t.Fatalf("wrote %d of %d", n, len(src))
		}
		for j := 0; j < n; j++ {
			if src[j]-mx > 0 {
				continue
			}
			if w := expf(src[j] - mx); math.Float32bits(dst[j]) != math.Float32bits(w) {
				t.Fatalf("mx %v: exp(%v) = %v, expf %v", mx, src[j]-mx, dst[j], w)
			}
		}
	}
}

// TestSoftmaxSIMDMatchesScalar: softmax with the SIMD maximum, exponential
// and normalisation gives the scalar loop's bits at every length, with
// signed zeros, infinities and NaNs among the scores.
func TestSoftmaxSIMDMatchesScalar(t *testing.T) {
	if !haveSoftmax8 {
		t.Skip("no AVX")
	}
	defer func(h, x bool) { haveSoftmax8, haveExp8 = h, x }(haveSoftmax8, haveExp8)
	simdExp := haveExp8
	negZero := float32(math.Copysign(0, -1))
	specials := map[string]func(s []float32){
		"plain":       func(s []float32) {},
		"zeros":       func(s []float32) { clear(s) },
		"signed-0":    func(s []float32) { clear(s); s[0] = negZero; s[len(s)-1] = negZero },
		"max -0":      func(s []float32) { s[len(s)/2] = negZero; s[len(s)-1] = 0 },
		"+inf":        func(s []float32) { s[len(s)/3] = float32(math.Inf(1)) },
		"-inf":        func(s []float32) { s[0] = float32(math.Inf(-1)) },
		"nan first":   func(s []float32) { s[0] = float32(math.NaN()) },
		"nan in tail": func(s []float32) { s[len(s)-1] = float32(math.NaN()) },
	}
	for n := 1; n <= 41; n++ {
		for name, set := range specials {
			src := randVec(n, uint64(n), 6)
			for i := range src {
				src[i] -= 3
			}
			set(src)
			var out [2][]float32
			for i, simd := range []bool{false, true} {
				haveSoftmax8, haveExp8 = simd, simd && simdExp
				out[i] = append([]float32(nil), src...)
				softmaxInPlace(out[i])
			}
			for j := range src {
				a, b := out[0][j], out[1][j]
				if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
					t.Fatalf("%s, length %d, entry %d: SIMD %v, scalar %v", name, n, j, b, a)
				}
			}
		}
	}
}
