package analysis

import (
	"math"
	"slices"

	"github.com/marlowlab/marlow/harness/study"
)

// Claim c: where IP's terminal cliffs fall, and whether same-role
// gradient amplification precedes them.

// claimC: where IP's terminal cliffs fall, and whether same-role gradient
// amplification precedes them.
func claimC(st *Study) CliffClaim {
	var t cliffTally
	conc := Concentration{LRShare: math.NaN()}
	var prec AmplificationTest
	for _, c := range st.Cells {
		if c.Cond(study.IP) != nil {
			t.addCell(st, c, &conc, &prec)
		}
	}
	t.judge(&conc, st.Params.CI)
	if len(conc.Cells) > 0 && conc.Outcome != Untestable && !st.controlled(CliffDetector) {
		conc.Outcome, conc.Reason = Untestable, NoControl
	}
	outcomes := make([]Outcome, len(prec.Runs))
	for i, r := range prec.Runs {
		outcomes[i] = r.Outcome
	}
	prec.Test = majority(outcomes, 1-st.Params.CI)
	switch {
	case len(prec.Runs) == 0:
		prec.Test.Reason = NoCliffRuns
	case !st.controlled(AmplificationDetector):
		prec.Test.Outcome, prec.Test.Reason = Untestable, NoControl
	}
	return verdictC(conc, prec)
}

// cliffTally gathers claim c's concentration test over the cells: the cliff
// rates of the judged cells in the voting and orch-workers cells (V) and
// the others (O).
type cliffTally struct {
	rateV, rateO []Estimate
}

// addCell adds cell c's IP runs: a unit of the concentration test (conc)
// and one unit of the amplification test (prec) per run with a cliff.
func (t *cliffTally) addCell(st *Study, c *CellResult, conc *Concentration, prec *AmplificationTest) {
	ip := c.Cond(study.IP)
	runs := condRuns(st, c.Key, study.IP)
	var amp int
	for _, r := range runs {
		if r.Metrics.Cliff.Cliff && amplifiedBeforeCliff(r) {
			amp++
		}
	}
	u := CliffCell{Cell: c.Key, CliffRuns: ip.CliffRuns, Seeds: ip.Seeds, Rate: ip.CliffRate, Amplified: amp, LRShare: math.NaN()}
	for _, r := range runs {
		lp := LatePhaseOf(r)
		if lp.Late {
			u.LateRuns++
		}
		if !math.IsNaN(lp.LRShare) && (math.IsNaN(u.LRShare) || lp.LRShare > u.LRShare) {
			u.LRShare = lp.LRShare
		}
	}
	if j, few := fewSeeds(ip); few {
		u.Judgement = j
		conc.NoDataRuns += ip.Seeds
		conc.Cells = append(conc.Cells, u)
		return
	}
	u.Outcome, u.Reason = Counted, EntersRates
	conc.LateRuns += u.LateRuns
	if !math.IsNaN(u.LRShare) && (math.IsNaN(conc.LRShare) || u.LRShare > conc.LRShare) {
		conc.LRShare = u.LRShare
	}
	if slices.Contains(cliffWorkflows(), c.Key.Workflow) {
		t.rateV = append(t.rateV, ip.CliffRate)
		conc.RunsV += ip.Seeds
		conc.CliffsV += ip.CliffRuns
	} else {
		t.rateO = append(t.rateO, ip.CliffRate)
		conc.RunsO += ip.Seeds
		conc.CliffsO += ip.CliffRuns
	}
	conc.Cells = append(conc.Cells, u)
	for _, r := range runs {
		if !r.Metrics.Cliff.Cliff {
			continue
		}
		ru := CliffRun{Cell: c.Key, Run: r.RunID, FallStep: r.Metrics.Cliff.FallStep, FirstAmplified: firstAmplified(r)}
		switch {
		case len(r.Amplification) == 0:
			ru.Outcome, ru.Reason = NoData, NoStepRows
		case amplifiedBeforeCliff(r):
			ru.Outcome, ru.Reason = Holds, AmplifiedFirst
		default:
			ru.Outcome, ru.Reason = Against, NotAmplified
		}
		prec.Runs = append(prec.Runs, ru)
	}
}

