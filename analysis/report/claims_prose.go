package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/study"
)

// The words of the comparison with the paper's claims: analysis.CompareClaims
// returns outcomes, reasons, counts and estimates; this file turns them
// into the claims, rules, reasons, counts and evidence the README prints.

// claimText is one claim as the README prints it.
type claimText struct {
	id, statement string
	rule          string // how the tests combine into the verdict
	verdict, why  string
	tests         []testText
}

// testText is one test of a claim as the README prints it.
type testText struct {
	name, rule   string
	outcome, why string
	counts       []labelled // what the outcome rests on
	countsLine   string     // set: printed instead of counts (the late rules' k/n per group)
	// short is the test's phrase in the summary's table, the counts
	// being in the claim's section; "" means the outcome word.
	short    string
	evidence []evidence // the test's own numbers
	units    []unitText
}

// labelled is one labelled count of a test.
type labelled struct {
	label string
	n     int
}

// evidence is one named number of a unit or a test: an estimate with its
// interval, or a count written as text (count non-empty).
type evidence struct {
	name   string
	value  analysis.Estimate
	signed bool   // a difference, printed with its sign
	count  string // e.g. "2/3"; when set it is printed instead of value
}

// unitText is the evidence of one unit judged under a claim: a cell (run
// empty) or one run of a cell.
type unitText struct {
	cell     analysis.CellKey
	run      string
	outcome  string
	why      string
	evidence []evidence
}

// verdictWord is a verdict as the README prints it.
func verdictWord(v analysis.Verdict) string {
	switch v {
	case analysis.Reproduced:
		return "reproduced"
	case analysis.Refuted:
		return "refuted"
	case analysis.NotTestable:
		return "not testable at this budget"
	}
	return "inconclusive"
}

// outcomeWord is an outcome as the README prints it; it also labels the
// counts of a majority test.
func outcomeWord(o analysis.Outcome) string {
	switch o {
	case analysis.Holds:
		return "holds"
	case analysis.Against:
		return "against"
	case analysis.NoData:
		return "not enough data"
	case analysis.Counted:
		return "counted"
	case analysis.Untestable:
		return "not testable"
	}
	return "undecided"
}

// plural is "n thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// seedsText is a condition's number of seeds, "–" when it is absent.
func seedsText(n int) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprint(n)
}

// gainWhy says how a gain's interval stands against 0.
func gainWhy(r analysis.Reason) string {
	switch r {
	case analysis.AboveZero:
		return "the interval lies above 0"
	case analysis.BelowZero:
		return "the interval lies below 0"
	case analysis.NoInterval:
		return "no interval could be computed"
	case analysis.ZeroWidth:
		return "the interval has zero width"
	}
	return "the interval contains 0"
}

// fewSeedsWhy says which conditions have too few seeds for a cell to be
// judged.
func fewSeedsWhy(few []analysis.CondSeeds) string {
	out := make([]string, len(few))
	for i, c := range few {
		out[i] = fmt.Sprintf("%s has %d seed", c.Condition, c.Seeds)
	}
	return strings.Join(out, ", ") + fmt.Sprintf("; a cell is judged only with %d or more seeds per condition, since one seed says nothing of the seed-to-seed spread", analysis.MinClaimSeeds)
}

// gainUnitWhy is the reason of a cell judged on a gain, prefixed with the
// difference it judged (e.g. "IP − SP").
func gainUnitWhy(j analysis.Judgement, diff string) string {
	if j.Reason == analysis.FewSeeds {
		return fewSeedsWhy(j.Few)
	}
	return diff + ": " + gainWhy(j.Reason)
}

// binomPower says how far below one half a capture rate of n runs must
// fall for the one-sided binomial test to reject half.
func binomPower(n int, detectable float64) string {
	if math.IsNaN(detectable) {
		return fmt.Sprintf("with %d runs no count could reject half", n)
	}
	return fmt.Sprintf("with %d runs only a rate at least %.3f below one half could", n, detectable)
}

