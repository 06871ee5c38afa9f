package native

import (
	"fmt"
)

// seqInput is one training sequence: the token ids fed to the model and the
// rows (relative to the sequence) whose next-token prediction is scored,
// with the target ids.
type seqInput struct {
	ids     []int32
	rows    []int32 // positions scored
	targets []int32 // target token per scored position
}

// seqGroup is a set of training sequences (indices into a seqInput slice)
// whose first pre ids are the same prompt: the prompt is laid out once and
// each member's remaining ids follow it as a branch (see attnSharedHead).
// pre is 0 for a plain sequence (one member, laid out whole).
type seqGroup struct {
	members []int
	pre     int
}

// buildTrainBatch packs seqs into ws.b in the layout of groups (nil: each
// sequence on its own); sel receives the absolute rows to score, tgt their
// targets, both in the order of seqs.
func (e *Engine) buildTrainBatch(seqs []seqInput, groups []seqGroup, ad *Adapter) (sel, tgt []int32) {
	if groups == nil {
		groups = make([]seqGroup, len(seqs))
		for i := range groups {
			groups[i] = seqGroup{members: []int{i}}
		}
	}
	b := &e.ws.b
	b.ids, b.pos, b.kvBase, b.groups = b.ids[:0], b.pos[:0], b.kvBase[:0], b.groups[:0]
	b.seqs, b.pre, b.seg = b.seqs[:0], b.pre[:0], b.seg[:0]
	b.probSeq = b.probSeq[:0]
	b.pmax, b.probN = 1, 0
	// start[i] is the absolute row of seqs[i]'s first id after the prompt
	// of its group (its first id for a plain sequence), lo[i] its group's
	// first row and pre[i] its group's prompt length.
	start, lo0, pre := make([]int, len(seqs)), make([]int, len(seqs)), make([]int, len(seqs))
	for _, g := range groups {
		lo := len(b.ids)
		b.seqs = append(b.seqs, lo)
		b.pre = append(b.pre, g.pre)
		add := func(ids []int32, pos0 int, seg int32) {
			for p, id := range ids {
				b.ids = append(b.ids, id)
				b.pos = append(b.pos, int32(pos0+p))
				b.kvBase = append(b.kvBase, int32(lo))
				b.seg = append(b.seg, seg)
			}
		}
		add(seqs[g.members[0]].ids[:g.pre], 0, 0)
		for _, m := range g.members {
			start[m], lo0[m], pre[m] = len(b.ids), lo, g.pre
			seg := int32(0)
			if g.pre > 0 {
				seg = int32(len(b.ids) - lo)
			}
			add(seqs[m].ids[g.pre:], g.pre, seg)
		}
		t := len(b.ids) - lo
		for range t {
			b.probSeq = append(b.probSeq, b.probN)
		}
		if g.pre == 0 {
			b.pmax = max(b.pmax, t)
			b.probN += e.d.H * t * t
			continue
		}
		// A shared group's longest sequence is its prompt and a branch.
		_, lens := branches(t, g.pre, b.seg[lo:])
		b.pmax = max(b.pmax, g.pre)
		for _, nb := range lens {
			b.pmax = max(b.pmax, g.pre+nb)
		}
		b.probN += sharedProbs(e.d.H, g.pre, lens)
	}
	for i, s := range seqs {
		for k, r := range s.rows {
			row := start[i] + int(r) - pre[i]
			if int(r) < pre[i] {
				row = lo0[i] + int(r)
			}
			sel = append(sel, int32(row))
			tgt = append(tgt, s.targets[k])
		}
	}
	b.seqs = append(b.seqs, len(b.ids))
	b.n = len(b.ids)
	for w := range e.scores {
		e.scores[w] = grow(e.scores[w], max(b.pmax*b.pmax, e.d.MaxPos))
	}
	b.groups = append(b.groups, adGroup{lo: 0, hi: b.n, ad: ad})
	return sel, tgt
}

// trainForward runs the packed batch in ws.b with adapter ad (nil = base),
// keeping activations when save, and returns logits [len(sel), V].
func (e *Engine) trainForward(ad *Adapter, sel []int32, save bool) []float32 {
	d, ws, b := e.d, &e.ws, &e.ws.b
	rank := 1
	if ad != nil {
		rank = ad.Cfg.Rank
	}
	if len(ws.acts) != d.L {
		ws.acts = make([]layerActs, d.L)
		ws.xs = make([][]float32, d.L+1)
	}
	for l := range ws.xs {
		ws.xs[l] = grow(ws.xs[l], b.n*d.D)
	}
	ws.fs.size(d, b.n)
	e.embed(ws.xs[0], b.ids)
	for l := 0; l < d.L; l++ {
		a := &ws.acts[l]
		a.size(d, b.n, b.probN, rank, save)
		e.layerForward(l, b, a, ws.xs[l], ws.xs[l+1], nil, nil, save)
	}
	m := len(sel)
	ws.xg = grow(ws.xg, m*d.D)
	ws.xf = grow(ws.xf, m*d.D)
	ws.rs = grow(ws.rs, m)
	ws.lg = grow(ws.lg, m*d.V)
	e.headForward(ws.xs[d.L], sel, ws.xg, ws.xf, ws.rs, ws.lg)
	return ws.lg
}

// trainBackward back-propagates dlogits [len(sel), V] through the pass of
// the last trainForward (with save) into the sink.
func (e *Engine) trainBackward(ad *Adapter, sel []int32, dlogits []float32, gs *gradSink) {
	d, ws, b := e.d, &e.ws, &e.ws.b
	m := len(sel)
	rank := 1
	if ad != nil {
		rank = ad.Cfg.Rank
	}
	// LM head: logits = xf LMᵀ.
	dxf := grow(nil, m*d.D)
	var dlm []float32
	if gs.base != nil {
		dlm = gs.base.LMHead
	}
	e.pool.linearBackward(dxf, dlm, dlogits, ws.xf, e.w.LMHead, m, d.D, d.V)
	if gs.base != nil {
		rmsnormWeightBackward(gs.base.Norm, dxf, ws.xg, ws.rs, m, d.D)
	}
	dxg := grow(nil, m*d.D)
	e.pool.runGrain(m, rowGrain, func(_, lo, hi int) {
		rmsnormBackward(dxg[lo*d.D:hi*d.D], dxf[lo*d.D:hi*d.D], ws.xg[lo*d.D:hi*d.D], e.w.Norm, ws.rs[lo:hi], hi-lo, d.D)
	})
	ws.dres = grow(ws.dres, b.n*d.D)
	zero(ws.dres)
	for j, r := range sel {
		axpy(1, dxg[j*d.D:(j+1)*d.D], ws.dres[int(r)*d.D:(int(r)+1)*d.D])
	}
	ws.bwd.size(d, b.n, rank, b.pmax, e.pool.threads)
	for l := d.L - 1; l >= 0; l-- {
		e.layerBackward(l, b, ad, &ws.acts[l], ws.xs[l], ws.dres, &ws.bwd, gs)
	}
	if gs.base != nil {
		for i, id := range b.ids {
			axpy(1, ws.dres[i*d.D:(i+1)*d.D], gs.base.Embed[int(id)*d.D:(int(id)+1)*d.D])
		}
	}
}

// checkIDs reports the first id outside the vocabulary.
func (e *Engine) checkIDs(what string, ids []int32) error {
	for i, id := range ids {
		if id < 0 || int(id) >= e.d.V {
			return fmt.Errorf("%s: token %d at index %d is outside the vocabulary [0, %d)", what, id, i, e.d.V)
		}
	}
	return nil
}
