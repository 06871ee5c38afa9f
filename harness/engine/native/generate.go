package native

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/keyed"
)

// workspace holds buffers reused across calls.
type workspace struct {
	inf            layerActs // inference scratch (one layer at a time)
	fs             fwdScratch
	kc, vc         [][]float32 // KV cache per layer [seqs*cap, KVD]
	x              []float32   // inference residual [n, D]
	xg, xf, rs, lg []float32   // head buffers
	acts           []layerActs // training activations per layer
	xs             [][]float32 // training residuals per layer boundary [n, D]
	bwd            bwdScratch
	dres           []float32
	b              rowBatch
}

// genSeq is the sampling state of one request.
type genSeq struct {
	req    int // index in the request slice
	ad     *Adapter
	prompt []int32
	ids    []int32
	lps    []float32
	done   bool
	finish string
}

// Generate samples one completion per request: the prompts are prefilled
// together, then every unfinished sequence decodes one token per step from
// the KV cache. Sequence k of a request draws from the stream keyed by
// (Request.Seed, k), so its tokens do not depend on the batch.
func (e *Engine) Generate(ctx context.Context, reqs []engine.Request) ([]engine.Completion, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if err := engine.ValidateRequests(reqs, e.limits()); err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	seqs := make([]genSeq, len(reqs))
	capLen := 1
	for i, r := range reqs {
		ad := e.adapters[r.Adapter]
		p, err := e.tok.EncodeChat(r.Messages, true)
		if err != nil {
			return nil, fmt.Errorf("native: request %d: %w", i, err)
		}
		if len(p) == 0 {
			return nil, fmt.Errorf("native: request %d: empty prompt", i)
		}
		if len(p)+r.MaxNewTokens > e.d.MaxPos {
			return nil, fmt.Errorf("native: request %d: prompt of %d tokens + %d new tokens exceeds max_position_embeddings %d", i, len(p), r.MaxNewTokens, e.d.MaxPos)
		}
		seqs[i] = genSeq{req: i, ad: ad, prompt: p, ids: make([]int32, 0, r.MaxNewTokens), lps: make([]float32, 0, r.MaxNewTokens)}
		capLen = max(capLen, len(p)+r.MaxNewTokens)
		if r.MaxNewTokens == 0 {
			seqs[i].done, seqs[i].finish = true, engine.FinishLength
		}
	}
	// Rows are ordered by adapter so that each adapter's rows are contiguous.
	order := make([]int, len(seqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmpStr(reqs[a].Adapter, reqs[b].Adapter)
	})
	if err := e.generate(ctx, reqs, seqs, order, capLen); err != nil {
		return nil, err
	}
	out := make([]engine.Completion, len(reqs))
	for i := range seqs {
		s := &seqs[i]
		text := s.ids
		if s.finish == engine.FinishStop {
			text = text[:len(text)-1]
		}
		out[i] = engine.Completion{
			PromptIDs: s.prompt, IDs: s.ids, Text: e.tok.Decode(text), LogProbs: s.lps, Finish: s.finish,
		}
	}
	return out, nil
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// generate runs prefill and decode for seqs in row order order.
func (e *Engine) generate(ctx context.Context, reqs []engine.Request, seqs []genSeq, order []int, capLen int) error {
	d, ws := e.d, &e.ws
	ns := len(seqs)
	if len(ws.kc) != d.L {
		ws.kc, ws.vc = make([][]float32, d.L), make([][]float32, d.L)
	}
	for l := 0; l < d.L; l++ {
		ws.kc[l] = grow(ws.kc[l], ns*capLen*d.KVD)
		ws.vc[l] = grow(ws.vc[l], ns*capLen*d.KVD)
	}
	maxRank := 1
	for _, s := range seqs {
		if s.ad != nil {
			maxRank = max(maxRank, s.ad.Cfg.Rank)
		}
	}
	// Prefill: every prompt token of every sequence (also finished ones, so
	// rows stay simple); a sequence whose prompt starts like an earlier
	// sequence's (same adapter) copies that prefix's keys and values and
	// prefills only the rest (see planPrefill). The last row of each
	// sequence gives its first logits.
	plan := e.planPrefill(seqs, order)
	var active []int // sequence index per head row
	slot := make([]int, ns)
	for _, si := range order {
		if !seqs[si].done {
			slot[si] = len(active)
			active = append(active, si)
		}
	}
	logits := e.prefill(seqs, order, plan, capLen, maxRank, slot, len(active))
	return e.decodeSplit(ctx, reqs, seqs, active, logits, capLen, maxRank)
}

// decodeSplit decodes the active sequences (head row r of logits is
// active[r]'s) to the end. With more than one thread the sequences are
// split into contiguous parts of active (the pool's fixed partition), and
// each part decodes on a goroutine of its own from start to end, single
// threaded, over buffers of its own and the shared KV cache (every
// sequence has rows of its own in it): one hand-off per Generate instead
// of one per matrix product of every small decode step, so that both
// cores stay busy. A row's logits depend only on its token, its position
// and its own keys and values, never on the rows decoded with it, so the
// split changes no bit.
func (e *Engine) decodeSplit(ctx context.Context, reqs []engine.Request, seqs []genSeq, active []int, logits []float32, capLen, maxRank int) error {
	t := min(e.pool.threads, len(active))
	if t <= 1 {
		return e.decode(ctx, reqs, seqs, active, logits, capLen, maxRank)
	}
	if len(e.dws) < t {
		e.dws = append(e.dws, make([]workspace, t-len(e.dws))...)
	}
	errs := make([]error, t)
	V := e.d.V
	e.pool.run(len(active), func(w, lo, hi int) {
		we := *e
		we.pool = pool{threads: 1}
		we.scores = e.scores[w : w+1]
		we.ws = e.dws[w]
		we.ws.kc, we.ws.vc = e.ws.kc, e.ws.vc
		part := append([]int(nil), active[lo:hi]...)
		errs[w] = we.decode(ctx, reqs, seqs, part, logits[lo*V:hi*V], capLen, maxRank)
		e.dws[w] = we.ws
	})
	for _, err := range errs {
		if err != nil {
			return err // the parts fail alike (a cancelled context)
		}
	}
	return nil
}

// decode samples a token for each active sequence from its row of logits
// and runs decode steps over the unfinished ones, in row order, until
// every one is done.
func (e *Engine) decode(ctx context.Context, reqs []engine.Request, seqs []genSeq, active []int, logits []float32, capLen, maxRank int) error {
	d := e.d
	b := &e.ws.b
	var last []int32
	for step := 0; len(active) > 0; step++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("native: generate: %w", err)
		}
		for r, si := range active {
			s := &seqs[si]
			req := &reqs[s.req]
			tok, lp := sampleRow(logits[r*d.V:(r+1)*d.V], req.Temperature, keyed.SampleUniform(req.Seed, len(s.ids)))
			s.ids = append(s.ids, tok)
			s.lps = append(s.lps, lp)
			switch {
			case tok == e.imEnd && !req.IgnoreEndOfTurn:
				s.done, s.finish = true, engine.FinishStop
			case len(s.ids) >= req.MaxNewTokens:
				s.done, s.finish = true, engine.FinishLength
			}
		}
		// Next decode step over the unfinished sequences, in row order.
		b.ids, b.pos, b.kvBase, b.groups = b.ids[:0], b.pos[:0], b.kvBase[:0], b.groups[:0]
		next := active[:0]
		last = last[:0]
		for _, si := range active {
			s := &seqs[si]
			if s.done {
				continue
			}
			next = append(next, si)
			b.ids = append(b.ids, s.ids[len(s.ids)-1])
			b.pos = append(b.pos, int32(len(s.prompt)+len(s.ids)-1))
			b.kvBase = append(b.kvBase, int32(si*capLen))
			addGroup(b, len(b.ids)-1, len(b.ids), s.ad)
			last = append(last, int32(len(b.ids)-1))
		}
		active = next
		if len(active) == 0 {
			break
		}
		b.n = len(active)
		logits = e.inferRows(b, maxRank, last)
	}
	return nil
}

