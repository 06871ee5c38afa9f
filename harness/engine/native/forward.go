package native

// The decoder forward and backward over a packed batch of rows. A row is one
// token of one sequence; rows of a sequence are contiguous during training.
// The same layerForward serves training (activations saved, keys and values
// read from the saved activations), prefill and decode (keys and values
// written to and read from the KV cache), so a row's result is the same bits
// on every path.

// rowGrain is the fewest rows an elementwise loop gives one goroutine.
const rowGrain = 32

// adGroup applies adapter ad (nil = base) to rows [lo, hi).
type adGroup struct {
	lo, hi int
	ad     *Adapter
}

// rowBatch describes the rows of one forward pass.
type rowBatch struct {
	n      int
	ids    []int32 // [n] input token ids
	pos    []int32 // [n] position of each row in its sequence
	kvBase []int32 // [n] row of position 0 of the row's sequence in the K/V store
	groups []adGroup
	seqs   []int // training: sequence start rows, len = sequences+1
	// pre is, per training sequence, the length of the prompt its branches
	// share (0: a plain sequence; see attnSharedHead), and seg, per row, the
	// sequence-relative first row of the row's branch (0 in prompts).
	pre   []int
	seg   []int32
	pmax  int // longest sequence
	probN int // training: saved attention probabilities, Σ_seqs H t²
	// probSeq is, per row, the offset of its sequence's saved probabilities.
	probSeq []int
}

// layerActs are the activations of one layer for n rows.
type layerActs struct {
	x1    []float32 // [n, D] residual after attention
	xn1   []float32 // [n, D] attention-norm output
	rs1   []float32 // [n]
	q     []float32 // [n, Q] q projection (before q_norm)
	k     []float32 // [n, KVD]
	v     []float32 // [n, KVD]
	rsq   []float32 // [n*H]
	rsk   []float32 // [n*KV]
	qr    []float32 // [n, Q] q after q_norm and RoPE
	kr    []float32 // [n, KVD]
	att   []float32 // [n, Q] attention output
	probs []float32 // training: [H, t, t] per plain sequence of t rows (row i uses its first i+1); per shared-prefix group sharedProbs' layout
	xn2   []float32 // [n, D]
	rs2   []float32 // [n]
	g, u  []float32 // [n, F] gate and up projections
	lu    [numMods][]float32
}

// fwdScratch holds buffers one layer's forward needs only while it runs.
type fwdScratch struct {
	tmp []float32 // [n, D] o and down projection outputs
	h   []float32 // [n, F] silu(g) * u (recomputed by the backward pass)
}

func (s *fwdScratch) size(d dims, n int) {
	s.tmp = grow(s.tmp, n*d.D)
	s.h = grow(s.h, n*d.F)
}

// grow returns s resized to n, reusing its memory when it is large enough.
func grow(s []float32, n int) []float32 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float32, n)
}

func zero(s []float32) {
	for i := range s {
		s[i] = 0
	}
}

func (a *layerActs) size(d dims, n, probN, rank int, save bool) {
	a.x1 = grow(a.x1, n*d.D)
	a.xn1 = grow(a.xn1, n*d.D)
	a.rs1 = grow(a.rs1, n)
	a.q = grow(a.q, n*d.Q)
	a.k = grow(a.k, n*d.KVD)
	a.v = grow(a.v, n*d.KVD)
	a.rsq = grow(a.rsq, n*d.H)
	a.rsk = grow(a.rsk, n*d.KV)
	a.qr = grow(a.qr, n*d.Q)
	a.kr = grow(a.kr, n*d.KVD)
	a.att = grow(a.att, n*d.Q)
	if save {
		a.probs = grow(a.probs, probN)
	}
	a.xn2 = grow(a.xn2, n*d.D)
	a.rs2 = grow(a.rs2, n)
	a.g = grow(a.g, n*d.F)
	a.u = grow(a.u, n*d.F)
	for m := range a.lu {
		a.lu[m] = grow(a.lu[m], n*rank)
	}
}

