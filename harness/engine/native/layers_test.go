package native

import (
	"context"
	"math"
	"testing"
)

func TestRMSNormGrad(t *testing.T) {
	for _, tc := range []struct {
		name string
		n, d int
	}{{"rmsnorm", 3, 8}, {"qk-norm rows", 12, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			x := randVec(tc.n*tc.d, 1, 1)
			w := randVec(tc.d, 2, 1)
			r := randVec(tc.n*tc.d, 3, 1)
			y := make([]float32, len(x))
			rs := make([]float32, tc.n)
			loss := func() float64 {
				rmsnormForward(y, rs, x, w, tc.n, tc.d, 1e-6)
				return weighted(y, r)
			}
			loss()
			dx := make([]float32, len(x))
			dw := make([]float32, len(w))
			rmsnormBackward(dx, r, x, w, rs, tc.n, tc.d)
			rmsnormWeightBackward(dw, r, x, rs, tc.n, tc.d)
			fdCheck(t, "dx", x, dx, loss)
			fdCheck(t, "dw", w, dw, loss)
		})
	}
}

// TestQKNormRopeGrad checks per-head RMSNorm followed by RoPE, as q and k
// go through them.
func TestQKNormRopeGrad(t *testing.T) {
	const n, heads, hd = 5, 3, 8
	rp := newRope(16, hd, 10000)
	pos := []int32{0, 1, 2, 7, 15}
	x := randVec(n*heads*hd, 4, 1)
	w := randVec(hd, 5, 1)
	r := randVec(n*heads*hd, 6, 1)
	y := make([]float32, len(x))
	rs := make([]float32, n*heads)
	loss := func() float64 {
		rmsnormForward(y, rs, x, w, n*heads, hd, 1e-6)
		rp.forward(y, pos, heads, hd)
		return weighted(y, r)
	}
	loss()
	dy := append([]float32(nil), r...)
	rp.backward(dy, pos, heads, hd)
	dx := make([]float32, len(x))
	dw := make([]float32, hd)
	rmsnormBackward(dx, dy, x, w, rs, n*heads, hd)
	rmsnormWeightBackward(dw, dy, x, rs, n*heads, hd)
	fdCheck(t, "dx", x, dx, loss)
	fdCheck(t, "dw", w, dw, loss)
}

func TestRopeGradAndInvariance(t *testing.T) {
	const heads, hd = 2, 6
	rp := newRope(8, hd, 1e6)
	pos := []int32{3, 5}
	x := randVec(2*heads*hd, 7, 1)
	r := randVec(len(x), 8, 1)
	y := make([]float32, len(x))
	loss := func() float64 {
		copy(y, x)
		rp.forward(y, pos, heads, hd)
		return weighted(y, r)
	}
	loss()
	dx := append([]float32(nil), r...)
	rp.backward(dx, pos, heads, hd)
	fdCheck(t, "dx", x, dx, loss)
	loss()
	// Rotation preserves norms, and position 0 is the identity.
	for i := 0; i < 2*heads; i++ {
		a := dot(x[i*hd:(i+1)*hd], x[i*hd:(i+1)*hd])
		b := dot(y[i*hd:(i+1)*hd], y[i*hd:(i+1)*hd])
		if math.Abs(float64(a-b)) > 1e-5 {
			t.Errorf("head %d: norm² %v before rotation, %v after", i, a, b)
		}
	}
	z := append([]float32(nil), x[:hd]...)
	rp.forward(z, []int32{0}, 1, hd)
	for i := range z {
		if z[i] != x[i] {
			t.Fatalf("rope at position 0 changed element %d: %v -> %v", i, x[i], z[i])
		}
	}
}

func TestAttentionGrad(t *testing.T) {
	for _, tc := range []struct {
		name         string
		t, h, kv, hd int
	}{{"gqa", 6, 4, 2, 4}, {"mha", 5, 2, 2, 6}, {"mqa", 4, 3, 1, 2}, {"long", 70, 2, 1, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			g := attnGeom{H: tc.h, KV: tc.kv, HD: tc.hd, scale: float32(1 / math.Sqrt(float64(tc.hd)))}
			qd, kvd := tc.h*tc.hd, tc.kv*tc.hd
			q := randVec(tc.t*qd, 9, 1.5)
			k := randVec(tc.t*kvd, 10, 1.5)
			v := randVec(tc.t*kvd, 11, 1)
			r := randVec(tc.t*qd, 12, 1)
			out := make([]float32, tc.t*qd)
			probs := make([]float32, tc.h*tc.t*tc.t)
			loss := func() float64 {
				for h := 0; h < tc.h; h++ {
					g.attnSeqHead(h, tc.t, q, k, v, out, probs[h*tc.t*tc.t:])
				}
				return weighted(out, r)
			}
			loss()
			// Each row computed alone (the decode path) gives the same bits.
			row := make([]float32, qd)
			sc := make([]float32, tc.t)
			for i := 0; i < tc.t; i++ {
				g.attnRow(row, q[i*qd:(i+1)*qd], k, v, 0, i, sc)
				for j := range row {
					if row[j] != out[i*qd+j] {
						t.Fatalf("row %d alone differs from the sequence pass at %d: %v vs %v", i, j, row[j], out[i*qd+j])
					}
				}
			}
			dq := make([]float32, len(q))
			dk := make([]float32, len(k))
			dv := make([]float32, len(v))
			dp := make([]float32, tc.t*tc.t)
			for kvh := 0; kvh < tc.kv; kvh++ {
				g.attnBackwardSeq(kvh, tc.t, q, k, v, probs, r, dq, dk, dv, dp)
			}
			fdCheck(t, "dq", q, dq, loss)
			fdCheck(t, "dk", k, dk, loss)
			fdCheck(t, "dv", v, dv, loss)
		})
	}
}

