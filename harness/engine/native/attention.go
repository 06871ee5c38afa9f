package native

import "math"

// Causal attention with grouped-query heads. Scores and weighted sums go
// through gonum's serial kernels (or SIMD kernels that give their bits, see
// gemmTile, attn16_simd.go and softmax_simd.go): a score is alpha * DotUnitary(q_i, k_j)
// and an output row is a sequence of AxpyUnitary over the keys in order, so
// a row gets the same bits whether it is computed alone (decode), with the
// rows of its sequence (training), or in any batch, as long as key rows sit
// at the same address alignment (KV*HD a multiple of 4 and 16-byte aligned
// buffers, which Go's allocator gives every slice of 32 bytes or more).

// sgemmSerial computes C = alpha op(A) op(B) + beta C in tiles small enough
// for gonum to use its serial kernel, one after the other. It is not
// pool{threads: 1}.gemm because that allocates its closure on every call,
// and decode calls this per row and head (TestDecodeAllocs).
func sgemmSerial(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	for i0 := 0; i0 < m; i0 += tileM {
		mm := min(tileM, m-i0)
		for j0 := 0; j0 < n; j0 += tileN {
			nn := min(tileN, n-j0)
			as, bs := a[i0:], b[j0:]
			if !tA {
				as = a[i0*lda:]
			}
			if tB {
				bs = b[j0*ldb:]
			}
			gemmTile(tA, tB, mm, nn, k, alpha, as, lda, bs, ldb, beta, c[i0*ldc+j0:], ldc)
		}
	}
}

// scoreRows computes c = alpha q kᵀ for head-dim rows q [m, HD] and k [n,
// HD] (strides ldq, ldk; c stride ldc): the scores of attention and the dP
// of its backward pass. With head dim 16 and SIMD it runs scores16, which
// gives the bits of the gonum path.
func (g attnGeom) scoreRows(m, n int, alpha float32, q []float32, ldq int, k []float32, ldk int, c []float32, ldc int) {
	if g.HD == 16 && haveAttn16 && kernelUse[kScores16] && m > 0 && n > 0 {
		scores16(m, n, alpha, q, ldq, k, ldk, c, ldc)
		return
	}
	sgemmSerial(false, true, m, n, g.HD, alpha, q, ldq, k, ldk, 0, c, ldc)
}

// pvRows computes out [m, HD] = p [m, n] v [n, HD] (+ out when beta), the
// weighted sums of attention, skipping zero weights (pv16 with head dim 16
// and SIMD, the same bits).
func (g attnGeom) pvRows(m, n int, p []float32, ldp int, v []float32, ldv int, beta bool, out []float32, ldo int) {
	if g.HD == 16 && haveAttn16 && kernelUse[kPV16] && m > 0 && n > 0 {
		pv16(m, n, p, ldp, v, ldv, beta, out, ldo)
		return
	}
	b := float32(0)
	if beta {
		b = 1
	}
	sgemmSerial(false, false, m, g.HD, n, 1, p, ldp, v, ldv, b, out, ldo)
}

// softmaxInPlace turns scores s into probabilities (max-subtracted, float32).
func softmaxInPlace(s []float32) {
	mx, ok := max8(s)
	if !ok {
		mx = float32(math.Inf(-1))
		for _, v := range s {
			mx = max(mx, v)
		}
	}
	// The first entries' exponentials may come 8 at a time (expDiff8, the
	// same bits); the sum runs in index order either way.
	var sum float32
	k := expDiff8(s, s, mx)
	for _, e := range s[:k] {
		sum += e
	}
	for j := k; j < len(s); j++ {
		e := expf(s[j] - mx)
		s[j] = e
		sum += e
	}
	inv := 1 / sum
	for j := scale8(s, inv); j < len(s); j++ {
		s[j] *= inv
	}
}

// attnChunk is the row chunk of causal score products: each chunk is
// computed against keys up to its last row, so little of the upper triangle
// is computed and thrown away.
const attnChunk = 16

// attnGeom holds the head geometry of attention.
type attnGeom struct {
	H, KV, HD int
	scale     float32
}

// attnRow computes causal attention of one query row at position p:
// q [H*HD], key/value stores kst/vst [*, KV*HD] whose rows base..base+p are
// the row's positions 0..p, out [H*HD]. scores is scratch of length p+1.
func (g attnGeom) attnRow(out, q, kst, vst []float32, base, p int, scores []float32) {
	kvd := g.KV * g.HD
	rep := g.H / g.KV
	sc := scores[:p+1]
	for h := 0; h < g.H; h++ {
		kh := (h/rep)*g.HD + base*kvd
		g.scoreRows(1, p+1, g.scale, q[h*g.HD:], g.HD, kst[kh:], kvd, sc, p+1)
		softmaxInPlace(sc)
		g.pvRows(1, p+1, sc, p+1, vst[kh:], kvd, false, out[h*g.HD:], g.HD)
	}
}