// linFwd: y[n, out] = x W ᵀ, then for each adapter group with module m
// targeted, u = x Aᵀ [rows, r] (kept in lu) and y += s u Bᵀ.
func (e *Engine) linFwd(l, m int, b *rowBatch, y, x, lu []float32) {
	in, out := e.d.modShape(m)
	e.pool.linear(y, x, e.w.Layers[l].Lin[m], b.n, in, out)
	for _, g := range b.groups {
		if !g.ad.has(m) {
			continue
		}
		r := g.ad.Cfg.Rank
		rows := g.hi - g.lo
		u := lu[g.lo*r : g.hi*r]
		e.pool.gemm(false, true, rows, r, in, 1, x[g.lo*in:], in, g.ad.A(l, m, e.d), in, 0, u, r)
		e.pool.gemm(false, true, rows, out, r, g.ad.scale, u, r, g.ad.B(l, m, e.d), r, 1, y[g.lo*out:], out)
	}
}

// layerForward runs decoder layer l on rows b: x [n, D] in, out [n, D] out
// (out may alias x). With kst/vst nil the keys and values are read from the
// activations (training: row kvBase+pos is the row itself); otherwise they
// are first written to the stores at row kvBase+pos. save keeps attention
// probabilities for the backward pass.
func (e *Engine) layerForward(l int, b *rowBatch, a *layerActs, x, out, kst, vst []float32, save bool) {
	d, lw, n := e.d, &e.w.Layers[l], b.n
	fs := &e.ws.fs
	e.pool.runGrain(n, rowGrain, func(_, lo, hi int) {
		rmsnormForward(a.xn1[lo*d.D:hi*d.D], a.rs1[lo:hi], x[lo*d.D:hi*d.D], lw.AttnNorm, hi-lo, d.D, d.Eps)
	})
	e.linFwd(l, modQ, b, a.q, a.xn1, a.lu[modQ])
	e.linFwd(l, modK, b, a.k, a.xn1, a.lu[modK])
	e.linFwd(l, modV, b, a.v, a.xn1, a.lu[modV])
	e.pool.runGrain(n, rowGrain, func(_, lo, hi int) {
		rmsnormForward(a.qr[lo*d.Q:hi*d.Q], a.rsq[lo*d.H:hi*d.H], a.q[lo*d.Q:hi*d.Q], lw.QNorm, (hi-lo)*d.H, d.HD, d.Eps)
		rmsnormForward(a.kr[lo*d.KVD:hi*d.KVD], a.rsk[lo*d.KV:hi*d.KV], a.k[lo*d.KVD:hi*d.KVD], lw.KNorm, (hi-lo)*d.KV, d.HD, d.Eps)
		e.rope.forward(a.qr[lo*d.Q:hi*d.Q], b.pos[lo:hi], d.H, d.HD)
		e.rope.forward(a.kr[lo*d.KVD:hi*d.KVD], b.pos[lo:hi], d.KV, d.HD)
		if kst != nil {
			for i := lo; i < hi; i++ {
				r := int(b.kvBase[i] + b.pos[i])
				copy(kst[r*d.KVD:(r+1)*d.KVD], a.kr[i*d.KVD:(i+1)*d.KVD])
				copy(vst[r*d.KVD:(r+1)*d.KVD], a.v[i*d.KVD:(i+1)*d.KVD])
			}
		}
	})
	if kst == nil {
		kst, vst = a.kr, a.v
	}
	geo := e.geom()
	if b.seqs != nil {
		// Training: rows of a sequence are contiguous and attend to each other.
		nseq := len(b.seqs) - 1
		e.pool.run(nseq*d.H, func(w, lo, hi int) {
			for it := lo; it < hi; it++ {
				sq, h := it/d.H, it%d.H
				r0, t := b.seqs[sq], b.seqs[sq+1]-b.seqs[sq]
				pr := e.scores[w]
				if save && b.pre[sq] == 0 {
					o := b.probSeq[r0] + h*t*t
					pr = a.probs[o : o+t*t]
				}
				if pre := b.pre[sq]; pre > 0 {
					if save {
						pr = a.probs[b.probSeq[r0]:]
					}
					geo.attnSharedHead(h, t, pre, b.seg[r0:r0+t], a.qr[r0*d.Q:], kst[r0*d.KVD:], vst[r0*d.KVD:], a.att[r0*d.Q:], pr, save)
					continue
				}
				geo.attnSeqHead(h, t, a.qr[r0*d.Q:], kst[r0*d.KVD:], vst[r0*d.KVD:], a.att[r0*d.Q:], pr)
			}
		})
	} else {
		e.pool.runGrain(n, 4, func(w, lo, hi int) {
			sc := e.scores[w]
			for i := lo; i < hi; i++ {
				geo.attnRow(a.att[i*d.Q:(i+1)*d.Q], a.qr[i*d.Q:(i+1)*d.Q], kst, vst, int(b.kvBase[i]), int(b.pos[i]), sc)
			}
		})
	}
	e.linFwd(l, modO, b, fs.tmp, a.att, a.lu[modO])
	e.pool.runGrain(n, rowGrain, func(_, lo, hi int) {
		for i := lo * d.D; i < hi*d.D; i++ {
			a.x1[i] = x[i] + fs.tmp[i]
		}
		rmsnormForward(a.xn2[lo*d.D:hi*d.D], a.rs2[lo:hi], a.x1[lo*d.D:hi*d.D], lw.MLPNorm, hi-lo, d.D, d.Eps)
	})
	e.linFwd(l, modGate, b, a.g, a.xn2, a.lu[modGate])
	e.linFwd(l, modUp, b, a.u, a.xn2, a.lu[modUp])
	e.pool.runGrain(n, rowGrain, func(_, lo, hi int) {
		swigluForward(fs.h[lo*d.F:hi*d.F], a.g[lo*d.F:hi*d.F], a.u[lo*d.F:hi*d.F])
	})
	e.linFwd(l, modDown, b, fs.tmp, fs.h, a.lu[modDown])
	e.pool.runGrain(n, rowGrain, func(_, lo, hi int) {
		for i := lo * d.D; i < hi*d.D; i++ {
			out[i] = a.x1[i] + fs.tmp[i]
		}
	})
}