func TestSwiGLUGrad(t *testing.T) {
	g := randVec(20, 13, 3)
	u := randVec(20, 14, 2)
	r := randVec(20, 15, 1)
	h := make([]float32, 20)
	loss := func() float64 {
		swigluForward(h, g, u)
		return weighted(h, r)
	}
	loss()
	// The backward pass recomputes h with σ(g), then overwrites σ with dg.
	h2, sig, du := make([]float32, 20), make([]float32, 20), make([]float32, 20)
	swigluRecompute(h2, sig, g, u)
	for i := range h {
		if h2[i] != h[i] {
			t.Fatalf("recomputed h[%d] = %v, forward gave %v", i, h2[i], h[i])
		}
	}
	swigluBackwardSig(sig, du, r, g, u, sig)
	fdCheck(t, "dgate", g, sig, loss)
	fdCheck(t, "dup", u, du, loss)
}

// TestLogSoftmaxGrad checks d lp / d logits = (onehot - p) / T, the
// cross-entropy gradient the train steps use.
func TestLogSoftmaxGrad(t *testing.T) {
	for _, temp := range []float64{1, 0.7, 2} {
		logits := randVec(11, 16, 3)
		const target = 4
		probs := make([]float32, 11)
		loss := func() float64 {
			lp, _ := logSoftmaxRow(logits, temp, target, probs)
			return lp
		}
		loss()
		g := make([]float32, 11)
		for j := range g {
			g[j] = float32(-float64(probs[j]) / temp)
		}
		g[target] += float32(1 / temp)
		fdCheck(t, "dlogits", logits, g, loss)
		// Entropy of a uniform row is log V.
		_, ent := logSoftmaxRow(make([]float32, 11), temp, 0, nil)
		if math.Abs(ent-math.Log(11)) > 1e-12 {
			t.Errorf("entropy of uniform row %v, want %v", ent, math.Log(11))
		}
	}
}

// TestLinearLoRAGrad checks a linear layer with a LoRA adapter: dx, dW, dA
// and dB, with the adapter gradients split over two row ranges (agents).
func TestLinearLoRAGrad(t *testing.T) {
	e := testEngine(t, true, 2)
	if err := e.NewAdapter(context.Background(), "a", adapterCfg(3)); err != nil {
		t.Fatal(err)
	}
	ad := e.adapters["a"]
	copy(ad.Data, randVec(len(ad.Data), 17, 0.5))
	for _, m := range []int{modQ, modO, modDown} {
		in, out := e.d.modShape(m)
		const n = 7
		x := randVec(n*in, 18, 1)
		r := randVec(n*out, 19, 1)
		y := make([]float32, n*out)
		lu := make([]float32, n*3)
		b := &rowBatch{n: n, groups: []adGroup{{0, n, ad}}}
		loss := func() float64 {
			e.linFwd(1, m, b, y, x, lu)
			return weighted(y, r)
		}
		loss()
		dx := make([]float32, n*in)
		gw := NewWeights(e.cfg)
		g1 := make([]float32, len(ad.Data))
		g2 := make([]float32, len(ad.Data))
		gs := &gradSink{base: gw, ranges: []adGroup{{lo: 0, hi: 3}, {lo: 3, hi: n}}, adGrads: [][]float32{g1, g2}}
		e.linBwd(1, m, n, ad, dx, r, x, lu, make([]float32, n*3), gs)
		ga := make([]float32, len(ad.Data))
		axpy(1, g1, ga)
		axpy(1, g2, ga)
		name := modNames[m]
		fdCheck(t, name+" dx", x, dx, loss)
		fdCheck(t, name+" dW", e.w.Layers[1].Lin[m], gw.Layers[1].Lin[m], loss)
		ao, bo := ad.aOff[1][m], ad.bOff[1][m]
		fdCheck(t, name+" dA", ad.Data[ao:ao+3*in], ga[ao:ao+3*in], loss)
		fdCheck(t, name+" dB", ad.Data[bo:bo+out*3], ga[bo:bo+out*3], loss)
		// The split by rows is a split of the gradient: rows 0..2 alone.
		r2 := append([]float32(nil), r...)
		zero(r2[3*out:])
		h1 := make([]float32, len(ad.Data))
		gs2 := &gradSink{ranges: []adGroup{{lo: 0, hi: n}}, adGrads: [][]float32{h1}}
		e.linBwd(1, m, n, ad, make([]float32, n*in), r2, x, lu, make([]float32, n*3), gs2)
		for i := range h1 {
			if math.Abs(float64(h1[i]-g1[i])) > 1e-5 {
				t.Fatalf("%s: gradient of rows 0..2 differs from range buffer at %d: %v vs %v", name, i, h1[i], g1[i])
			}
		}
	}
}

