package analysis

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/marlowlab/marlow/harness/runlog"
)

// Rate rungs: a study may run its main recipe at several learning rates (a
// rate ladder, seeds/ladder.yaml): the main matrix at one rate and arms
// that change grpo.lr alone. Such an arm is a rung when it covers the main
// matrix's whole grid (every workflow, task, scale, condition and seed of
// the main matrix's runs, and nothing else) and each of its runs' stored
// config differs from that of the main matrix's run of the same grid point
// in grpo.lr and the run's own identity (RungIdentityKeys) only. A rung's
// runs are the main recipe at another rate, so the late rules judge them
// with the main matrix's (RunEvents.MainRecipe). An arm that changes
// anything else, or covers part of the grid (the dynamics study's lowlr:
// voting only), is not a rung: pooling it would weigh some of the groups
// the rules compare at another rate than the others.

// RungIdentityKeys are the config keys in which two runs of one recipe
// differ by being two runs: their ID, arm and derived seed.
var RungIdentityKeys = []string{"id", "arm", "seed"}

// RungRule states what a rate rung is; the report reads it from here.
const RungRule = "a rate rung is an arm that changes grpo.lr alone (every other setting of its runs' stored configs equal to those of the main matrix's run of the same workflow, task, scale, condition and seed) over the main matrix's whole grid (the same workflows, tasks, scales, conditions and seeds, no more, no fewer); " +
	"its runs are the main recipe at another rate, so the late rules take them with the main matrix's as the runs of the main recipe, and each group they compare holds the same rates"

// gridPoint is a run view's place in a grid.
type gridPoint struct {
	workflow, task, scale, condition string
	seed                             int
}

func gridPointOf(r *RunResult) gridPoint {
	return gridPoint{r.Cell.Workflow, r.Cell.Task, r.Cell.Scale, r.Condition, r.SeedIndex}
}

// RateRungs returns the arms of the study that are rate rungs (RungRule),
// sorted by name.
func RateRungs(st *Study) []string {
	leavesOf := func(r *RunResult) map[string]string {
		if r.run == nil || r.run.Manifest.Config == nil {
			return nil
		}
		l, err := runlog.ConfigLeaves(r.run.Manifest.Config)
		if err != nil {
			return nil
		}
		for _, k := range RungIdentityKeys {
			delete(l, k)
		}
		return l
	}
	main := map[gridPoint]map[string]string{}
	arms := map[string]map[gridPoint]map[string]string{}
	for _, r := range st.Runs {
		l := leavesOf(r)
		if l == nil {
			continue
		}
		if r.Cell.Arm == "" {
			main[gridPointOf(r)] = l
			continue
		}
		if arms[r.Cell.Arm] == nil {
			arms[r.Cell.Arm] = map[gridPoint]map[string]string{}
		}
		arms[r.Cell.Arm][gridPointOf(r)] = l
	}
	var out []string
	for _, arm := range slices.Sorted(maps.Keys(arms)) {
		if isRung(main, arms[arm]) {
			out = append(out, arm)
		}
	}
	return out
}

// isRung reports whether an arm's runs (by grid point, their config leaves
// without the identity keys) cover exactly the main matrix's grid and
// differ from its runs in grpo.lr alone.
func isRung(main, arm map[gridPoint]map[string]string) bool {
	if len(main) == 0 || len(arm) != len(main) {
		return false
	}
	for pt, la := range arm {
		lm, ok := main[pt]
		if !ok || len(la) != len(lm) || la["grpo.lr"] == lm["grpo.lr"] {
			return false
		}
		for k, v := range la {
			if w, ok := lm[k]; !ok || (v != w && k != "grpo.lr") {
				return false
			}
		}
	}
	return true
}

// RateCliffs are the lasting cliffs of the main recipe's runs without an
// intervention at one learning rate: how many of the runs of each group
// (condition and workflow) fell off a late cliff, and off any cliff (early
// or late). What a rate ladder adds to claim c's where test, which pools
// the rates: whether the cliffs follow the rate, and in which groups.
type RateCliffs struct {
	LR     string     // grpo.lr as stored
	Groups []LateRate // per condition and workflow ("ip voting"), sorted; K: runs with a late cliff
	Any    []LateRate // the same groups; K: runs with a cliff, early or late
	Late   LateRate   // every group together; K: runs with a late cliff
	AnyAll LateRate   // every group together; K: runs with a cliff, early or late
}

// RateTrend is the one-sided test that late cliffs are more common at the
// main recipe's highest rate than at its lowest, every group pooled: Fisher's
// exact test at the study's alpha.
type RateTrend struct {
	Hi, Lo string  // the rates compared, as stored
	P      float64 // one-sided Fisher exact p-value, highest over lowest
	// Detectable is the smallest excess of the highest rate's late-cliff
	// rate over the lowest's the test could detect at these numbers of
	// runs (NaN: none could).
	Detectable float64
}

// RateTrendRule states the rate trend's test; the report reads it from here.
const RateTrendRule = "late cliffs at the main recipe's highest rate against its lowest, every condition and workflow pooled, by a one-sided Fisher exact test (runs without an intervention; a finding beside claim c, whose where test pools the rates)"

// CliffsByRate groups the plain runs of the main recipe (RunEvents.Plain)
// by learning rate, from the lowest: nil when the main recipe has one rate
// (no rate rung). The trend compares the highest rate with the lowest.
func CliffsByRate(g Gate, ci float64) ([]RateCliffs, RateTrend) {
	groupOf := func(e RunEvents) string { return e.Condition + " " + e.Cell.Workflow }
	groups := map[string]map[string]bool{} // rate -> its groups
	for _, e := range g.Runs {
		if e.Plain() && e.Settings.LR != "" {
			if groups[e.Settings.LR] == nil {
				groups[e.Settings.LR] = map[string]bool{}
			}
			groups[e.Settings.LR][groupOf(e)] = true
		}
	}
	trend := RateTrend{P: math.NaN(), Detectable: math.NaN()}
	if len(groups) < 2 {
		return nil, trend
	}
	val := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return math.Inf(1)
		}
		return v
	}
	lrs := slices.SortedFunc(maps.Keys(groups), func(a, b string) int { return cmp.Or(cmp.Compare(val(a), val(b)), cmp.Compare(a, b)) })
	anyCliff := func(e RunEvents) bool { return e.Events.Cliff.Found }
	out := make([]RateCliffs, len(lrs))
	for i, lr := range lrs {
		at := func(e RunEvents) bool { return e.Plain() && e.Settings.LR == lr }
		rc := RateCliffs{LR: lr, Late: rateOf(g, lr, ci, at, lateCliffHit), AnyAll: rateOf(g, lr, ci, at, anyCliff)}
		for _, group := range slices.Sorted(maps.Keys(groups[lr])) {
			in := func(e RunEvents) bool { return at(e) && groupOf(e) == group }
			rc.Groups = append(rc.Groups, rateOf(g, group, ci, in, lateCliffHit))
			rc.Any = append(rc.Any, rateOf(g, group, ci, in, anyCliff))
		}
		out[i] = rc
	}
	lo, hi := out[0].Late, out[len(out)-1].Late
	trend.Lo, trend.Hi = out[0].LR, out[len(out)-1].LR
	trend.P = FisherGreater(hi.K, hi.N, lo.K, lo.N)
	trend.Detectable = FisherDetectable(hi.N, lo.N, 1-ci)
	return out, trend
}
