package native

import (
	"context"
	"math"
	"testing"
)

// refForward is an independent float64 transcription of the Hugging Face
// Qwen3 forward (modeling_qwen3.py) with PEFT LoRA: it returns the logits
// [len(ids), V] of one sequence. ad may be nil.
func refForward(e *Engine, ad *Adapter, ids []int32) [][]float64 {
	d, w := e.d, e.w
	f := func(v []float32) []float64 {
		o := make([]float64, len(v))
		for i, x := range v {
			o[i] = float64(x)
		}
		return o
	}
	rms := func(x []float64, wt []float32) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		r := 1 / math.Sqrt(ss/float64(len(x))+float64(d.Eps))
		o := make([]float64, len(x))
		for i := range x {
			o[i] = x[i] * r * float64(wt[i])
		}
		return o
	}
	lin := func(l, m int, x []float64) []float64 {
		in, out := d.modShape(m)
		W := w.Layers[l].Lin[m]
		y := make([]float64, out)
		for o := 0; o < out; o++ {
			for i := 0; i < in; i++ {
				y[o] += float64(W[o*in+i]) * x[i]
			}
		}
		if ad.has(m) {
			r := ad.Cfg.Rank
			A, B := ad.A(l, m, d), ad.B(l, m, d)
			u := make([]float64, r)
			for k := 0; k < r; k++ {
				for i := 0; i < in; i++ {
					u[k] += float64(A[k*in+i]) * x[i]
				}
			}
			for o := 0; o < out; o++ {
				for k := 0; k < r; k++ {
					y[o] += ad.Cfg.Alpha / float64(r) * float64(B[o*r+k]) * u[k]
				}
			}
		}
		return y
	}
	rope := func(x []float64, pos int) {
		h := d.HD / 2
		for i := 0; i < h; i++ {
			inv := 1 / math.Pow(e.cfg.RopeTheta, float64(2*i)/float64(d.HD))
			c, s := math.Cos(float64(pos)*inv), math.Sin(float64(pos)*inv)
			a, b := x[i], x[i+h]
			x[i], x[i+h] = a*c-b*s, b*c+a*s
		}
	}
	T := len(ids)
	hs := make([][]float64, T)
	for t, id := range ids {
		hs[t] = f(w.Embed[int(id)*d.D : (int(id)+1)*d.D])
	}
	for l := 0; l < d.L; l++ {
		lw := &w.Layers[l]
		qs, ks, vs := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		for t := range hs {
			x := rms(hs[t], lw.AttnNorm)
			q, k := lin(l, modQ, x), lin(l, modK, x)
			vs[t] = lin(l, modV, x)
			for h := 0; h < d.H; h++ {
				copy(q[h*d.HD:], rms(q[h*d.HD:(h+1)*d.HD], lw.QNorm))
				rope(q[h*d.HD:(h+1)*d.HD], t)
			}
			for h := 0; h < d.KV; h++ {
				copy(k[h*d.HD:], rms(k[h*d.HD:(h+1)*d.HD], lw.KNorm))
				rope(k[h*d.HD:(h+1)*d.HD], t)
			}
			qs[t], ks[t] = q, k
		}
		rep := d.H / d.KV
		for t := range hs {
			att := make([]float64, d.Q)
			for h := 0; h < d.H; h++ {
				kv := h / rep // repeat_kv: query head h reads key/value head h // n_rep
				sc := make([]float64, t+1)
				mx := math.Inf(-1)
				for j := 0; j <= t; j++ {
					for i := 0; i < d.HD; i++ {
						sc[j] += qs[t][h*d.HD+i] * ks[j][kv*d.HD+i]
					}
					sc[j] /= math.Sqrt(float64(d.HD))
					mx = math.Max(mx, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for i := 0; i < d.HD; i++ {
						att[h*d.HD+i] += sc[j] / sum * vs[j][kv*d.HD+i]
					}
				}
			}
			o := lin(l, modO, att)
			for i := range o {
				hs[t][i] += o[i]
			}
			x := rms(hs[t], lw.MLPNorm)
			g, u := lin(l, modGate, x), lin(l, modUp, x)
			for i := range g {
				g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
			}
			m := lin(l, modDown, g)
			for i := range m {
				hs[t][i] += m[i]
			}
		}
	}
	out := make([][]float64, T)
	for t := range hs {
		x := rms(hs[t], w.Norm)
		out[t] = make([]float64, d.V)
		for v := 0; v < d.V; v++ {
			for i := 0; i < d.D; i++ {
				out[t][v] += float64(w.LMHead[v*d.D+i]) * x[i]
			}
		}
	}
	return out
}

// TestForwardMatchesReference compares the engine's logits with the float64
// transcription of the Hugging Face forward, with and without a LoRA
// adapter, tied and untied.
func TestForwardMatchesReference(t *testing.T) {
	for _, tied := range []bool{true, false} {
		e := testEngine(t, tied, 2)
		if err := e.NewAdapter(context.Background(), "a", adapterCfg(3)); err != nil {
			t.Fatal(err)
		}
		ad := e.adapters["a"]
		copy(ad.Data, randVec(len(ad.Data), 61, 0.4))
		ids, err := e.tok.Encode("reference check, 21 tokens long")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []*Adapter{nil, ad} {
			rows := make([]int32, len(ids))
			for i := range rows {
				rows[i] = int32(i)
			}
			sel, _ := e.buildTrainBatch([]seqInput{{ids: ids, rows: rows, targets: ids}}, nil, a)
			got := e.trainForward(a, sel, false)
			want := refForward(e, a, ids)
			worst := 0.0
			for r := range want {
				for v, x := range want[r] {
					diff := math.Abs(float64(got[r*e.d.V+v]) - x)
					worst = math.Max(worst, diff)
					if diff > 1e-4*math.Max(1, math.Abs(x)) {
						t.Fatalf("tied=%v adapter=%v: logit [%d, %d] = %v, reference %v", tied, a != nil, r, v, got[r*e.d.V+v], x)
					}
				}
			}
			t.Logf("tied=%v adapter=%v: worst logit difference %.2e", tied, a != nil, worst)
		}
	}
}
