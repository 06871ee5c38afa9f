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
// roles' (in role order). The total is clipped to GradClip and applied with
// AdamW.
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

// grpoStep computes the step's statistics and gradients and, when apply,
// clips and applies them.
func (e *Engine) grpoStep(ctx context.Context, name string, turns []engine.Turn, opt engine.TrainOptions, apply bool) (engine.StepStats, *grpoGrads, error) {
	st := engine.StepStats{Adapter: name}
	if err := e.check(); err != nil {
		return st, nil, err
	}
	ad, err := e.adapter(name)
	if err != nil {
		return st, nil, err
	}
	if ad == nil {
		return st, nil, fmt.Errorf("native: train step needs an adapter (the base policy is frozen)")
	}
	if err := checkTrainOptions(opt); err != nil {
		return st, nil, err
	}
	var kept []int
	for i := range turns {
		t := &turns[i]
		if t.Adapter != name {
			return st, nil, fmt.Errorf("native: turn %d names adapter %q, not %q", i, t.Adapter, name)
		}
		if len(t.CompletionIDs) == 0 {
			return st, nil, fmt.Errorf("native: turn %d (agent %q) has an empty completion", i, t.Agent)
		}
		if len(t.PromptIDs) == 0 {
			return st, nil, fmt.Errorf("native: turn %d (agent %q) has an empty prompt", i, t.Agent)
		}
		if len(t.OldLogProbs) != len(t.CompletionIDs) {
			return st, nil, fmt.Errorf("native: turn %d (agent %q) has %d old log-probs for %d completion tokens", i, t.Agent, len(t.OldLogProbs), len(t.CompletionIDs))
		}
		if n := len(t.PromptIDs) + len(t.CompletionIDs) - 1; n > e.d.MaxPos {
			return st, nil, fmt.Errorf("native: turn %d (agent %q) has %d input tokens, more than max_position_embeddings %d", i, t.Agent, n, e.d.MaxPos)
		}
		if err := e.checkIDs(fmt.Sprintf("native: turn %d prompt", i), t.PromptIDs); err != nil {
			return st, nil, err
		}
		if err := e.checkIDs(fmt.Sprintf("native: turn %d completion", i), t.CompletionIDs); err != nil {
			return st, nil, err
		}
		for j, lp := range t.OldLogProbs {
			if math.IsNaN(float64(lp)) || math.IsInf(float64(lp), 0) {
				return st, nil, fmt.Errorf("native: turn %d (agent %q) has old log-prob %v at token %d", i, t.Agent, lp, j)
			}
		}
		if math.IsNaN(t.Advantage) || math.IsInf(t.Advantage, 0) {
			return st, nil, fmt.Errorf("native: turn %d (agent %q) has advantage %v", i, t.Agent, t.Advantage)
		}
		if t.Advantage == 0 {
			st.SkippedTurns++
			continue
		}
		kept = append(kept, i)
	}
	if len(kept) == 0 {
		st.Total = nanStats("*")
		st.Total.GradNorm, st.GradNormPre = 0, 0
		return st, nil, nil
	}
	// Order turns by (role, agent, index) so every agent's rows are contiguous.
	slices.SortStableFunc(kept, func(a, b int) int {
		if c := cmpStr(turns[a].Role, turns[b].Role); c != 0 {
			return c
		}
		return cmpStr(turns[a].Agent, turns[b].Agent)
	})
	var roles, agents []string
	var agentRole []int
	gt := make([]grpoTurn, len(kept))
	seqs := make([]seqInput, len(kept))
	ntok := 0
	for k, i := range kept {
		t := &turns[i]
		if len(roles) == 0 || roles[len(roles)-1] != t.Role {
			roles = append(roles, t.Role)
		}
		if len(agents) == 0 || agents[len(agents)-1] != t.Agent || agentRole[len(agentRole)-1] != len(roles)-1 {
			agents = append(agents, t.Agent)
			agentRole = append(agentRole, len(roles)-1)
		}
		gt[k] = grpoTurn{t: t, agent: len(agents) - 1, role: len(roles) - 1, first: ntok, n: len(t.CompletionIDs)}
		ntok += len(t.CompletionIDs)
		ids := make([]int32, 0, len(t.PromptIDs)+len(t.CompletionIDs)-1)
		ids = append(ids, t.PromptIDs...)
		ids = append(ids, t.CompletionIDs[:len(t.CompletionIDs)-1]...)
		rows := make([]int32, len(t.CompletionIDs))
		for j := range rows {
			rows[j] = int32(len(t.PromptIDs) - 1 + j)
		}
		seqs[k] = seqInput{ids: ids, rows: rows, targets: t.CompletionIDs}
	}
	if err := ctx.Err(); err != nil {
		return st, nil, fmt.Errorf("native: train step: %w", err)
	}
	d := e.d
	toks := make([]tokenStat, ntok)
	sel, tgt := e.buildTrainBatch(seqs, nil)
	// Base policy (adapter off) for the KL estimate.
	logits := e.trainForward(nil, sel, false)
	for j := range sel {
		toks[j].lpBase, _ = logSoftmaxRow(logits[j*d.V:(j+1)*d.V], opt.Temperature, tgt[j], nil)
	}
	// Current policy, activations kept.
	e.ws.b.groups[0].ad = ad
	logits = e.trainForward(ad, sel, true)
	dlogits := make([]float32, len(sel)*d.V)
	probs := make([]float32, d.V)
	// Aggregation weights: the loss is Σ_tokens w_t ℓ_t.
	nt := float64(len(gt))
	for _, g := range gt {
		t := g.t
		coef := opt.KLCoef[t.Role]
		var w float64
		switch opt.LossAgg {
		case engine.TokenMean:
			w = 1 / float64(ntok)
		case engine.SeqMeanTokenMean:
			w = 1 / (nt * float64(g.n))
		default:
			w = 1 / nt
		}
		for j := 0; j < g.n; j++ {
			k := g.first + j
			row := logits[k*d.V : (k+1)*d.V]
			lp, ent := logSoftmaxRow(row, opt.Temperature, tgt[k], probs)
			toks[k].lp, toks[k].ent = lp, ent
			// dℓ/dlp of the clipped surrogate and the k3 penalty.
			r := math.Exp(lp - float64(t.OldLogProbs[j]))
			a := t.Advantage
			cr := math.Min(math.Max(r, 1-opt.ClipLow), 1+opt.ClipHigh)
			var dlp float64
			if r*a <= cr*a {
				dlp = -a * r
			}
			if coef != 0 {
				dlp += coef * (1 - math.Exp(toks[k].lpBase-lp))
			}
			// lp = z_y - lse(z), z = logits / T.
			gscale := float32(w * dlp / opt.Temperature)
			drow := dlogits[k*d.V : (k+1)*d.V]
			for v := range drow {
				drow[v] = -gscale * probs[v]
			}
			drow[tgt[k]] += gscale
		}
	}
	// Backward with one adapter-gradient buffer per agent.
	gs := &gradSink{}
	agentGrad := make([][]float32, len(agents))
	for a := range agentGrad {
		agentGrad[a] = make([]float32, len(ad.Data))
	}
	b := &e.ws.b
	for k, g := range gt {
		lo, hi := b.seqs[k], b.seqs[k+1]
		if n := len(gs.ranges); n > 0 && gs.ranges[n-1].hi == lo && &gs.adGrads[n-1][0] == &agentGrad[g.agent][0] {
			gs.ranges[n-1].hi = hi
			continue
		}
		gs.ranges = append(gs.ranges, adGroup{lo: lo, hi: hi})
		gs.adGrads = append(gs.adGrads, agentGrad[g.agent])
	}
	e.trainBackward(ad, sel, dlogits, gs)
	roleGrad := make([][]float32, len(roles))
	for r := range roleGrad {
		roleGrad[r] = make([]float32, len(ad.Data))
	}
	for a, g := range agentGrad {
		axpy(1, g, roleGrad[agentRole[a]])
	}
	total := make([]float32, len(ad.Data))
	for _, g := range roleGrad {
		axpy(1, g, total)
	}
	st.Total, st.Roles = e.grpoStats(gt, toks, opt, roles, agents, agentRole, agentGrad, roleGrad, total)
	st.GradNormPre = st.Total.GradNorm
	gg := &grpoGrads{roles: roles, roleGrad: roleGrad, agents: agents, agent: agentGrad, total: append([]float32(nil), total...)}
	if !apply {
		return st, gg, nil
	}
	if opt.GradClip > 0 && st.GradNormPre > opt.GradClip {
		s := float32(opt.GradClip / st.GradNormPre)
		for i := range total {
			total[i] *= s
		}
	}
	ad.opt.update(ad.Data, total, opt.LR, opt.Beta1, opt.Beta2, opt.Eps, opt.WeightDecay)
	return st, gg, nil
}

