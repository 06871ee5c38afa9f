package analysis

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/harness/study"
)

// Claim c: where IP's terminal cliffs fall, and whether same-role
// gradient amplification precedes them.

// Labels of the counts of claim c's concentration test.
const (
	CountRunsV   = "IP runs in voting and orch-workers"
	CountCliffsV = "with a cliff in voting and orch-workers"
	CountRunsO   = "IP runs in other workflows"
	CountCliffsO = "with a cliff in other workflows"
	CountNoData  = "IP runs in cells without enough data"
)

// claimC: where IP's terminal cliffs fall, and whether same-role gradient
// amplification precedes them.
func claimC(st *Study) Claim {
	conc := ClaimTest{Name: "IP cliffs concentrate in voting and orch-workers",
		Rule: "In each cell with IP runs, the cliff rate is the fraction of IP seeds with a terminal cliff, with its interval by the rule of *Definitions* (the cliff test rerun on resampled problems gives the problem part). " +
			"Over the cells judged (two or more IP seeds), the mean cliff rate of the voting and orch-workers cells is compared with that of the other workflows' cells (the interval of a mean adds the cells' parts; the difference's interval is Welch–Satterthwaite's). " +
			"The test holds when the interval of the difference lies above 0; it is against when it lies below 0, or when no IP run judged fell off a cliff (the cliffs the claim is about did not occur); " +
			"it is undecided otherwise (a zero-width interval never counts), and when either group has no cell."}
	prec := ClaimTest{Name: "IP cliffs preceded by same-role gradient amplification",
		Rule: "Each IP run judged that fell off a cliff holds when a role's gradient norm rose above amp_k × its early median while the mean cosine between its same-role agents' gradients was above amp_cos, " +
			"at or before the cliff's fall (the cosine exists only for roles with two or more agents); it is against when no role did, and has not enough data without step rows. " + majorityRule("cliff runs")}
	var t cliffTally
	for _, c := range st.Cells {
		if c.Cond(study.IP) != nil {
			t.addCell(st, c, &conc, &prec)
		}
	}
	t.judge(&conc, st.Params.CI)
	majority(&prec, "cliff runs")
	return verdictC(conc, prec)
}

// cliffTally gathers claim c's concentration test over the cells: the cliff
// rates of the judged cells and the counts of runs and cliffs, in the
// voting and orch-workers cells (V) and the others (O).
type cliffTally struct {
	rateV, rateO                           []Estimate
	runsV, runsO, cliffsV, cliffsO, noData int
}

// addCell adds cell c's IP runs: a unit of the concentration test (conc)
// and one unit of the amplification test (prec) per run with a cliff.
func (t *cliffTally) addCell(st *Study, c *CellResult, conc, prec *ClaimTest) {
	ip := c.Cond(study.IP)
	runs := condRuns(st, c.Key, study.IP)
	var amp int
	for _, r := range runs {
		if r.Metrics.Cliff.Cliff && amplifiedBeforeCliff(r) {
			amp++
		}
	}
	u := ClaimUnit{Cell: c.Key, Evidence: []Evidence{
		{Name: "IP runs with a cliff", Count: fmt.Sprintf("%d/%d", ip.CliffRuns, ip.Seeds)},
		{Name: "cliff rate", Value: ip.CliffRate},
		{Name: "cliffs preceded by amplification", Count: fmt.Sprintf("%d/%d", amp, ip.CliffRuns)},
	}}
	if why := fewSeeds(ip); why != "" {
		u.Outcome, u.Why = NoData, why
		t.noData += ip.Seeds
		conc.Units = append(conc.Units, u)
		return
	}
	u.Outcome, u.Why = Counted, "its cliff rate enters the comparison of the workflows"
	if slices.Contains(cliffWorkflows, c.Key.Workflow) {
		t.rateV = append(t.rateV, ip.CliffRate)
		t.runsV += ip.Seeds
		t.cliffsV += ip.CliffRuns
	} else {
		t.rateO = append(t.rateO, ip.CliffRate)
		t.runsO += ip.Seeds
		t.cliffsO += ip.CliffRuns
	}
	conc.Units = append(conc.Units, u)
	for _, r := range runs {
		if !r.Metrics.Cliff.Cliff {
			continue
		}
		ru := ClaimUnit{Cell: c.Key, Run: r.RunID, Evidence: []Evidence{
			{Name: "cliff fall step", Count: fmt.Sprint(r.Metrics.Cliff.FallStep)},
			{Name: "first amplified step", Count: firstAmplified(r)},
		}}
		switch {
		case len(r.Amplification) == 0:
			ru.Outcome, ru.Why = NoData, "the run has no step rows"
		case amplifiedBeforeCliff(r):
			ru.Outcome, ru.Why = Holds, "amplified at or before the cliff's fall"
		default:
			ru.Outcome, ru.Why = Against, "no role amplified at or before the cliff's fall"
		}
		prec.Units = append(prec.Units, ru)
	}
}

