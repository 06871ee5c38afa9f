package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/study"
)

// mainResults is the summary's opening: the study's measured gains (final
// accuracy minus the first validation's, per trained condition) and its
// strongest exact test among the format-collapse comparisons (IP against
// SP, and each intervention against none); nil without trained runs.
func mainResults(st *analysis.Study, cl *analysis.Claims) []string {
	var out []string
	var gains []string
	for _, cond := range []string{study.SARL, study.SP, study.IP} {
		var s float64
		n := 0
		for _, r := range st.Runs {
			if r.Condition != cond || math.IsNaN(r.Metrics.Final) || math.IsNaN(r.Metrics.Base) {
				continue
			}
			s += r.Metrics.Final - r.Metrics.Base
			n++
		}
		if n > 0 {
			gains = append(gains, fmt.Sprintf("%s %+.3f (%s)", cond, s/float64(n), plural(n, "run view")))
		}
	}
	if len(gains) > 0 {
		out = append(out, "Gain of final accuracy over each run's first validation, mean over run views (an SA-RL run once per workflow it is evaluated in): "+strings.Join(gains, ", ")+".")
	}
	best, bestP := "", math.Inf(1)
	alpha := 1 - cl.CI
	for _, g := range cl.Collapse {
		task := g.Task
		if task == "" {
			task = "all tasks"
		}
		if g.P < bestP {
			bestP = g.P
			best = fmt.Sprintf("a role's format collapsed in %d of %d IP runs against %d of %d SP runs in voting and orch-workers (%s; one-sided Fisher exact p = %.2g)", g.IP.K, g.IP.N, g.SP.K, g.SP.N, task, g.P)
		}
	}
	if cl.Late != nil {
		for _, x := range cl.Late.Interventions {
			if x.P < bestP {
				bestP = x.P
				best = fmt.Sprintf("with %s, %d of %d %s runs had a role's format collapse against %d of %d without it in the same cells (one-sided Fisher exact p = %.2g)", x.Intervention, x.With.K, x.With.N, x.Condition, x.Without.K, x.Without.N, x.P)
			}
		}
	}
	if best != "" && analysis.Rejects(bestP, alpha) {
		out = append(out, "Strongest exact test: "+best+".")
	}
	return out
}