func TestExpf(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 200000; i++ {
		x := float32(-87 + 175.5*float64(i)/200000)
		got, want := float64(expf(x)), math.Exp(float64(x))
		rel := math.Abs(got-want) / want
		worst = math.Max(worst, rel)
	}
	if worst > 4e-7 {
		t.Errorf("expf worst relative error %.3g", worst)
	}
	if expf(-100) != 0 || !math.IsInf(float64(expf(100)), 1) || expf(0) != 1 {
		t.Errorf("expf edge cases: %v %v %v", expf(-100), expf(100), expf(0))
	}
}

// TestGemmTilingInvariance: the tiled GEMM gives the same bits as one
// serial gonum call for every thread count, and a row's result does not
// depend on the other rows (all three transpose cases).
func TestGemmTilingInvariance(t *testing.T) {
	for _, sh := range []struct{ m, n, k int }{{1, 7, 5}, {65, 200, 70}, {130, 390, 33}, {3, 64, 256}} {
		for _, tr := range []struct{ ta, tb bool }{{false, true}, {false, false}, {true, false}} {
			a := randVec(sh.m*sh.k, 51, 1)
			b := randVec(sh.n*sh.k, 52, 1)
			lda, ldb := sh.k, sh.n
			if tr.ta {
				lda = sh.m
			}
			if tr.tb {
				ldb = sh.k
			}
			var ref []float32
			for _, th := range []int{1, 2, 3, 8} {
				c := randVec(sh.m*sh.n, 53, 1)
				pool{threads: th}.gemm(tr.ta, tr.tb, sh.m, sh.n, sh.k, 0.5, a, lda, b, ldb, 1, c, sh.n)
				if ref == nil {
					ref = c
					continue
				}
				for i := range c {
					if c[i] != ref[i] {
						t.Fatalf("shape %+v trans %+v threads %d: element %d differs", sh, tr, th, i)
					}
				}
			}
			if tr.ta {
				continue
			}
			// Row 0 alone gives the same bits as within the batch.
			c1 := randVec(sh.n, 53, 1)
			pool{threads: 1}.gemm(false, tr.tb, 1, sh.n, sh.k, 0.5, a, lda, b, ldb, 1, c1, sh.n)
			for j := range c1 {
				if c1[j] != ref[j] {
					t.Fatalf("shape %+v trans %+v: row 0 alone differs at column %d", sh, tr, j)
				}
			}
		}
	}
}

// TestAdamW checks two steps of the optimizer against torch.optim.AdamW's
// update written out by hand.
func TestAdamW(t *testing.T) {
	for _, tc := range []struct{ lr, b1, b2, eps, wd float64 }{{1e-2, 0.9, 0.999, 1e-8, 0.01}, {3e-4, 0.8, 0.99, 1e-6, 0}} {
		p := []float32{0.5, -1, 2}
		grads := [][]float32{{0.1, -0.2, 0}, {-0.3, 0.05, 1}}
		ref := []float64{0.5, -1, 2}
		m, v := make([]float64, 3), make([]float64, 3)
		s := newAdam(3)
		for step, g := range grads {
			s.update(p, g, tc.lr, tc.b1, tc.b2, tc.eps, tc.wd)
			k := float64(step + 1)
			for i := range ref {
				gi := float64(g[i])
				ref[i] *= 1 - tc.lr*tc.wd
				m[i] = tc.b1*m[i] + (1-tc.b1)*gi
				v[i] = tc.b2*v[i] + (1-tc.b2)*gi*gi
				mh, vh := m[i]/(1-math.Pow(tc.b1, k)), v[i]/(1-math.Pow(tc.b2, k))
				ref[i] -= tc.lr * mh / (math.Sqrt(vh) + tc.eps)
				if math.Abs(float64(p[i])-ref[i]) > 1e-6 {
					t.Errorf("%+v step %d param %d: %v, want %v", tc, step, i, p[i], ref[i])
				}
			}
		}
		if s.Step != 2 {
			t.Errorf("step count %d", s.Step)
		}
	}
}