// judge sets the concentration test's counts, evidence and outcome.
func (t *cliffTally) judge(conc *ClaimTest, ci float64) {
	rv, ro := meanEstimate(t.rateV, ci), meanEstimate(t.rateO, ci)
	diff := DifferenceInterval(rv, ro, ci)
	if diff.HasCI() { // a difference of rates lies in [-1, 1]
		diff.Lo, diff.Hi = math.Max(-1, diff.Lo), math.Min(1, diff.Hi)
	}
	conc.Counts = []Count{{CountRunsV, t.runsV}, {CountCliffsV, t.cliffsV}, {CountRunsO, t.runsO}, {CountCliffsO, t.cliffsO}, {CountNoData, t.noData}}
	conc.Evidence = []Evidence{
		{Name: fmt.Sprintf("mean cliff rate, voting and orch-workers (%d cells)", len(t.rateV)), Value: rv},
		{Name: fmt.Sprintf("mean cliff rate, other workflows (%d cells)", len(t.rateO)), Value: ro},
		{Name: "difference", Value: diff, Signed: true}}
	switch {
	case t.runsV+t.runsO > 0 && t.cliffsV+t.cliffsO == 0:
		conc.Outcome = Against
		conc.Why = fmt.Sprintf("None of the %d IP runs judged fell off a cliff.", t.runsV+t.runsO)
	case len(t.rateV) == 0:
		conc.Outcome, conc.Why = Undecided, "No voting or orch-workers cell with IP was judged."
	case len(t.rateO) == 0:
		conc.Outcome, conc.Why = Undecided, fmt.Sprintf("%d of %d IP runs judged in voting and orch-workers fell off a cliff, but no cell of another workflow with IP was judged to compare with.", t.cliffsV, t.runsV)
	default:
		o, why := judgeGain(diff)
		conc.Outcome = o
		conc.Why = fmt.Sprintf("%d of %d IP runs in voting and orch-workers fell off a cliff, %d of %d in other workflows; for the difference of mean cliff rates %s.", t.cliffsV, t.runsV, t.cliffsO, t.runsO, why)
	}
}

// verdictC combines claim c's two tests.
func verdictC(conc, prec ClaimTest) Claim {
	c := Claim{ID: "c", Statement: "IP's terminal accuracy cliffs concentrate in voting and orch-workers and are preceded by same-role gradient amplification (per-role gradient norm rising with high cosine between same-role agents' gradients).",
		Tests: []ClaimTest{conc, prec},
		Rule:  "The verdict is reproduced when both tests hold, not reproduced when either is against, and inconclusive otherwise."}
	switch {
	case len(conc.Units) == 0:
		c.Verdict, c.Why = Inconclusive, "No cell has IP runs, so the claim cannot be judged."
	case conc.Outcome == Holds && prec.Outcome == Holds:
		c.Verdict, c.Why = Reproduced, "Both tests hold."
	case conc.Outcome == Against || prec.Outcome == Against:
		c.Verdict = NotReproduced
		var w []string
		if conc.Outcome == Against {
			w = append(w, "Concentration is against: "+conc.Why)
		}
		if prec.Outcome == Against {
			w = append(w, "Amplification is against: "+prec.Why)
		}
		c.Why = strings.Join(w, " ")
	default:
		c.Verdict = Inconclusive
		c.Why = fmt.Sprintf("Concentration: %s; amplification: %s.", conc.Outcome, prec.Outcome)
	}
	return c
}

// amplifiedBeforeCliff reports whether a role of the run was amplified
// (gradient norm up with high same-role cosine) at or before its cliff's
// fall.
func amplifiedBeforeCliff(r *RunResult) bool {
	for _, a := range r.Amplification {
		if a.BeforeCliff {
			return true
		}
	}
	return false
}

func firstAmplified(r *RunResult) string {
	first := int64(-1)
	for _, a := range r.Amplification {
		if a.Amplified && (first < 0 || a.Steps[0] < first) {
			first = a.Steps[0]
		}
	}
	if first < 0 {
		return "–"
	}
	return fmt.Sprint(first)
}

// meanEstimate is the mean of independent estimates (one per cell) with
// the interval of the rule: the squared standard error of the mean adds
// each estimate's SE²/k² with its degrees of freedom (Welch–Satterthwaite),
// clamped to [0, 1]; no interval when an estimate has none.
func meanEstimate(es []Estimate, ci float64) Estimate {
	if len(es) == 0 {
		return noCI(math.NaN())
	}
	k := float64(len(es))
	var v float64
	var parts []varPart
	missing := false
	for _, e := range es {
		v += e.Value / k
		switch {
		case math.IsNaN(e.SE) || math.IsNaN(e.DF):
			missing = true
		case e.SE > 0:
			parts = append(parts, varPart{v: e.SE * e.SE / (k * k), df: e.DF})
		}
	}
	if missing {
		return noCI(v)
	}
	return tInterval(v, parts, ci, 0, 1)
}

func b01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
