package native

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/marlowlab/marlow/harness/engine"
)

// tokenStat is what the forward passes give for one completion token.
type tokenStat struct {
	lp, lpBase, ent float64
}

// grpoTurn is one trained turn with its place in the packed batch.
type grpoTurn struct {
	t     *engine.Turn
	agent int // index into the agent list
	role  int // index into the role list
	first int // index of its first token in the token arrays
	n     int // completion tokens
}

// TrainStep takes one GRPO step on adapter name. Turns with advantage
// exactly 0 are skipped (counted in SkippedTurns) and do not count in the
// loss normalisers; when every turn is skipped no optimizer step is taken.
// Log-probs are recomputed under the current adapter at opt.Temperature;
// the per-token loss is -min(r A, clip(r, 1-ClipLow, 1+ClipHigh) A) plus
// KLCoef[role] times the k3 estimate of KL to the base, aggregated by
// opt.LossAgg with normalisers over all trained turns of the call. Each
// agent's gradient is computed into its own buffer; a role's gradient is the
// sum of its agents' (in agent-name order) and the total the sum of the
// roles' (in role order). With opt.Coherence each role's gradient is
// compared with the EMA of its past gradients and, when Lambda > 0, first
// scaled against it (coherenceScales) or, in the engine.CoherenceStep form,
// left as it is while the optimizer's step is multiplied by
// engine.CoherenceStepFactor (the learning rate of this step, weight decay
// included, times the factor; AdamW's moments see the unscaled gradient).
// The total is clipped to GradClip and applied with AdamW.
func (e *Engine) TrainStep(ctx context.Context, name string, turns []engine.Turn, opt engine.TrainOptions) (engine.StepStats, error) {
	st, _, err := e.grpoStep(ctx, name, turns, opt, true)
	return st, err
}

// grpoGrads are the gradient buffers of one step, for tests and tools.
type grpoGrads struct {
	roles    []string
	roleGrad [][]float32
	agents   []string
	agent    [][]float32
	total    []float32 // before clipping
}

// grpoBatch is the packed batch of one step: the trained turns ordered by
// (role, agent, index), so that every agent's rows are contiguous.
type grpoBatch struct {
	turns     []grpoTurn
	seqs      []seqInput
	roles     []string // sorted
	agents    []string // grouped by role, then sorted
	agentRole []int    // agents[a] belongs to roles[agentRole[a]]
	ntok      int      // completion tokens in all
	// groups lays the turns out in the forward and backward passes: the
	// turns of one agent with the same prompt share one copy of it. Groups
	// follow the order of their first turns, so each agent's rows stay
	// contiguous.
	groups []seqGroup
}

// grpoStep computes the step's statistics and gradients and, when apply,
// clips and applies them.
func (e *Engine) grpoStep(ctx context.Context, name string, turns []engine.Turn, opt engine.TrainOptions, apply bool) (engine.StepStats, *grpoGrads, error) {
	st := engine.StepStats{Adapter: name}
	ad, kept, err := e.trainedAdapter(name, turns, opt)
	if err != nil {
		return st, nil, err
	}
	st.SkippedTurns = len(turns) - len(kept)
	if len(kept) == 0 {
		st.Total = engine.UndefinedStats("*")
		st.Total.GradNorm, st.GradNormPre = 0, 0
		return st, nil, nil
	}
	b := packGRPO(turns, kept, !e.noShare)
	if err := ctx.Err(); err != nil {
		return st, nil, fmt.Errorf("native: train step: %w", err)
	}
	toks, sel, dlogits := e.grpoForward(ad, b, opt)
	gg := e.grpoBackward(ad, b, sel, dlogits)
	var cos, scale []float64
	onStep := opt.Coherence != nil && opt.Coherence.Form == engine.CoherenceStep
	if opt.Coherence != nil {
		lambda := opt.Coherence.Lambda
		if onStep {
			// The role gradients are summed unscaled: the factors act on
			// the step (below).
			cos, scale = coherenceScales(ad.ema, gg, 0)
			for r := range scale {
				scale[r] = engine.CoherenceScale(lambda, cos[r])
			}
		} else {
			cos, scale = coherenceScales(ad.ema, gg, lambda)
		}
	}
	st.Total, st.Roles = grpoStats(b, toks, opt, gg)
	for r := range cos {
		st.Roles[r].CoherenceCos, st.Roles[r].CoherenceScale = cos[r], scale[r]
	}
	lr := opt.LR
	if onStep {
		st.Total.CoherenceScale = engine.CoherenceStepFactor(st.Roles)
		lr *= st.Total.CoherenceScale
	}
	st.GradNormPre = st.Total.GradNorm
	total := gg.total
	gg.total = append([]float32(nil), total...)
	if !apply {
		return st, gg, nil
	}
	if opt.Coherence != nil {
		ad.ema = updateEMA(ad.ema, gg, opt.Coherence.EMADecay)
	}
	if opt.GradClip > 0 && st.GradNormPre > opt.GradClip {
		s := float32(opt.GradClip / st.GradNormPre)
		for i := range total {
			total[i] *= s
		}
	}
	ad.opt.update(ad.Data, total, lr, opt.Beta1, opt.Beta2, opt.Eps, opt.WeightDecay)
	return st, gg, nil
}

