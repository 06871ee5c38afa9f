package analysis

import (
	"maps"
	"slices"

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