// majorityRule is the rule text of a majority test over units.
func majorityRule(units string) string {
	return fmt.Sprintf("The test holds when the %[1]s that hold are a strict majority of all %[1]s it applies to "+
		"(those without enough data included); by the power rule it is against only when a one-sided exact binomial test finds the %[1]s against significantly more than half of them (p below 1 − the interval level), "+
		"so that a few %[1]s against, which undecided %[1]s and %[1]s without enough data could outweigh, refute nothing; "+
		"it is not testable when no %[2]s was judged (none it applies to, or none with enough data); otherwise it is undecided.", units, strings.TrimSuffix(units, "s"))
}

// majorityCounts are the counts of a majority test.
func majorityCounts(t analysis.Tally) []labelled {
	return []labelled{{outcomeWord(analysis.Holds), t.Holds}, {outcomeWord(analysis.Against), t.Against},
		{outcomeWord(analysis.Undecided), t.Undecided}, {outcomeWord(analysis.NoData), t.NoData},
		{"judged", t.Judged()}, {"total", t.Total()}}
}

// majorityWhy is the reason of a majority test's outcome.
func majorityWhy(t analysis.Test, units string) string {
	c := t.Tally
	n := c.Total()
	switch t.Reason {
	case analysis.NoUnits, analysis.NoSharedCell:
		return fmt.Sprintf("No %s to judge.", units)
	case analysis.NoValueCell:
		return fmt.Sprintf("Every one of the %s it applies to has a supervisor that adds no value at base, so it is not testable.", units)
	case analysis.NoneJudged:
		return fmt.Sprintf("None of the %d %s has enough data to be judged.", n, units)
	case analysis.NoControl:
		return fmt.Sprintf("Its units give holds %d, against %d, undecided %d, not enough data %d, but the detector they rest on has no positive control shown on real training in this regime, so they cannot decide the claim.", c.Holds, c.Against, c.Undecided, c.NoData)
	case analysis.NoCliffRuns:
		return "No IP run judged fell off a cliff, so no cliff can be tested for amplification before it."
	case analysis.Majority:
		return fmt.Sprintf("It holds in %d of %d %s, a strict majority.", c.Holds, n, units)
	case analysis.HalfAgainst:
		return fmt.Sprintf("It is against in %d of %d %s, significantly more than half (one-sided binomial).", c.Against, n, units)
	}
	power := ""
	switch {
	case t.Reason != analysis.Split:
	case t.RefuteAt == 0:
		power = fmt.Sprintf(" With %d %s, no count against could refute it.", n, units)
	default:
		power = fmt.Sprintf(" To refute it, %d of the %d %s would have to be against (one-sided binomial).", t.RefuteAt, n, units)
	}
	return fmt.Sprintf("It holds in %d of %d %s and is against in %d; the %d undecided and %d without enough data could tip it either way.", c.Holds, n, units, c.Against, c.Undecided, c.NoData) + power
}

// majorityTest is the text of a majority test over cells or runs.
func majorityTest(name, rule, units string, t analysis.Test, us []unitText) testText {
	tt := testText{name: name, rule: rule + " " + majorityRule(units), outcome: outcomeWord(t.Outcome),
		why: majorityWhy(t, units), counts: majorityCounts(t.Tally), units: us}
	c := t.Tally
	switch {
	case c.Judged() == 0 && c.NoData > 0:
		tt.short = fmt.Sprintf("no %s judged: %d with %s", units, c.NoData, outcomeWord(analysis.NoData))
	case c.Judged() == 0:
		tt.short = "no " + units + " judged"
	case c.Against > 0:
		tt.short = fmt.Sprintf("holds in %d and against in %d of %d judged %s", c.Holds, c.Against, c.Judged(), units)
	default:
		tt.short = fmt.Sprintf("holds in %d of %d judged %s", c.Holds, c.Judged(), units)
	}
	return tt
}

// singleRule is the rule of a claim of one test.
const singleRule = "The verdict is the test's outcome: reproduced when it holds, refuted when it is against, not testable at this budget when it is not testable, inconclusive when it is undecided."