// trainedAdapter checks the engine and the arguments of a train step on
// adapter name (engine.ValidateTrainStep) and returns the adapter it
// updates and the indices of the turns with a non-zero advantage.
func (e *Engine) trainedAdapter(name string, turns []engine.Turn, opt engine.TrainOptions) (*Adapter, []int, error) {
	if err := e.check(); err != nil {
		return nil, nil, err
	}
	if err := engine.ValidateTrainStep(name, turns, opt, e.limits()); err != nil {
		return nil, nil, fmt.Errorf("native: %w", err)
	}
	var kept []int
	for i := range turns {
		if turns[i].Advantage != 0 {
			kept = append(kept, i)
		}
	}
	return e.adapters[name], kept, nil
}

// turnInput is the training input of a turn: the prompt and the completion
// but its last token, scored at the completion's positions.
func turnInput(t *engine.Turn) seqInput {
	ids := make([]int32, 0, len(t.PromptIDs)+len(t.CompletionIDs)-1)
	ids = append(ids, t.PromptIDs...)
	ids = append(ids, t.CompletionIDs[:len(t.CompletionIDs)-1]...)
	rows := make([]int32, len(t.CompletionIDs))
	for j := range rows {
		rows[j] = int32(len(t.PromptIDs) - 1 + j)
	}
	return seqInput{ids: ids, rows: rows, targets: t.CompletionIDs}
}

// packGRPO orders the kept turns by (role, agent, index) and lays out their
// tokens; with share, the turns of an agent with identical prompts form one
// group that forwards (and backpropagates) the prompt once.
func packGRPO(turns []engine.Turn, kept []int, share bool) *grpoBatch {
	slices.SortStableFunc(kept, func(a, b int) int {
		if c := cmpStr(turns[a].Role, turns[b].Role); c != 0 {
			return c
		}
		return cmpStr(turns[a].Agent, turns[b].Agent)
	})
	b := &grpoBatch{turns: make([]grpoTurn, len(kept)), seqs: make([]seqInput, len(kept))}
	for k, i := range kept {
		t := &turns[i]
		if len(b.roles) == 0 || b.roles[len(b.roles)-1] != t.Role {
			b.roles = append(b.roles, t.Role)
		}
		if len(b.agents) == 0 || b.agents[len(b.agents)-1] != t.Agent || b.agentRole[len(b.agentRole)-1] != len(b.roles)-1 {
			b.agents = append(b.agents, t.Agent)
			b.agentRole = append(b.agentRole, len(b.roles)-1)
		}
		b.turns[k] = grpoTurn{t: t, agent: len(b.agents) - 1, role: len(b.roles) - 1, first: b.ntok, n: len(t.CompletionIDs)}
		b.ntok += len(t.CompletionIDs)
		b.seqs[k] = turnInput(t)
	}
	b.groups = groupTurns(b, share)
	return b
}