// attnSeqHead computes causal attention of head h over one sequence of t
// rows: q [t, H*HD], k, v [t, KV*HD], out [t, H*HD] (all pointing at the
// sequence's first row); probs [t, t] receives the probabilities, zero above
// the diagonal. Row i gets the same bits as attnRow at position i.
func (g attnGeom) attnSeqHead(h, t int, q, k, v, out, probs []float32) {
	qd, kvd := g.H*g.HD, g.KV*g.HD
	kh := (h / (g.H / g.KV)) * g.HD
	for i0 := 0; i0 < t; i0 += attnChunk {
		mm := min(attnChunk, t-i0)
		// Scores of rows i0.. against keys 0..i0+mm-1 (the causal bound).
		g.scoreRows(mm, i0+mm, g.scale, q[i0*qd+h*g.HD:], qd, k[kh:], kvd, probs[i0*t:], t)
	}
	for i := 0; i < t; i++ {
		row := probs[i*t : (i+1)*t]
		softmaxInPlace(row[:i+1])
		zero(row[i+1:])
	}
	// out_h = P V_g; zero probabilities (above the diagonal) are skipped.
	g.pvRows(t, t, probs, t, v[kh:], kvd, false, out[h*g.HD:], qd)
}

// Shared prompts. A training sequence may be a group of t rows whose first
// pre rows are a prompt shared by the branches that follow it: seg[i] is the
// group-relative first row of row i's branch (rows of a branch are
// contiguous). A branch row attends to the prompt rows and to its own branch
// up to itself, in that key order. The group's probabilities are stored
// compactly: per head the prompt's [pre, pre] triangle, then for each branch
// of nb rows per head [nb, pre+nb] (the branch rows of the probabilities of
// the sequence prompt + branch), so that storage and work grow with the rows
// each row attends to, never with the group's size squared.

// branches returns the first row and length of each branch of a group.
func branches(t, pre int, seg []int32) (starts, lens []int) {
	for bs := pre; bs < t; {
		be := bs + 1
		for be < t && int(seg[be]) == bs {
			be++
		}
		starts, lens = append(starts, bs), append(lens, be-bs)
		bs = be
	}
	return starts, lens
}

// sharedProbs is the size of a group's compact probabilities over all heads.
func sharedProbs(heads, pre int, lens []int) int {
	n := pre * pre
	for _, nb := range lens {
		n += nb * (pre + nb)
	}
	return heads * n
}

// attnSharedHead is attnSeqHead for head h of a group (see above): q, k, v,
// out point at the group's first row. A branch row gets the bits
// attnSeqHead gives the same row in its own sequence of prompt and branch:
// its scores are the same dot products, its softmax runs over the same
// values in the same order, and its weighted sum adds the same terms in the
// same order (gonum's kernel sums the keys one after the other, so two
// calls over consecutive key ranges add what one call would). With stack,
// probs is the group's compact probabilities of all heads; otherwise it is
// scratch of at least one block, reused block after block.
func (g attnGeom) attnSharedHead(h, t, pre int, seg []int32, q, k, v, out, probs []float32, stack bool) {
	qd, kvd := g.H*g.HD, g.KV*g.HD
	kh := (h / (g.H / g.KV)) * g.HD
	off := 0
	block := func(size, heads int) []float32 {
		if !stack {
			return probs[:size]
		}
		p := probs[off+h*size : off+(h+1)*size]
		off += heads * size
		return p
	}
	g.attnSeqHead(h, pre, q, k, v, out, block(pre*pre, g.H))
	starts, lens := branches(t, pre, seg)
	for j, bs := range starts {
		nb := lens[j]
		L := pre + nb
		p := block(nb*L, g.H)
		qb, ob := q[bs*qd+h*g.HD:], out[bs*qd+h*g.HD:]
		for i0 := 0; i0 < nb; i0 += attnChunk {
			mm := min(attnChunk, nb-i0)
			g.scoreRows(mm, pre, g.scale, qb[i0*qd:], qd, k[kh:], kvd, p[i0*L:], L)
			g.scoreRows(mm, i0+mm, g.scale, qb[i0*qd:], qd, k[bs*kvd+kh:], kvd, p[i0*L+pre:], L)
		}
		for i := 0; i < nb; i++ {
			row := p[i*L : (i+1)*L]
			softmaxInPlace(row[:pre+i+1])
			zero(row[pre+i+1:])
		}
		g.pvRows(nb, pre, p, L, v[kh:], kvd, false, ob, qd)
		g.pvRows(nb, nb, p[pre:], L, v[bs*kvd+kh:], kvd, true, ob, qd)
	}
}

