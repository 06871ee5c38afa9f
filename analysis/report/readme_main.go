package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/study"
)

// headline is what the summary's *Main results* states, gathered once so
// that its sentences (mainResults) and its figure (headlineFigure) rest on
// the same numbers and the same choice of finding.
type headline struct {
	gains []condGain // each trained condition with run views that have both accuracies, in condition order
	// test is the strongest exact test among the format-collapse
	// comparisons when it rejects at the report's alpha; nil otherwise.
	test *headlineTest
}

// condGain is one trained condition's gain of final accuracy over each run
// view's first validation.
type condGain struct {
	cond  string
	views []float64 // one gain per run view, in the study's order
}

func (g condGain) mean() float64 {
	s := 0.0
	for _, v := range g.views {
		s += v
	}
	return s / float64(len(g.views))
}

// headlineTest is one exact comparison of two rates of runs whose role's
// format collapsed: the first group's rate against the second's.
type headlineTest struct {
	sentence       string
	labelA, labelB string
	a, b           analysis.Rate
	p              float64
	condA, condB   string // the conditions the groups' colours come from ("" for grey)
}

// studyHeadline gathers the study's gains and picks its strongest exact
// test: the smallest one-sided Fisher p among IP against SP per task and
// each intervention against none; kept only when it rejects at alpha.
func studyHeadline(st *analysis.Study, cl *analysis.Claims) headline {
	var h headline
	for _, cond := range []string{study.SARL, study.SP, study.IP} {
		g := condGain{cond: cond}
		for _, r := range st.Runs {
			if r.Condition != cond || math.IsNaN(r.Metrics.Final) || math.IsNaN(r.Metrics.Base) {
				continue
			}
			g.views = append(g.views, r.Metrics.Final-r.Metrics.Base)
		}
		if len(g.views) > 0 {
			h.gains = append(h.gains, g)
		}
	}
	var best *headlineTest
	for _, g := range cl.Collapse {
		task := g.Task
		if task == "" {
			task = "all tasks"
		}
		if best == nil || g.P < best.p {
			best = &headlineTest{
				sentence: fmt.Sprintf("a role's format collapsed in %d of %d IP runs against %d of %d SP runs in %s (%s; one-sided Fisher exact p = %.2g)", g.IP.K, g.IP.N, g.SP.K, g.SP.N, sameRoleAnd(), task, g.P),
				labelA:   "IP, " + sameRoleAnd() + ", " + task, labelB: "SP, " + sameRoleAnd() + ", " + task,
				a: g.IP, b: g.SP, p: g.P, condA: study.IP, condB: study.SP,
			}
		}
	}
	if cl.Late != nil {
		for _, x := range cl.Late.Interventions {
			if best == nil || x.P < best.p {
				best = &headlineTest{
					sentence: fmt.Sprintf("with %s, %d of %d %s runs had a role's format collapse against %d of %d without it in the same cells (one-sided Fisher exact p = %.2g)", x.Intervention, x.With.K, x.With.N, x.Condition, x.Without.K, x.Without.N, x.P),
					labelA:   fmt.Sprintf("%s without %s", x.Condition, x.Intervention), labelB: fmt.Sprintf("%s with %s", x.Condition, x.Intervention),
					a: x.Without, b: x.With, p: x.P, condA: x.Condition,
				}
			}
		}
	}
	if best != nil && analysis.Rejects(best.p, 1-cl.CI) {
		h.test = best
	}
	return h
}

// mainResults is the summary's opening: the study's measured gains (final
// accuracy minus the first validation's, per trained condition) and its
// strongest exact test among the format-collapse comparisons (IP against
// SP, and each intervention against none); nil without trained runs.
func mainResults(h headline) []string {
	var out []string
	var gains []string
	for _, g := range h.gains {
		gains = append(gains, fmt.Sprintf("%s %+.3f (%s)", g.cond, g.mean(), plural(len(g.views), "run view")))
	}
	if len(gains) > 0 {
		out = append(out, "Gain of final accuracy over each run's first validation, mean over run views (an SA-RL run once per workflow it is evaluated in): "+strings.Join(gains, ", ")+".")
	}
	if h.test != nil {
		out = append(out, "Strongest exact test: "+h.test.sentence+".")
	}
	return out
}