// groupTurns groups the turns of b that share a prefix of their inputs
// (prompt, then completion), agent by agent; a group of one turn is a plain
// sequence. An agent's turns are sorted by their inputs, so that turns with
// long common prefixes are neighbours, and cut into runs that maximise the
// rows not computed twice, Σ (members-1) · shared prefix (prefixes shorter
// than minShared are not shared): voting's generators thus share each
// problem's prompt, and its aggregator each problem's text before the
// candidates. Groups are ordered by their first turns and list their turns
// in order, so each agent's rows stay contiguous.
func groupTurns(b *grpoBatch, share bool) []seqGroup {
	var groups []seqGroup
	for a0 := 0; a0 < len(b.turns); {
		a1 := a0 + 1
		for a1 < len(b.turns) && b.turns[a1].agent == b.turns[a0].agent {
			a1++
		}
		if !share {
			for k := a0; k < a1; k++ {
				groups = append(groups, seqGroup{members: []int{k}})
			}
			a0 = a1
			continue
		}
		groups = append(groups, groupRun(b.seqs, a0, a1)...)
		a0 = a1
	}
	return groups
}

// groupRun groups the sequences a0..a1-1 of one agent (see groupTurns).
func groupRun(seqs []seqInput, a0, a1 int) []seqGroup {
	n := a1 - a0
	idx := make([]int, n)
	for i := range idx {
		idx[i] = a0 + i
	}
	slices.SortStableFunc(idx, func(x, y int) int { return slices.Compare(seqs[x].ids, seqs[y].ids) })
	// lcp[i]: common prefix of sorted neighbours i and i+1.
	lcp := make([]int, max(n-1, 0))
	for i := range lcp {
		lcp[i] = commonPrefix(seqs[idx[i]].ids, seqs[idx[i+1]].ids)
	}
	// best[i]: most rows saved by the first i sorted sequences; from[i]:
	// where the last run of that optimum starts, pre[i] its prefix.
	best, from, pre := make([]int, n+1), make([]int, n+1), make([]int, n+1)
	for i := 1; i <= n; i++ {
		best[i], from[i] = best[i-1], i-1
		mn := math.MaxInt
		for j := i - 2; j >= 0; j-- {
			mn = min(mn, lcp[j])
			if mn < minShared {
				break
			}
			if v := best[j] + (i-j-1)*mn; v > best[i] {
				best[i], from[i], pre[i] = v, j, mn
			}
		}
	}
	var groups []seqGroup
	for i := n; i > 0; i = from[i] {
		g := seqGroup{members: slices.Clone(idx[from[i]:i])}
		if len(g.members) > 1 {
			g.pre = pre[i]
		}
		slices.Sort(g.members)
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(x, y seqGroup) int { return x.members[0] - y.members[0] })
	return groups
}

// aggWeight is the weight w of each token of a turn of n completion tokens
// in the aggregated loss Σ_tokens w ℓ_t of a step over turns turns holding
// ntok tokens.
func aggWeight(mode string, turns, ntok, n int) float64 {
	switch mode {
	case engine.TokenMean:
		return 1 / float64(ntok)
	case engine.SeqMeanTokenMean:
		return 1 / (float64(turns) * float64(n))
	default: // engine.SeqMeanTokenSum
		return 1 / float64(turns)
	}
}

// tokenLoss is the GRPO loss of one completion token and what the step
// statistics need of it.
type tokenLoss struct {
	loss    float64 // ℓ = -min(r A, clip(r, 1-low, 1+high) A) + coef k3
	dlp     float64 // dℓ/dlp
	ratio   float64 // r = exp(lp - lpOld)
	k3      float64 // exp(x) - x - 1 with x = lpBase - lp, the k3 estimate of KL(current || base)
	clipped bool    // the clipped term is the minimum (its gradient is 0)
}