// judge sets the concentration test's rates, difference and outcome.
func (t *cliffTally) judge(conc *Concentration, ci float64) {
	rv, ro := meanEstimate(t.rateV, ci), meanEstimate(t.rateO, ci)
	diff := DifferenceInterval(rv, ro, ci)
	if diff.HasCI() { // a difference of rates lies in [-1, 1]
		diff.Lo, diff.Hi = math.Max(-1, diff.Lo), math.Min(1, diff.Hi)
	}
	conc.CellsV, conc.CellsO = len(t.rateV), len(t.rateO)
	conc.RateV, conc.RateO, conc.Diff = rv, ro, diff
	conc.ExactV, conc.ExactO = ClopperPearson(conc.CliffsV, conc.RunsV, ci), ClopperPearson(conc.CliffsO, conc.RunsO, ci)
	d := judgeGain(diff)
	conc.DiffReason = d.Reason
	judged := conc.RunsV + conc.RunsO
	switch {
	case judged == 0 && conc.NoDataRuns > 0:
		conc.Outcome, conc.Reason = Untestable, NoneJudged
	case judged > 0 && 2*conc.LateRuns < judged:
		conc.Outcome, conc.Reason = Untestable, NoLatePhase
	case judged > 0 && conc.CliffsV+conc.CliffsO == 0:
		conc.Outcome, conc.Reason = Undecided, NoCliffs // the power rule: no cliff is no test of where cliffs fall
	case len(t.rateV) == 0:
		conc.Outcome, conc.Reason = Undecided, NoCliffCell
	case len(t.rateO) == 0:
		conc.Outcome, conc.Reason = Undecided, NoOtherCell
	default:
		conc.Outcome, conc.Reason = d.Outcome, RateInterval
	}
}

// verdictC combines claim c's two tests.
func verdictC(conc Concentration, prec AmplificationTest) CliffClaim {
	c := CliffClaim{Concentration: conc, Amplification: prec}
	switch {
	case len(conc.Cells) == 0:
		c.Verdict, c.Reason = NotTestable, NoIPCell
	case conc.Outcome == Against || prec.Outcome == Against:
		c.Verdict, c.Reason = Refuted, EitherAgainst
	case conc.Outcome == Untestable || prec.Outcome == Untestable:
		c.Verdict, c.Reason = NotTestable, EitherUntest
	case conc.Outcome == Holds && prec.Outcome == Holds:
		c.Verdict, c.Reason = Reproduced, BothHold
	default:
		c.Verdict, c.Reason = Inconclusive, Mixed
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

// firstAmplified is the first step closing a sustained amplified window
// of a role of the run, or -1.
func firstAmplified(r *RunResult) int64 {
	first := int64(-1)
	for _, a := range r.Amplification {
		if a.Amplified && (first < 0 || a.Sustained < first) {
			first = a.Sustained
		}
	}
	return first
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

// MinLateValidations is the fewest validations in the second half of its
// training steps a run needs for a terminal cliff to be seen in it.
const MinLateValidations = 2

// MinLateLRShare is the least share of the summed learning rate the second
// half of a run's steps must carry for the run to have a late phase: a
// linear decay to zero gives 0.25, a constant rate 0.5, a cosine decay to
// zero about 0.18.
const MinLateLRShare = 0.25

// LatePhase is whether a run has the late phase a terminal cliff needs.
type LatePhase struct {
	LateValidations int     // validations after the middle of training
	LRShare         float64 // share of the summed learning rate in the second half of the steps, NaN without step rows
	// Late: LateValidations >= MinLateValidations and LRShare >=
	// MinLateLRShare (not checked without step rows).
	Late bool
}

// LatePhaseOf reads a run view's late phase from its curve and step rows
// (the learning rate of the first row of each step). It rests
// on the budget (validations, schedule), not on the run's outcome.
func LatePhaseOf(r *RunResult) LatePhase {
	lp := LatePhase{LRShare: math.NaN()}
	var end int64
	for _, p := range r.Curve {
		end = max(end, p.Step)
	}
	lr := map[int64]float64{}
	var last int64
	for _, s := range r.steps {
		if math.IsNaN(s.LR) {
			continue
		}
		if _, ok := lr[s.Step]; !ok {
			lr[s.Step] = s.LR
		}
		last = max(last, s.Step)
	}
	end = max(end, last)
	for _, p := range r.Curve {
		if 2*p.Step > end {
			lp.LateValidations++
		}
	}
	var all, late float64
	for st, v := range lr {
		all += v
		if 2*st > last {
			late += v
		}
	}
	if all > 0 {
		lp.LRShare = late / all
	}
	lp.Late = lp.LateValidations >= MinLateValidations && (math.IsNaN(lp.LRShare) || lp.LRShare >= MinLateLRShare-1e-12)
	return lp
}