// attnBackwardShared is attnBackwardSeq for key/value head kvh of a group
// (see above) with its compact probabilities probs. The gradients of the
// prompt's keys and values collect the prompt rows' and every branch's
// share. dp is scratch of at least the largest block.
func (g attnGeom) attnBackwardShared(kvh, t, pre int, seg []int32, q, k, v, probs, dout, dq, dk, dv, dp []float32) {
	qd, kvd := g.H*g.HD, g.KV*g.HD
	rep := g.H / g.KV
	kh := kvh * g.HD
	g.attnBackwardSeq(kvh, pre, q, k, v, probs, dout, dq, dk, dv, dp)
	off := g.H * pre * pre
	starts, lens := branches(t, pre, seg)
	for j, bs := range starts {
		nb := lens[j]
		L := pre + nb
		d := dp[:nb*L]
		for h := kvh * rep; h < (kvh+1)*rep; h++ {
			p := probs[off+h*nb*L : off+(h+1)*nb*L]
			dob, qb := dout[bs*qd+h*g.HD:], q[bs*qd+h*g.HD:]
			// dV += Pᵀ dO_h, prompt keys then branch keys.
			sgemmSerial(true, false, pre, g.HD, nb, 1, p, L, dob, qd, 1, dv[kh:], kvd)
			sgemmSerial(true, false, nb, g.HD, nb, 1, p[pre:], L, dob, qd, 1, dv[bs*kvd+kh:], kvd)
			// dP = dO_h Vᵀ over the attended keys.
			g.scoreRows(nb, pre, 1, dob, qd, v[kh:], kvd, d, L)
			for i0 := 0; i0 < nb; i0 += attnChunk {
				mm := min(attnChunk, nb-i0)
				g.scoreRows(mm, i0+mm, 1, dob[i0*qd:], qd, v[bs*kvd+kh:], kvd, d[i0*L+pre:], L)
			}
			// dS = P ⊙ (dP - Σ_j P dP) · scale
			for i := 0; i < nb; i++ {
				n := pre + i + 1
				pr, dr := p[i*L:i*L+n], d[i*L:(i+1)*L]
				var s float32
				for j, pj := range pr {
					s += pj * dr[j]
				}
				for j, pj := range pr {
					dr[j] = pj * (dr[j] - s) * g.scale
				}
				zero(dr[n:])
			}
			// dQ_h += dS K ; dK += dSᵀ Q_h
			g.pvRows(nb, pre, d, L, k[kh:], kvd, true, dq[bs*qd+h*g.HD:], qd)
			g.pvRows(nb, nb, d[pre:], L, k[bs*kvd+kh:], kvd, true, dq[bs*qd+h*g.HD:], qd)
			sgemmSerial(true, false, pre, g.HD, nb, 1, d, L, qb, qd, 1, dk[kh:], kvd)
			sgemmSerial(true, false, nb, g.HD, nb, 1, d[pre:], L, qb, qd, 1, dk[bs*kvd+kh:], kvd)
		}
		off += g.H * nb * L
	}
}

// attnBackwardSeq back-propagates causal attention of one sequence of t
// rows for key/value head kvh and its query heads. q, k, v, dout, dq, dk,
// dv point at the sequence's first row (strides H*HD and KV*HD); probs holds
// [H, t, t] probabilities from attnSeqHead. dq, dk, dv are accumulated. dp
// is scratch of t*t.
func (g attnGeom) attnBackwardSeq(kvh, t int, q, k, v, probs, dout, dq, dk, dv, dp []float32) {
	qd, kvd := g.H*g.HD, g.KV*g.HD
	rep := g.H / g.KV
	kh := kvh * g.HD
	dp = dp[:t*t]
	for h := kvh * rep; h < (kvh+1)*rep; h++ {
		p := probs[h*t*t : (h+1)*t*t]
		// dV_g += Pᵀ dO_h
		sgemmSerial(true, false, t, g.HD, t, 1, p, t, dout[h*g.HD:], qd, 1, dv[kh:], kvd)
		// dP = dO_h V_gᵀ (lower triangle)
		for i0 := 0; i0 < t; i0 += attnChunk {
			mm := min(attnChunk, t-i0)
			g.scoreRows(mm, i0+mm, 1, dout[i0*qd+h*g.HD:], qd, v[kh:], kvd, dp[i0*t:], t)
		}
		// dS = P ⊙ (dP - Σ_j P dP) · scale
		for i := 0; i < t; i++ {
			pr, dr := p[i*t:i*t+i+1], dp[i*t:(i+1)*t]
			var s float32
			for j, pj := range pr {
				s += pj * dr[j]
			}
			for j, pj := range pr {
				dr[j] = pj * (dr[j] - s) * g.scale
			}
			zero(dr[i+1:])
		}
		// dQ_h += dS K_g ; dK_g += dSᵀ Q_h
		g.pvRows(t, t, dp, t, k[kh:], kvd, true, dq[h*g.HD:], qd)
		sgemmSerial(true, false, t, g.HD, t, 1, dp, t, q[h*g.HD:], qd, 1, dk[kh:], kvd)
	}
}