func checkTrainOptions(opt engine.TrainOptions) error {
	switch opt.LossAgg {
	case engine.TokenMean, engine.SeqMeanTokenMean, engine.SeqMeanTokenSum:
	default:
		return fmt.Errorf("native: unknown loss aggregation %q (want %s, %s or %s)", opt.LossAgg, engine.TokenMean, engine.SeqMeanTokenMean, engine.SeqMeanTokenSum)
	}
	if !(opt.Temperature > 0) || math.IsInf(opt.Temperature, 0) {
		return fmt.Errorf("native: temperature %v must be positive and finite", opt.Temperature)
	}
	if opt.ClipLow < 0 || opt.ClipLow >= 1 || opt.ClipHigh < 0 {
		return fmt.Errorf("native: clip range low %v high %v is invalid (want 0 <= low < 1, high >= 0)", opt.ClipLow, opt.ClipHigh)
	}
	if opt.LR < 0 || opt.Beta1 < 0 || opt.Beta1 >= 1 || opt.Beta2 < 0 || opt.Beta2 >= 1 || opt.Eps <= 0 || opt.WeightDecay < 0 || opt.GradClip < 0 {
		return fmt.Errorf("native: invalid optimizer settings lr %v betas (%v, %v) eps %v weight decay %v grad clip %v", opt.LR, opt.Beta1, opt.Beta2, opt.Eps, opt.WeightDecay, opt.GradClip)
	}
	return nil
}