// claimTexts are the paper's four claims, in order, as the README prints
// them.
func claimTexts(cl *analysis.Claims) []claimText {
	if cl.Late != nil {
		return []claimText{betterText(cl.Better), ceilingText(cl.Ceiling), lateCliffText(cl.Late), lateCaptureText(cl.Late)}
	}
	return []claimText{betterText(cl.Better), ceilingText(cl.Ceiling), cliffText(cl.Cliffs, cl.CI), captureText(cl.Capture)}
}

// cellClaim makes the text of a claim of one test over cells: its reason
// is the test's, or empty when the test has no cell; more is added to the
// test's reason when it has.
func cellClaim(id, statement string, v analysis.Verdict, t testText, empty, more string) claimText {
	if len(t.units) == 0 {
		t.why = empty
	} else {
		t.why += more
	}
	return claimText{id: id, statement: statement, rule: singleRule, verdict: verdictWord(v), why: t.why, tests: []testText{t}}
}

// betterText is claim a.
func betterText(c analysis.BetterClaim) claimText {
	units := make([]unitText, len(c.Cells))
	for i, u := range c.Cells {
		units[i] = unitText{cell: u.Cell, outcome: outcomeWord(u.Outcome), why: gainUnitWhy(u.Judgement, u.Better+" − base"),
			evidence: []evidence{
				{name: "seeds base/SP/IP", count: seedsText(u.BaseSeeds) + "/" + seedsText(u.SPSeeds) + "/" + seedsText(u.IPSeeds)},
				{name: "base final", value: u.BaseFinal},
				{name: "SP final", value: u.SPFinal},
				{name: "IP final", value: u.IPFinal},
				{name: "better", count: u.Better},
				{name: "gain over base", value: u.Gain, signed: true},
			}}
	}
	t := majorityTest("better multi-agent condition vs base, final accuracy",
		"In each cell with base and SP or IP, the better multi-agent condition is the one with the higher final accuracy (mean over seeds; means within 1e-9 of each other are a tie, and SP is taken on a tie). "+
			"The cell holds when the interval of its final accuracy minus base's lies above 0, is against when it lies below 0, and is undecided otherwise. "+
			"Choosing the better condition on the same data favours the claim slightly.", "cells", c.Test, units)
	empty := "No cell has base and a multi-agent condition (SP or IP), so the claim cannot be judged."
	if c.NoBase {
		empty = "This study has no base runs (its matrix has no base condition), so the claim cannot be judged here."
	}
	return cellClaim("a", "Multi-agent RL (the better of SP and IP) beats the base workflow in most cells.", c.Verdict, t, empty, "")
}

// ceilingText is claim b.
func ceilingText(c analysis.CeilingClaim) claimText {
	units := make([]unitText, len(c.Cells))
	for i, u := range c.Cells {
		units[i] = unitText{cell: u.Cell, outcome: outcomeWord(u.Outcome), why: gainUnitWhy(u.Judgement, "IP − SP"),
			evidence: []evidence{
				{name: "seeds SP/IP", count: seedsText(u.SPSeeds) + "/" + seedsText(u.IPSeeds)},
				{name: "SP ceiling", value: u.SPCeiling},
				{name: "IP ceiling", value: u.IPCeiling},
				{name: "IP − SP ceiling", value: u.Diff, signed: true},
			}}
	}
	t := majorityTest("IP ceiling vs SP ceiling",
		"In each cell with SP and IP, the cell holds when the interval of IP's ceiling minus SP's (paired over problems, interval rule of *Definitions*) lies above 0, is against when it lies below 0, and is undecided otherwise. "+
			"A ceiling is a maximum over noisy validations; both conditions share that bias, so their difference is compared.", "cells", c.Test, units)
	return cellClaim("b", "IP reaches a higher ceiling than SP in more cells than not.", c.Verdict, t,
		"No cell has both SP and IP, so the claim cannot be judged.", "")
}