// prefillPlan says how one sequence is prefilled: its first shared prompt
// tokens are copied from sequence donor (-1: none), and it is prefilled in
// wave wave, after its donor's.
type prefillPlan struct {
	donor, shared, wave int
}

// minShared is the shortest shared prefix worth copying.
const minShared = 8

// planPrefill finds, for each sequence in row order, the earlier sequence
// on the same adapter whose prompt shares the longest prefix with its own
// (ties: the earliest wave, then the earliest in row order) and shares at
// most all but its last prompt token, so that every sequence computes its
// own last row. A row's keys, values and logits depend only on the row's
// token, position and the keys and values before it, so a copied prefix
// gives the same bits as a prefilled one and sampling does not change.
func (e *Engine) planPrefill(seqs []genSeq, order []int) []prefillPlan {
	plan := make([]prefillPlan, len(seqs))
	for k, si := range order {
		s := &seqs[si]
		best := prefillPlan{donor: -1}
		if !e.noShare {
			for _, dj := range order[:k] {
				if seqs[dj].ad != s.ad {
					continue
				}
				c := min(commonPrefix(s.prompt, seqs[dj].prompt), len(s.prompt)-1)
				if c > best.shared || (c == best.shared && best.donor >= 0 && plan[dj].wave < plan[best.donor].wave) {
					best = prefillPlan{donor: dj, shared: c}
				}
			}
		}
		if best.shared < minShared {
			best = prefillPlan{donor: -1}
		} else {
			best.wave = plan[best.donor].wave + 1
		}
		plan[si] = best
	}
	return plan
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// prefill runs the prompts of seqs wave by wave (see planPrefill), copying
// shared prefixes in the KV cache from their donors, and returns the
// logits [nActive, V] of the sequences' last prompt rows, sequence si at
// row slot[si] (unfinished sequences only).
func (e *Engine) prefill(seqs []genSeq, order []int, plan []prefillPlan, capLen, maxRank int, slot []int, nActive int) []float32 {
	d, ws := e.d, &e.ws
	b := &ws.b
	waves := 0
	for _, p := range plan {
		waves = max(waves, p.wave+1)
	}
	var first []float32
	if waves > 1 {
		first = make([]float32, nActive*d.V)
	}
	var last []int32
	var lastSeq []int
	for w := 0; w < waves; w++ {
		b.ids, b.pos, b.kvBase = b.ids[:0], b.pos[:0], b.kvBase[:0]
		b.groups, b.seqs = b.groups[:0], nil
		last, lastSeq = last[:0], lastSeq[:0]
		for _, si := range order {
			s, p := &seqs[si], plan[si]
			if p.wave != w {
				continue
			}
			if p.donor >= 0 {
				src, dst := plan[si].donor*capLen*d.KVD, si*capLen*d.KVD
				for l := 0; l < d.L; l++ {
					copy(ws.kc[l][dst:dst+p.shared*d.KVD], ws.kc[l][src:src+p.shared*d.KVD])
					copy(ws.vc[l][dst:dst+p.shared*d.KVD], ws.vc[l][src:src+p.shared*d.KVD])
				}
			}
			lo := len(b.ids)
			for pos := p.shared; pos < len(s.prompt); pos++ {
				b.ids = append(b.ids, s.prompt[pos])
				b.pos = append(b.pos, int32(pos))
				b.kvBase = append(b.kvBase, int32(si*capLen))
			}
			addGroup(b, lo, len(b.ids), s.ad)
			if !s.done {
				last = append(last, int32(len(b.ids)-1))
				lastSeq = append(lastSeq, si)
			}
		}
		b.n, b.pmax = len(b.ids), capLen
		if b.n == 0 {
			continue
		}
		lg := e.inferRows(b, maxRank, last)
		if waves == 1 {
			return lg
		}
		for r, si := range lastSeq {
			copy(first[slot[si]*d.V:(slot[si]+1)*d.V], lg[r*d.V:(r+1)*d.V])
		}
	}
	return first
}

// addGroup extends the last adapter group when it has the same adapter.
func addGroup(b *rowBatch, lo, hi int, ad *Adapter) {
	if k := len(b.groups); k > 0 && b.groups[k-1].ad == ad && b.groups[k-1].hi == lo {
		b.groups[k-1].hi = hi
		return
	}
	b.groups = append(b.groups, adGroup{lo: lo, hi: hi, ad: ad})
}

// inferRows runs all layers on the rows of b with the KV cache and returns
// the logits [len(sel), V] of rows sel.
func (e *Engine) inferRows(b *rowBatch, rank int, sel []int32) []float32 {
	d, ws := e.d, &e.ws
	ws.inf.size(d, b.n, 0, rank, false)
	ws.fs.size(d, b.n)
	ws.x = grow(ws.x, b.n*d.D)
	e.embed(ws.x, b.ids)
	for l := 0; l < d.L; l++ {
		e.layerForward(l, b, &ws.inf, ws.x, ws.x, ws.kc[l], ws.vc[l], false)
	}
	m := len(sel)
	ws.xg = grow(ws.xg, m*d.D)
	ws.xf = grow(ws.xf, m*d.D)
	ws.rs = grow(ws.rs, m)
	ws.lg = grow(ws.lg, m*d.V)
	e.headForward(ws.x, sel, ws.xg, ws.xf, ws.rs, ws.lg)
	return ws.lg
}

// sampleRow draws a token from softmax(logits / temp) by inverting the CDF
// at the uniform u in [0, 1) (keyed.SampleUniform of the request's seed and
// the token's position), summing in float64 in id order, and returns it
// with its log-probability.
func sampleRow(logits []float32, temp float64, u float64) (int32, float32) {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v)/temp)
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v)/temp - mx)
	}
	u *= sum
	tok := len(logits) - 1
	var c float64
	for j, v := range logits {
		c += math.Exp(float64(v)/temp - mx)
		if u < c {
			tok = j
			break
		}
	}
	lp, _ := logSoftmaxRow(logits, temp, int32(tok), nil)
	return int32(tok), float32(lp)
}