// surrogate is the per-token loss of a GRPO step, the PPO-style clipped
// ratio times the advantage plus coef times the k3 KL penalty, with its
// derivative in the token's log-prob lp. The gradient and the reported
// loss both come from here, so they cannot disagree.
func surrogate(lp, lpOld, lpBase, adv, coef, clipLow, clipHigh float64) tokenLoss {
	r := math.Exp(lp - lpOld)
	cr := math.Min(math.Max(r, 1-clipLow), 1+clipHigh)
	x := lpBase - lp
	k3 := math.Exp(x) - x - 1
	tl := tokenLoss{loss: -math.Min(r*adv, cr*adv) + coef*k3, ratio: r, k3: k3, clipped: -cr*adv > -r*adv}
	if r*adv <= cr*adv {
		tl.dlp = -adv * r
	}
	if coef != 0 {
		tl.dlp += coef * (1 - math.Exp(x))
	}
	return tl
}

// grpoForward runs the base policy (adapter off, for the KL estimate) and
// the current policy (activations kept) over the batch, and returns each
// completion token's log-probs and entropy, the scored rows, and the
// gradient of the aggregated loss in the logits.
//
//	logits [rows, V] → lp, ent per token (softmax at opt.Temperature)
//	dlogits[rows, V] = w dℓ/dlp · (onehot(target) - p) / T
func (e *Engine) grpoForward(ad *Adapter, b *grpoBatch, opt engine.TrainOptions) ([]tokenStat, []int32, []float32) {
	d := e.d
	toks := make([]tokenStat, b.ntok)
	sel, tgt := e.buildTrainBatch(b.seqs, b.groups, nil)
	logits := e.trainForward(nil, sel, false)
	for j := range sel {
		toks[j].lpBase, _ = logSoftmaxRow(logits[j*d.V:(j+1)*d.V], opt.Temperature, tgt[j], nil)
	}
	e.ws.b.groups[0].ad = ad
	logits = e.trainForward(ad, sel, true)
	dlogits := make([]float32, len(sel)*d.V)
	probs := make([]float32, d.V)
	for _, g := range b.turns {
		t := g.t
		w := aggWeight(opt.LossAgg, len(b.turns), b.ntok, g.n)
		coef := opt.KLCoef[t.Role]
		for j := 0; j < g.n; j++ {
			k := g.first + j
			lp, ent := logSoftmaxRow(logits[k*d.V:(k+1)*d.V], opt.Temperature, tgt[k], probs)
			toks[k].lp, toks[k].ent = lp, ent
			tl := surrogate(lp, float64(t.OldLogProbs[j]), toks[k].lpBase, t.Advantage, coef, opt.ClipLow, opt.ClipHigh)
			// lp = z_y - lse(z), z = logits / T.
			gscale := float32(w * tl.dlp / opt.Temperature)
			drow := dlogits[k*d.V : (k+1)*d.V]
			for v := range drow {
				drow[v] = -gscale * probs[v]
			}
			drow[tgt[k]] += gscale
		}
	}
	return toks, sel, dlogits
}

// grpoBackward backpropagates dlogits into one adapter-gradient buffer per
// agent, then sums agents into their roles (in agent order) and roles into
// the total (in role order).
//
//	agent[a] [P], roleGrad[r] = Σ_{a in r} agent[a], total = Σ_r roleGrad[r]
func (e *Engine) grpoBackward(ad *Adapter, b *grpoBatch, sel []int32, dlogits []float32) *grpoGrads {
	gs := &gradSink{}
	agentGrad := make([][]float32, len(b.agents))
	for a := range agentGrad {
		agentGrad[a] = make([]float32, len(ad.Data))
	}
	tb := &e.ws.b
	for k, grp := range b.groups {
		g := b.turns[grp.members[0]]
		lo, hi := tb.seqs[k], tb.seqs[k+1]
		if n := len(gs.ranges); n > 0 && gs.ranges[n-1].hi == lo && &gs.adGrads[n-1][0] == &agentGrad[g.agent][0] {
			gs.ranges[n-1].hi = hi
			continue
		}
		gs.ranges = append(gs.ranges, adGroup{lo: lo, hi: hi})
		gs.adGrads = append(gs.adGrads, agentGrad[g.agent])
	}
	e.trainBackward(ad, sel, dlogits, gs)
	roleGrad := make([][]float32, len(b.roles))
	for r := range roleGrad {
		roleGrad[r] = make([]float32, len(ad.Data))
	}
	for a, g := range agentGrad {
		axpy(1, g, roleGrad[b.agentRole[a]])
	}
	total := make([]float32, len(ad.Data))
	for _, g := range roleGrad {
		axpy(1, g, total)
	}
	return &grpoGrads{roles: b.roles, roleGrad: roleGrad, agents: b.agents, agent: agentGrad, total: total}
}