func nanStats(role string) engine.RoleStats {
	n := math.NaN()
	return engine.RoleStats{Role: role, Loss: n, GradNorm: n, GradShare: n, AgentCosMean: n, AgentCosMin: n,
		MeanLen: n, Entropy: n, Perplexity: n, RatioMean: n, RatioMax: n, ClipFrac: n, KL: n}
}

func dot64(a, b []float32) float64 {
	var s float64
	for i, v := range a {
		s += float64(v) * float64(b[i])
	}
	return s
}

func cosine(a, b []float32) float64 {
	na, nb := dot64(a, a), dot64(b, b)
	if na == 0 || nb == 0 {
		return math.NaN()
	}
	return dot64(a, b) / math.Sqrt(na*nb)
}

// grpoStats fills the per-role and total statistics of a step.
func (e *Engine) grpoStats(gt []grpoTurn, toks []tokenStat, opt engine.TrainOptions, roles, agents []string, agentRole []int,
	agentGrad, roleGrad [][]float32, total []float32) (engine.RoleStats, []engine.RoleStats) {
	type acc struct {
		loss, nll, ent, ratio, rmax, kl float64
		clipped, toks, seqs             int
	}
	accs := make([]acc, len(roles)+1) // last is the total
	for i := range accs {
		accs[i].rmax = math.Inf(-1)
	}
	nt := float64(len(gt))
	ntok := 0
	for _, g := range gt {
		ntok += g.n
	}
	for _, g := range gt {
		t := g.t
		var w float64
		switch opt.LossAgg {
		case engine.TokenMean:
			w = 1 / float64(ntok)
		case engine.SeqMeanTokenMean:
			w = 1 / (nt * float64(g.n))
		default:
			w = 1 / nt
		}
		coef := opt.KLCoef[t.Role]
		for _, ai := range []int{g.role, len(roles)} {
			a := &accs[ai]
			a.seqs++
			for j := 0; j < g.n; j++ {
				ts := toks[g.first+j]
				r := math.Exp(ts.lp - float64(t.OldLogProbs[j]))
				cr := math.Min(math.Max(r, 1-opt.ClipLow), 1+opt.ClipHigh)
				x := ts.lpBase - ts.lp
				k3 := math.Exp(x) - x - 1
				l := -math.Min(r*t.Advantage, cr*t.Advantage) + coef*k3
				a.loss += w * l
				a.nll -= ts.lp
				a.ent += ts.ent
				a.ratio += r
				a.rmax = math.Max(a.rmax, r)
				a.kl += k3
				if -cr*t.Advantage > -r*t.Advantage {
					a.clipped++
				}
				a.toks++
			}
		}
	}
	sumSq := 0.0
	norms := make([]float64, len(roles))
	for r, g := range roleGrad {
		norms[r] = dot64(g, g)
		sumSq += norms[r]
	}
	mk := func(name string, a acc) engine.RoleStats {
		n := float64(a.toks)
		return engine.RoleStats{Role: name, Loss: a.loss, Tokens: a.toks, Seqs: a.seqs,
			MeanLen: n / float64(a.seqs), Entropy: a.ent / n, Perplexity: math.Exp(a.nll / n),
			RatioMean: a.ratio / n, RatioMax: a.rmax, ClipFrac: float64(a.clipped) / n, KL: a.kl / n}
	}
	cosStats := func(members []int) (mean, mn float64) {
		if len(members) < 2 {
			return math.NaN(), math.NaN()
		}
		var s float64
		mn = math.Inf(1)
		cnt := 0
		for i := 0; i < len(members); i++ {
			for j := i + 1; j < len(members); j++ {
				c := cosine(agentGrad[members[i]], agentGrad[members[j]])
				s += c
				mn = math.Min(mn, c)
				cnt++
			}
		}
		return s / float64(cnt), mn
	}
	var out []engine.RoleStats
	var allPairs []float64
	for r, name := range roles {
		rs := mk(name, accs[r])
		rs.GradNorm = math.Sqrt(norms[r])
		rs.GradShare = math.NaN()
		if sumSq > 0 {
			rs.GradShare = norms[r] / sumSq
		}
		var members []int
		for a := range agents {
			if agentRole[a] == r {
				members = append(members, a)
			}
		}
		rs.AgentCosMean, rs.AgentCosMin = cosStats(members)
		for i := 0; i < len(members); i++ {
			for j := i + 1; j < len(members); j++ {
				allPairs = append(allPairs, cosine(agentGrad[members[i]], agentGrad[members[j]]))
			}
		}
		rs.RoleCos = map[string]float64{}
		for o, other := range roles {
			if o != r {
				rs.RoleCos[other] = cosine(roleGrad[r], roleGrad[o])
			}
		}
		out = append(out, rs)
	}
	tot := mk("*", accs[len(roles)])
	tot.GradNorm = math.Sqrt(dot64(total, total))
	tot.GradShare = 1
	tot.AgentCosMean, tot.AgentCosMin = math.NaN(), math.NaN()
	if len(allPairs) > 0 {
		s, mn := 0.0, math.Inf(1)
		for _, c := range allPairs {
			s += c
			mn = math.Min(mn, c)
		}
		tot.AgentCosMean, tot.AgentCosMin = s/float64(len(allPairs)), mn
	}
	return tot, out
}