// sameRoleAnd and sameRoleOr name claim c's workflows, those whose
// stages run several agents of the same role (analysis's rule).
func sameRoleAnd() string { return analysis.SameRoleWorkflowsText("and") }

func sameRoleOr() string { return analysis.SameRoleWorkflowsText("or") }

// cliffText is claim c.
func cliffText(c analysis.CliffClaim, ci float64) claimText {
	conc, prec := concentrationText(c.Concentration, ci), amplificationText(c.Amplification)
	ct := claimText{id: "c", statement: "IP's terminal accuracy cliffs concentrate in " + sameRoleAnd() + " and are preceded by same-role gradient amplification (per-role gradient norm rising with high cosine between same-role agents' gradients).",
		rule:    "The verdict is refuted when either test is against; otherwise not testable at this budget when either is not testable; reproduced when both hold; inconclusive otherwise.",
		verdict: verdictWord(c.Verdict), tests: []testText{conc, prec}}
	switch c.Reason {
	case analysis.NoIPCell:
		ct.why = "No cell has IP runs, so the claim cannot be judged."
	case analysis.EitherUntest:
		ct.why = testsWith(analysis.Untestable, c, conc, prec)
	case analysis.BothHold:
		ct.why = "Both tests hold."
	case analysis.EitherAgainst:
		ct.why = testsWith(analysis.Against, c, conc, prec)
	default:
		ct.why = fmt.Sprintf("Concentration: %s; amplification: %s.", conc.outcome, prec.outcome)
	}
	return ct
}

// testsWith names claim c's tests with outcome o and says why, e.g.
// "Concentration is against: ...".
func testsWith(o analysis.Outcome, c analysis.CliffClaim, conc, prec testText) string {
	var w []string
	for _, x := range []struct {
		name string
		got  analysis.Outcome
		why  string
	}{{"Concentration", c.Concentration.Outcome, conc.why}, {"Amplification", c.Amplification.Outcome, prec.why}} {
		if x.got == o {
			w = append(w, fmt.Sprintf("%s is %s: %s", x.name, outcomeWord(o), x.why))
		}
	}
	return strings.Join(w, " ")
}