// coherenceScales computes each role's cosine to its gradient EMA in ema
// and the factor engine.CoherenceScale gives it and, when lambda > 0,
// replaces gg.total by the sum of the scaled role gradients (in role
// order); with lambda 0 (the measuring-only EMA) every scale is 1 and
// gg.total is left as it is. A role without an EMA yet has cosine NaN and
// scale 1. The role gradients themselves (and so the per-role statistics)
// stay unscaled.
//
//	c_r = cos(g_r, m_r), s_r = 1 - λ max(0, c_r), total = Σ_r s_r g_r
func coherenceScales(ema map[string][]float32, gg *grpoGrads, lambda float64) (cos, scale []float64) {
	cos = make([]float64, len(gg.roles))
	scale = make([]float64, len(gg.roles))
	for r, role := range gg.roles {
		cos[r] = math.NaN()
		if m, ok := ema[role]; ok {
			cos[r] = cosine(gg.roleGrad[r], m)
		}
		scale[r] = engine.CoherenceScale(lambda, cos[r])
	}
	if lambda == 0 {
		return cos, scale
	}
	total := make([]float32, len(gg.total))
	for r := range gg.roles {
		axpy(float32(scale[r]), gg.roleGrad[r], total)
	}
	gg.total = total
	return cos, scale
}

// updateEMA folds each trained role's unscaled gradient into its EMA,
// m <- decay m + (1 - decay) g, starting from the first gradient; roles not
// trained this step keep theirs. It returns the (possibly new) map.
func updateEMA(ema map[string][]float32, gg *grpoGrads, decay float64) map[string][]float32 {
	if ema == nil {
		ema = map[string][]float32{}
	}
	d, w := float32(decay), float32(1-decay)
	for r, role := range gg.roles {
		g := gg.roleGrad[r]
		m, ok := ema[role]
		if !ok {
			ema[role] = append([]float32(nil), g...)
			continue
		}
		for i := range m {
			m[i] = d*m[i] + w*g[i]
		}
	}
	return ema
}

func checkTrainOptions(opt engine.TrainOptions) error {
	if err := opt.Validate(); err != nil {
		return fmt.Errorf("native: %w", err)
	}
	return nil
}

// LogProbs implements engine.Engine: it scores each turn's completion
// under adapter (or the base when adapter is "") at temperature, in one
// batch.
func (e *Engine) LogProbs(ctx context.Context, adapter string, turns []engine.Turn, temperature float64) ([][]float32, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if err := engine.ValidateLogProbs(adapter, turns, temperature, e.limits()); err != nil {
		return nil, fmt.Errorf("native: logprobs: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("native: logprobs: %w", err)
	}
	ad := e.adapters[adapter]
	seqs := make([]seqInput, len(turns))
	for i := range turns {
		seqs[i] = turnInput(&turns[i])
	}
	sel, tgt := e.buildTrainBatch(seqs, nil, ad)
	logits := e.trainForward(ad, sel, false)
	out := make([][]float32, len(turns))
	k := 0
	for i, t := range turns {
		out[i] = make([]float32, len(t.CompletionIDs))
		for j := range out[i] {
			lp, _ := logSoftmaxRow(logits[k*e.d.V:(k+1)*e.d.V], temperature, tgt[k], nil)
			out[i][j] = float32(lp)
			k++
		}
	}
	return out, nil
}