func (e *Engine) geom() attnGeom {
	return attnGeom{H: e.d.H, KV: e.d.KV, HD: e.d.HD, scale: e.attnScale}
}

// embed writes the embedding rows of ids into x [n, D].
func (e *Engine) embed(x []float32, ids []int32) {
	D := e.d.D
	for i, id := range ids {
		copy(x[i*D:(i+1)*D], e.w.Embed[int(id)*D:(int(id)+1)*D])
	}
}

// headForward gathers rows sel of the final residual xl, applies the final
// norm into xf [m, D] (rstd rs [m]) and the LM head into logits [m, V].
func (e *Engine) headForward(xl []float32, sel []int32, xg, xf, rs, logits []float32) {
	D, V, m := e.d.D, e.d.V, len(sel)
	for j, r := range sel {
		copy(xg[j*D:(j+1)*D], xl[int(r)*D:(int(r)+1)*D])
	}
	e.pool.runGrain(m, rowGrain, func(_, lo, hi int) {
		rmsnormForward(xf[lo*D:hi*D], rs[lo:hi], xg[lo*D:hi*D], e.w.Norm, hi-lo, D, e.d.Eps)
	})
	e.pool.linear(logits, xf, e.w.LMHead, m, D, V)
}

// gradSink receives parameter gradients of a backward pass: base weight
// gradients (full-parameter training) and/or adapter gradients split by
// contiguous row ranges (one buffer per agent).
type gradSink struct {
	base    *Weights    // nil: no base gradients
	ranges  []adGroup   // row ranges; ad unused
	adGrads [][]float32 // adapter gradient buffer per range (layout of Adapter.Data)
}