// concentrationText is claim c's first test.
func concentrationText(c analysis.Concentration, ci float64) testText {
	units := make([]unitText, len(c.Cells))
	for i, u := range c.Cells {
		why := "its cliff rate enters the comparison of the workflows"
		if u.Reason == analysis.FewSeeds {
			why = fewSeedsWhy(u.Few)
		}
		units[i] = unitText{cell: u.Cell, outcome: outcomeWord(u.Outcome), why: why, evidence: []evidence{
			{name: "IP runs with a cliff", count: fmt.Sprintf("%d/%d", u.CliffRuns, u.Seeds)},
			{name: "exact interval", count: rateInterval(analysis.ClopperPearson(u.CliffRuns, u.Seeds, ci))},
			{name: "IP runs with a late phase", count: fmt.Sprintf("%d/%d", u.LateRuns, u.Seeds)},
			{name: "second-half LR share (largest)", count: shareText(u.LRShare)},
			{name: "cliff rate", value: u.Rate},
			{name: "cliffs preceded by amplification", count: fmt.Sprintf("%d/%d", u.Amplified, u.CliffRuns)},
		}}
	}
	t := testText{name: "IP cliffs concentrate in " + sameRoleAnd(),
		rule: "In each cell with IP runs, the cliff rate is the fraction of IP seeds with a terminal cliff, with its interval by the rule of *Definitions* (the cliff test rerun on resampled problems gives the problem part). " +
			"Over the cells judged (two or more IP seeds), the mean cliff rate of the " + sameRoleAnd() + " cells is compared with that of the other workflows' cells (the interval of a mean adds the cells' parts; the difference's interval is Welch–Satterthwaite's). " +
			fmt.Sprintf("A run has a late phase when it has %d or more validations in the second half of its training steps and that half carries %g or more of its summed learning rate (not checked for a run without step rows) (a linear decay to zero carries 0.25, a cosine decay to zero about 0.18): without one a terminal cliff can hardly occur. ", analysis.MinLateValidations, analysis.MinLateLRShare) +
			"The test is not testable when fewer than half of the IP runs judged have a late phase; otherwise it holds when the interval of the difference lies above 0; it is against when it lies below 0; when no IP run judged fell off a cliff it is undecided (by the power rule: no cliff anywhere locates none, and a zero count is no test of where cliffs fall); " +
			"it is undecided otherwise (a zero-width interval never counts), and when either group has no cell. The pooled cliff counts carry exact (Clopper–Pearson) intervals.",
		outcome: outcomeWord(c.Outcome), units: units,
		counts: []labelled{{"IP runs in " + sameRoleAnd(), c.RunsV}, {"with a cliff in " + sameRoleAnd(), c.CliffsV},
			{"IP runs in other workflows", c.RunsO}, {"with a cliff in other workflows", c.CliffsO}, {"IP runs in cells without enough data", c.NoDataRuns}},
		evidence: []evidence{
			{name: fmt.Sprintf("mean cliff rate, "+sameRoleAnd()+" (%d cells)", c.CellsV), value: c.RateV},
			{name: fmt.Sprintf("mean cliff rate, other workflows (%d cells)", c.CellsO), value: c.RateO},
			{name: "difference", value: c.Diff, signed: true},
			{name: "pooled cliff rate, " + sameRoleAnd() + ", exact", count: rateText(c.ExactV)},
			{name: "pooled cliff rate, other workflows, exact", count: rateText(c.ExactO)},
			{name: "IP runs judged with a late phase", count: fmt.Sprintf("%d/%d (largest second-half learning-rate share %s)", c.LateRuns, c.RunsV+c.RunsO, shareText(c.LRShare))}}}
	switch judged := c.RunsV + c.RunsO; c.Reason {
	case analysis.NoneJudged:
		t.short = fmt.Sprintf("no IP runs judged: %d in cells with %s", c.NoDataRuns, outcomeWord(analysis.NoData))
	case analysis.NoLatePhase:
		t.short = fmt.Sprintf("%d of %d IP runs judged have a late phase", c.LateRuns, judged)
	default:
		t.short = fmt.Sprintf("cliffs in %d of %d IP runs in %s, %d of %d elsewhere", c.CliffsV, c.RunsV, sameRoleAnd(), c.CliffsO, c.RunsO)
	}
	switch c.Reason {
	case analysis.NoneJudged:
		t.why = fmt.Sprintf("None of the %d IP runs is in a cell with enough seeds to be judged.", c.NoDataRuns)
	case analysis.NoControl:
		t.why = fmt.Sprintf("%d of %d IP runs in "+sameRoleAnd()+" fell off a cliff, %d of %d in other workflows, but the terminal-cliff detector has no positive control shown on real training in this regime, so its silence or its alarms cannot decide the claim.", c.CliffsV, c.RunsV, c.CliffsO, c.RunsO)
	case analysis.NoLatePhase:
		t.why = fmt.Sprintf("Only %d of the %d IP runs judged have a late phase (%d or more validations in the second half of training and %g or more of the learning rate in it; the largest share is %s).", c.LateRuns, c.RunsV+c.RunsO, analysis.MinLateValidations, analysis.MinLateLRShare, shareText(c.LRShare))
	case analysis.NoCliffs:
		t.why = fmt.Sprintf("None of the %d IP runs judged fell off a cliff (exact upper bounds: %s in "+sameRoleAnd()+", %s elsewhere).", c.RunsV+c.RunsO, f3(c.ExactV.Hi), f3(c.ExactO.Hi))
	case analysis.NoCliffCell:
		t.why = "No " + sameRoleOr() + " cell with IP was judged."
	case analysis.NoOtherCell:
		t.why = fmt.Sprintf("%d of %d IP runs judged in "+sameRoleAnd()+" fell off a cliff, but no cell of another workflow with IP was judged to compare with.", c.CliffsV, c.RunsV)
	default:
		t.why = fmt.Sprintf("%d of %d IP runs in "+sameRoleAnd()+" fell off a cliff, %d of %d in other workflows; for the difference of mean cliff rates %s.", c.CliffsV, c.RunsV, c.CliffsO, c.RunsO, gainWhy(c.DiffReason))
	}
	return t
}

