package grpo

import (
	"math"
	"sort"

	"github.com/marlowlab/marlow/harness/workflow"
)

// GroupKey keys a GRPO group: the turns of one agent on one problem across
// the rollouts of a step. Voting's generator0, generator1 and generator2
// are separate groups; so are eval-opt's rounds (generator0, generator1).
type GroupKey struct {
	Problem int64 // train-stream cursor
	Agent   string
}

// GroupStats counts a role's groups and those whose rewards had zero
// variance (including groups of one turn), which give no learning signal.
type GroupStats struct {
	Role    string
	Groups  int
	ZeroVar int
}

// ZeroVarFrac is ZeroVar / Groups (NaN without groups).
func (g GroupStats) ZeroVarFrac() float64 {
	if g.Groups == 0 {
		return math.NaN()
	}
	return float64(g.ZeroVar) / float64(g.Groups)
}

// Advantages gives every turn of every episode the GRPO advantage of its
// rollout's outcome reward: within each group (problem, agent name),
// (r - mean) / (std + eps), where std is the sample standard deviation
// (n - 1 in the denominator, as torch.std in the reference recipe). A group
// of one turn, or one whose rewards are all equal, has zero variance and
// advantage 0 for all its turns. adv[i][k] belongs to eps[i].Turns[k]; the
// statistics are per role, sorted by role.
func Advantages(episodes []*workflow.Episode, eps float64) (adv [][]float64, stats []GroupStats) {
	type member struct{ ep, turn int }
	groups := map[GroupKey][]member{}
	var keys []GroupKey
	roleOf := map[GroupKey]string{}
	adv = make([][]float64, len(episodes))
	for i, ep := range episodes {
		adv[i] = make([]float64, len(ep.Turns))
		for k, t := range ep.Turns {
			key := GroupKey{Problem: ep.ProblemIndex, Agent: t.Agent}
			if _, ok := groups[key]; !ok {
				keys = append(keys, key)
				roleOf[key] = t.Role
			}
			groups[key] = append(groups[key], member{i, k})
		}
	}
	byRole := map[string]*GroupStats{}
	for _, key := range keys {
		ms := groups[key]
		role := roleOf[key]
		gs := byRole[role]
		if gs == nil {
			gs = &GroupStats{Role: role}
			byRole[role] = gs
		}
		gs.Groups++
		n := float64(len(ms))
		var sum float64
		for _, m := range ms {
			sum += episodes[m.ep].Reward()
		}
		mean := sum / n
		var ss float64
		for _, m := range ms {
			d := episodes[m.ep].Reward() - mean
			ss += d * d
		}
		if len(ms) < 2 || ss == 0 {
			gs.ZeroVar++
			continue
		}
		std := math.Sqrt(ss / (n - 1))
		for _, m := range ms {
			adv[m.ep][m.turn] = (episodes[m.ep].Reward() - mean) / (std + eps)
		}
	}
	for _, gs := range byRole {
		stats = append(stats, *gs)
	}
	sort.Slice(stats, func(i, j int) bool { return stats[i].Role < stats[j].Role })
	return adv, stats
}
