package native

import (
	"math"

	"github.com/marlowlab/marlow/harness/engine"
)

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

// tokenAcc accumulates the token statistics of one role (or the total).
type tokenAcc struct {
	loss, nll, ent, ratio, rmax, kl float64
	clipped, toks, seqs             int
}

func (a tokenAcc) stats(name string) engine.RoleStats {
	n := float64(a.toks)
	return engine.RoleStats{Role: name, Loss: a.loss, Tokens: a.toks, Seqs: a.seqs,
		MeanLen: n / float64(a.seqs), Entropy: a.ent / n, Perplexity: math.Exp(a.nll / n),
		RatioMean: a.ratio / n, RatioMax: a.rmax, ClipFrac: float64(a.clipped) / n, KL: a.kl / n,
		CoherenceCos: math.NaN(), CoherenceScale: math.NaN()}
}

// accumulateTokens sums each role's (and, last, the total's) share of the
// loss and token statistics, with the same surrogate as the gradient.
func accumulateTokens(b *grpoBatch, toks []tokenStat, opt engine.TrainOptions) []tokenAcc {
	accs := make([]tokenAcc, len(b.roles)+1) // last is the total
	for i := range accs {
		accs[i].rmax = math.Inf(-1)
	}
	for _, g := range b.turns {
		t := g.t
		w := aggWeight(opt.LossAgg, len(b.turns), b.ntok, g.n)
		coef := opt.KLCoef[t.Role]
		for _, ai := range []int{g.role, len(b.roles)} {
			a := &accs[ai]
			a.seqs++
			for j := 0; j < g.n; j++ {
				ts := toks[g.first+j]
				tl := surrogate(ts.lp, float64(t.OldLogProbs[j]), ts.lpBase, t.Advantage, coef, opt.ClipLow, opt.ClipHigh)
				a.loss += w * tl.loss
				a.nll -= ts.lp
				a.ent += ts.ent
				a.ratio += tl.ratio
				a.rmax = math.Max(a.rmax, tl.ratio)
				a.kl += tl.k3
				if tl.clipped {
					a.clipped++
				}
				a.toks++
			}
		}
	}
	return accs
}

// pairCosines are the cosines between the gradients of every pair of the
// members (agent indices), in order.
func pairCosines(agentGrad [][]float32, members []int) []float64 {
	var cs []float64
	for i := 0; i < len(members); i++ {
		for j := i + 1; j < len(members); j++ {
			cs = append(cs, cosine(agentGrad[members[i]], agentGrad[members[j]]))
		}
	}
	return cs
}

// agentCos is, for each member (an agent index) of a role with two or
// more agents, the mean of its gradient's cosines with each other member's,
// summed in member order, keyed by agent name; nil with fewer than two.
func agentCos(agentGrad [][]float32, members []int, names []string) map[string]float64 {
	if len(members) < 2 {
		return nil
	}
	out := make(map[string]float64, len(members))
	for i, a := range members {
		var s float64
		for j, b := range members {
			if j != i {
				s += cosine(agentGrad[a], agentGrad[b])
			}
		}
		out[names[a]] = s / float64(len(members)-1)
	}
	return out
}

// meanMin is the mean and minimum of cs (NaN, NaN when empty).
func meanMin(cs []float64) (mean, mn float64) {
	if len(cs) == 0 {
		return math.NaN(), math.NaN()
	}
	var s float64
	mn = math.Inf(1)
	for _, c := range cs {
		s += c
		mn = math.Min(mn, c)
	}
	return s / float64(len(cs)), mn
}

// grpoStats fills the per-role and total statistics of a step.
func grpoStats(b *grpoBatch, toks []tokenStat, opt engine.TrainOptions, gg *grpoGrads) (engine.RoleStats, []engine.RoleStats) {
	accs := accumulateTokens(b, toks, opt)
	sumSq := 0.0
	norms := make([]float64, len(b.roles))
	for r, g := range gg.roleGrad {
		norms[r] = dot64(g, g)
		sumSq += norms[r]
	}
	var out []engine.RoleStats
	var allPairs []float64
	for r, name := range b.roles {
		rs := accs[r].stats(name)
		rs.GradNorm = math.Sqrt(norms[r])
		rs.GradShare = math.NaN()
		if sumSq > 0 {
			rs.GradShare = norms[r] / sumSq
		}
		var members []int
		for a := range b.agents {
			if b.agentRole[a] == r {
				members = append(members, a)
			}
		}
		pairs := pairCosines(gg.agent, members)
		rs.AgentCosMean, rs.AgentCosMin = meanMin(pairs)
		rs.AgentCos = agentCos(gg.agent, members, b.agents)
		allPairs = append(allPairs, pairs...)
		rs.RoleCos = map[string]float64{}
		for o, other := range b.roles {
			if o != r {
				rs.RoleCos[other] = cosine(gg.roleGrad[r], gg.roleGrad[o])
			}
		}
		out = append(out, rs)
	}
	tot := accs[len(b.roles)].stats("*")
	tot.GradNorm = math.Sqrt(dot64(gg.total, gg.total))
	tot.GradShare = 1
	tot.AgentCosMean, tot.AgentCosMin = meanMin(allPairs)
	return tot, out
}