// amplificationText is claim c's second test.
func amplificationText(c analysis.AmplificationTest) testText {
	units := make([]unitText, len(c.Runs))
	for i, u := range c.Runs {
		why := "no role amplified at or before the cliff's fall"
		switch u.Reason {
		case analysis.NoStepRows:
			why = "the run has no step rows"
		case analysis.AmplifiedFirst:
			why = "amplified at or before the cliff's fall"
		}
		first := "–"
		if u.FirstAmplified >= 0 {
			first = fmt.Sprint(u.FirstAmplified)
		}
		units[i] = unitText{cell: u.Cell, run: u.Run, outcome: outcomeWord(u.Outcome), why: why, evidence: []evidence{
			{name: "cliff fall step", count: fmt.Sprint(u.FallStep)},
			{name: "first amplified step", count: first},
		}}
	}
	return majorityTest("IP cliffs preceded by same-role gradient amplification",
		fmt.Sprintf("Each IP run judged that fell off a cliff holds when a role was amplified at or before the cliff's fall: after a LoRA warm-up of %d steps (left out of the baseline, while the adapter's B is near zero), its gradient norm rose above amp_k × its early median (over the early steps after the warm-up) "+
			"in %d of %d consecutive steps, with the mean cosine between its same-role agents' gradients above amp_cos in those steps where the role has two or more agents; a role with one agent is tested on its norm alone. The cosine between the role's gradient and the EMA of its past gradients, where the logs have it, is shown beside the test and does not gate it: on the detector's positive control it stayed near zero while the norm rose 17-fold, as in the stable runs. "+
			"It is against when no role was, and has not enough data without step rows.", analysis.AmpWarmupSteps, analysis.AmpSustainK, analysis.AmpSustainN), "cliff runs", c.Test, units)
}

// captureText is claim d.
func captureText(c analysis.CaptureClaim) claimText {
	units := make([]unitText, len(c.Cells))
	for i, u := range c.Cells {
		var why string
		switch u.Reason {
		case analysis.FewCaptureRuns:
			why = fmt.Sprintf("%s with capture comparisons; a cell is judged only with %d or more", plural(u.Judged, "SP run"), analysis.MinClaimSeeds)
		case analysis.MostCaptured:
			why = "a strict majority of SP runs captured"
		case analysis.MostNotCaptured:
			why = fmt.Sprintf("significantly fewer than half of the SP runs captured (one-sided binomial p %s)", pText(u.P))
		default:
			why = fmt.Sprintf("not a strict majority of SP runs captured, and not significantly fewer than half (one-sided binomial p %s; %s)", pText(u.P), binomPower(u.Judged, u.Detectable))
		}
		pairs := make([]string, len(u.Pairs))
		for k, p := range u.Pairs {
			pairs[k] = p.Role + "→" + p.Dominant
		}
		units[i] = unitText{cell: u.Cell, outcome: outcomeWord(u.Outcome), why: why, evidence: []evidence{
			{name: "SP runs captured", count: fmt.Sprintf("%d/%d", u.Captured, u.Judged)},
			{name: "capture rate", value: u.Rate},
			{name: "exact interval", count: rateInterval(u.Exact)},
			{name: "captured → dominant", count: dashIfEmpty(strings.Join(pairs, ", "))},
			{name: "aggregator length last/first, SP", value: u.LenSP},
			{name: "aggregator length last/first, IP", value: u.LenIP},
		}}
	}
	t := majorityTest("role capture under SP",
		"In each cell whose SP runs share one policy among two or more roles, an SP run counts as captured when one of its roles is captured by the role with the largest mean gradient share (*Definitions*: role capture, which requires the role's format to collapse, its outputs to move toward the dominant role's in n-grams and in length, and its outputs not to be degenerate). "+
			"The cell holds when a strict majority of its SP runs were captured; by the power rule it is against only when a one-sided exact binomial test finds significantly fewer than half captured (p below 1 − the interval level), and is undecided otherwise; it has not enough data with fewer than two SP runs with capture comparisons. "+
			"Beside it: the capture rate (fraction of SP runs captured, with a t interval over seeds, the seed part of the interval rule, since capture is not recomputed on resampled problems) "+
			"and, as the paper's diagnostic, the aggregator's output length at the last validation over that at the first (mean over seeds, same interval) for SP and for IP.", "cells", c.Test, units)
	parts := make([]string, len(c.ByWorkflow))
	for i, w := range c.ByWorkflow {
		parts[i] = fmt.Sprintf("%s %d of %d", w.Workflow, w.Holds, w.Cells)
	}
	return cellClaim("d", "Under SP, a role is captured by the role with the largest gradient mass: its format compliance falls while its outputs converge on the dominant role's (the aggregator's output length is the paper's diagnostic).", c.Verdict, t,
		captureEmpty(c),
		fmt.Sprintf(" Cells that hold, by workflow: %s. Over the cells, %d of %d SP runs were captured (exact interval %s).", strings.Join(parts, ", "), c.Pooled.K, c.Pooled.N, rateInterval(c.Pooled))+excludedSentence(c.Excluded))
}