// linBwd back-propagates linear module m of layer l (single adapter ad or
// nil): dx [n, in] += dy W (+ LoRA path); base and adapter weight gradients
// go to the sink. du is scratch [n, r].
func (e *Engine) linBwd(l, m int, n int, ad *Adapter, dx, dy, x, lu, du []float32, gs *gradSink) {
	in, out := e.d.modShape(m)
	var dw []float32
	if gs.base != nil {
		dw = gs.base.Layers[l].Lin[m]
	}
	e.pool.linearBackward(dx, dw, dy, x, e.w.Layers[l].Lin[m], n, in, out)
	if !ad.has(m) {
		return
	}
	r := ad.Cfg.Rank
	A, B := ad.A(l, m, e.d), ad.B(l, m, e.d)
	ao, bo := ad.aOff[l][m], ad.bOff[l][m]
	// du[n, r] = s dy[n, out] B[out, r]
	e.pool.gemm(false, false, n, r, out, ad.scale, dy, out, B, r, 0, du, r)
	for k, g := range gs.ranges {
		rows := g.hi - g.lo
		gb := gs.adGrads[k][bo : bo+out*r]
		ga := gs.adGrads[k][ao : ao+r*in]
		// gB[out, r] += s dyᵀ u ; gA[r, in] += duᵀ x
		e.pool.gemm(true, false, out, r, rows, ad.scale, dy[g.lo*out:], out, lu[g.lo*r:], r, 1, gb, r)
		e.pool.gemm(true, false, r, in, rows, 1, du[g.lo*r:], r, x[g.lo*in:], in, 1, ga, in)
	}
	// dx[n, in] += du[n, r] A[r, in]
	e.pool.gemm(false, false, n, in, r, 1, du, r, A, in, 1, dx, in)
}

// bwdScratch holds the gradient buffers of one layer's backward pass.
type bwdScratch struct {
	h, dh, dg, du []float32 // [n, F]
	dxn           []float32 // [n, D]
	datt          []float32 // [n, Q]
	dq, dqr       []float32 // [n, Q]
	dk, dkr       []float32 // [n, KVD]
	dv            []float32 // [n, KVD]
	dlu           []float32 // [n, r]
	dp            [][]float32
}

func (s *bwdScratch) size(d dims, n, rank, pmax, threads int) {
	s.h = grow(s.h, n*d.F)
	s.dh = grow(s.dh, n*d.F)
	s.dg = grow(s.dg, n*d.F)
	s.du = grow(s.du, n*d.F)
	s.dxn = grow(s.dxn, n*d.D)
	s.datt = grow(s.datt, n*d.Q)
	s.dq = grow(s.dq, n*d.Q)
	s.dqr = grow(s.dqr, n*d.Q)
	s.dk = grow(s.dk, n*d.KVD)
	s.dkr = grow(s.dkr, n*d.KVD)
	s.dv = grow(s.dv, n*d.KVD)
	s.dlu = grow(s.dlu, n*rank)
	if len(s.dp) < threads {
		s.dp = make([][]float32, threads)
	}
	for i := range s.dp[:threads] {
		s.dp[i] = grow(s.dp[i], pmax*pmax)
	}
}