// LogProbs scores each turn's completion under adapter (or the base when
// adapter is "") at temperature: the log-prob of CompletionIDs[j] under
// softmax(logits / temperature) given the prompt and the completion before
// it. Only PromptIDs and CompletionIDs of the turns are used.
func (e *Engine) LogProbs(adapter string, turns []engine.Turn, temperature float64) ([][]float32, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	ad, err := e.adapter(adapter)
	if err != nil {
		return nil, err
	}
	if !(temperature > 0) || math.IsInf(temperature, 0) {
		return nil, fmt.Errorf("native: temperature %v must be positive and finite", temperature)
	}
	seqs := make([]seqInput, len(turns))
	for i, t := range turns {
		if len(t.PromptIDs) == 0 || len(t.CompletionIDs) == 0 {
			return nil, fmt.Errorf("native: turn %d needs a prompt and a completion", i)
		}
		if n := len(t.PromptIDs) + len(t.CompletionIDs) - 1; n > e.d.MaxPos {
			return nil, fmt.Errorf("native: turn %d has %d input tokens, more than max_position_embeddings %d", i, n, e.d.MaxPos)
		}
		if err := e.checkIDs(fmt.Sprintf("native: turn %d prompt", i), t.PromptIDs); err != nil {
			return nil, err
		}
		if err := e.checkIDs(fmt.Sprintf("native: turn %d completion", i), t.CompletionIDs); err != nil {
			return nil, err
		}
		ids := append(append([]int32(nil), t.PromptIDs...), t.CompletionIDs[:len(t.CompletionIDs)-1]...)
		rows := make([]int32, len(t.CompletionIDs))
		for j := range rows {
			rows[j] = int32(len(t.PromptIDs) - 1 + j)
		}
		seqs[i] = seqInput{ids: ids, rows: rows, targets: t.CompletionIDs}
	}
	sel, tgt := e.buildTrainBatch(seqs, ad)
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