// paperWorkflowNames are the paper's names of the workflows of its
// headline cells.
var paperWorkflowNames = map[string]string{study.EvalOpt: "Eval-Opt", study.Voting: "Voting"}

// headlineLabel names the paper's headline cell, e.g. "1.7B math Eval-Opt IP".
func headlineLabel(h analysis.Headline) string {
	wf, ok := paperWorkflowNames[h.PaperWorkflow]
	if !ok {
		wf = h.PaperWorkflow
	}
	return h.PaperScale + " math " + wf + " " + strings.ToUpper(h.Condition)
}

// headlineWhy says how the paper's headline cell was matched, or why none
// was.
func headlineWhy(h analysis.Headline) string {
	switch h.Match {
	case analysis.ScalesUnmatched:
		return fmt.Sprintf("the study has %s, not %d, so the paper's %s cannot be matched by rank", plural(h.Scales, "scale"), len(analysis.PaperScales), h.PaperScale)
	case analysis.TaskUnmatched:
		return fmt.Sprintf("the study has %s whose name contains math, not one, so the paper's math task cannot be matched", plural(h.MathTasks, "task"))
	}
	why := fmt.Sprintf("scale %s stands in for %s, task %s for math", h.Cell.Scale, h.PaperScale, h.Cell.Task)
	if !h.Found {
		why += fmt.Sprintf("; the study has no %s and SA-RL in cell %s", h.Condition, h.Cell)
	}
	return why
}

// rateText is "k/n = v [lo, hi]" for an exact rate.
func rateText(r analysis.Rate) string {
	if r.N == 0 {
		return "0/0"
	}
	return fmt.Sprintf("%d/%d = %s %s", r.K, r.N, f3(r.Value()), rateInterval(r))
}

// rateInterval is an exact rate's interval, "[lo, hi]", or "–".
func rateInterval(r analysis.Rate) string {
	if r.N == 0 {
		return "–"
	}
	return fmt.Sprintf("[%s, %s]", f3(r.Lo), f3(r.Hi))
}

// shareText is a learning-rate share to three decimals, "–" when NaN.
func shareText(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return f3(v)
}

// captureEmpty is claim d's sentence when it judged no cell.
func captureEmpty(c analysis.CaptureClaim) string {
	if c.Test.Reason == analysis.NoValueCell {
		return "Every cell whose SP runs share a policy among two or more roles has a supervisor that adds no value at base (*Supervisor value*), so a claim about one role capturing another is not testable here." + excludedSentence(c.Excluded)
	}
	return "No cell has SP runs whose policy is shared by two or more roles, so the claim cannot be judged."
}