// layerBackward back-propagates layer l. x is the layer input [n, D]; dres
// holds dL/d(output) on entry and dL/d(input) on return.
func (e *Engine) layerBackward(l int, b *rowBatch, ad *Adapter, a *layerActs, x, dres []float32, s *bwdScratch, gs *gradSink) {
	d, lw, n := e.d, &e.w.Layers[l], b.n
	var gw *LayerWeights
	if gs.base != nil {
		gw = &gs.base.Layers[l]
	}
	// MLP: out = x1 + down(silu(gate(xn2)) * up(xn2)).
	// σ(gate) goes to s.dg, which the SwiGLU backward then overwrites.
	e.pool.runGrain(n, rowGrain, func(_, lo, hi int) {
		swigluRecompute(s.h[lo*d.F:hi*d.F], s.dg[lo*d.F:hi*d.F], a.g[lo*d.F:hi*d.F], a.u[lo*d.F:hi*d.F])
	})
	zero(s.dh)
	e.linBwd(l, modDown, n, ad, s.dh, dres, s.h, a.lu[modDown], s.dlu, gs)
	e.pool.runGrain(n, rowGrain, func(_, lo, hi int) {
		swigluBackwardSig(s.dg[lo*d.F:hi*d.F], s.du[lo*d.F:hi*d.F], s.dh[lo*d.F:hi*d.F], a.g[lo*d.F:hi*d.F], a.u[lo*d.F:hi*d.F], s.dg[lo*d.F:hi*d.F])
	})
	zero(s.dxn)
	e.linBwd(l, modGate, n, ad, s.dxn, s.dg, a.xn2, a.lu[modGate], s.dlu, gs)
	e.linBwd(l, modUp, n, ad, s.dxn, s.du, a.xn2, a.lu[modUp], s.dlu, gs)
	if gw != nil {
		rmsnormWeightBackward(gw.MLPNorm, s.dxn, a.x1, a.rs2, n, d.D)
	}
	e.pool.runGrain(n, rowGrain, func(_, lo, hi int) {
		rmsnormBackward(dres[lo*d.D:hi*d.D], s.dxn[lo*d.D:hi*d.D], a.x1[lo*d.D:hi*d.D], lw.MLPNorm, a.rs2[lo:hi], hi-lo, d.D)
	})
	// Attention: x1 = x + o(attn(rope(qnorm(q(xn1))), rope(knorm(k(xn1))), v(xn1))).
	zero(s.datt)
	e.linBwd(l, modO, n, ad, s.datt, dres, a.att, a.lu[modO], s.dlu, gs)
	zero(s.dqr)
	zero(s.dkr)
	zero(s.dv)
	geo := e.geom()
	nseq := len(b.seqs) - 1
	e.pool.run(nseq*d.KV, func(w, lo, hi int) {
		for it := lo; it < hi; it++ {
			sq, kvh := it/d.KV, it%d.KV
			r0, t := b.seqs[sq], b.seqs[sq+1]-b.seqs[sq]
			if pre := b.pre[sq]; pre > 0 {
				geo.attnBackwardShared(kvh, t, pre, b.seg[r0:r0+t], a.qr[r0*d.Q:], a.kr[r0*d.KVD:], a.v[r0*d.KVD:],
					a.probs[b.probSeq[r0]:], s.datt[r0*d.Q:], s.dqr[r0*d.Q:], s.dkr[r0*d.KVD:], s.dv[r0*d.KVD:], s.dp[w])
				continue
			}
			geo.attnBackwardSeq(kvh, t, a.qr[r0*d.Q:], a.kr[r0*d.KVD:], a.v[r0*d.KVD:],
				a.probs[b.probSeq[r0]:], s.datt[r0*d.Q:], s.dqr[r0*d.Q:], s.dkr[r0*d.KVD:], s.dv[r0*d.KVD:], s.dp[w])
		}
	})
	zero(s.dq)
	zero(s.dk)
	e.pool.runGrain(n, rowGrain, func(_, lo, hi int) {
		e.rope.backward(s.dqr[lo*d.Q:hi*d.Q], b.pos[lo:hi], d.H, d.HD)
		e.rope.backward(s.dkr[lo*d.KVD:hi*d.KVD], b.pos[lo:hi], d.KV, d.HD)
		rmsnormBackward(s.dq[lo*d.Q:hi*d.Q], s.dqr[lo*d.Q:hi*d.Q], a.q[lo*d.Q:hi*d.Q], lw.QNorm, a.rsq[lo*d.H:hi*d.H], (hi-lo)*d.H, d.HD)
		rmsnormBackward(s.dk[lo*d.KVD:hi*d.KVD], s.dkr[lo*d.KVD:hi*d.KVD], a.k[lo*d.KVD:hi*d.KVD], lw.KNorm, a.rsk[lo*d.KV:hi*d.KV], (hi-lo)*d.KV, d.HD)
	})
	if gw != nil {
		rmsnormWeightBackward(gw.QNorm, s.dqr, a.q, a.rsq, n*d.H, d.HD)
		rmsnormWeightBackward(gw.KNorm, s.dkr, a.k, a.rsk, n*d.KV, d.HD)
	}
	zero(s.dxn)
	e.linBwd(l, modQ, n, ad, s.dxn, s.dq, a.xn1, a.lu[modQ], s.dlu, gs)
	e.linBwd(l, modK, n, ad, s.dxn, s.dk, a.xn1, a.lu[modK], s.dlu, gs)
	e.linBwd(l, modV, n, ad, s.dxn, s.dv, a.xn1, a.lu[modV], s.dlu, gs)
	if gw != nil {
		rmsnormWeightBackward(gw.AttnNorm, s.dxn, x, a.rs1, n, d.D)
	}
	e.pool.runGrain(n, rowGrain, func(_, lo, hi int) {
		rmsnormBackward(dres[lo*d.D:hi*d.D], s.dxn[lo*d.D:hi*d.D], x[lo*d.D:hi*d.D], lw.AttnNorm, a.rs1[lo:hi], hi-lo, d.D)
	})
}
