package analysis

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/marlowlab/marlow/harness/study"
)

// The comparison with the paper's four claims.
//
// Each claim is judged unit by unit (a cell, or a run for the second test
// of claim c) and the units are then counted. A unit's outcome is one of
// Holds, Against, Undecided or NoData; a test over the units gives Holds,
// Against or Undecided; a claim's verdict is Reproduced, NotReproduced or
// Inconclusive. The rules are stated in the Rule fields, in the words the
// report prints, and are the ones the code applies:
//
//   - A cell is judged only when every condition it compares has two or
//     more seeds (MinClaimSeeds): with one seed the interval leaves out the
//     seed-to-seed spread, so a cell with one seed is NoData, not evidence.
//   - A gain holds when its interval (the interval rule of interval.go)
//     lies above 0, is against when it lies below 0, and is undecided when
//     it contains 0 or has zero width.
//   - The majority rule over N units (every unit the claim applies to,
//     NoData included): the test holds when the units that hold are a
//     strict majority of N; it is against when the units against are at
//     least half of N, so that even if every undecided unit and every unit
//     without enough data held, they could not make a strict majority; it
//     is undecided otherwise, and when N is 0.
//   - A claim with one test takes its verdict from it (Holds: reproduced,
//     Against: not reproduced, Undecided: inconclusive); claim c, with two
//     tests, is reproduced when both hold, not reproduced when either is
//     against, and inconclusive otherwise.

// Verdicts of a claim.
const (
	Reproduced    = "reproduced"
	NotReproduced = "not reproduced"
	Inconclusive  = "inconclusive"
)

// Outcomes of one unit (cell or run) or one test of a claim.
const (
	Holds     = "holds"
	Against   = "against"
	Undecided = "undecided"
	NoData    = "not enough data"
	// Counted marks a cell whose cliff rate enters the comparison of
	// workflows (claim c) rather than being judged on its own.
	Counted = "counted"
)

// MinClaimSeeds is the fewest seeds a condition needs for a cell to be
// judged under a claim.
const MinClaimSeeds = 2

// The paper's workflows where IP's terminal cliffs concentrate (claim c).
var cliffWorkflows = []string{study.Voting, study.OrchWorkers}

// Evidence is one named number of a unit: an estimate with its interval,
// or a count written as text (Count non-empty).
type Evidence struct {
	Name   string
	Value  Estimate
	Signed bool   // a difference, printed with its sign
	Count  string // e.g. "2/3"; when set it is printed instead of Value
}

// ClaimUnit is the evidence of one unit judged under a claim: a cell (Run
// empty) or one run of a cell.
type ClaimUnit struct {
	Cell     CellKey
	Run      string
	Outcome  string // Holds, Against, Undecided or NoData
	Why      string // what decided the outcome, in plain words
	Evidence []Evidence
}

// Count is one labelled count a test rests on.
type Count struct {
	Label string
	N     int
}

// ClaimTest is one test of a claim over its units.
type ClaimTest struct {
	Name     string
	Rule     string  // the test's rule in plain words
	Counts   []Count // what the outcome rests on
	Outcome  string  // Holds, Against or Undecided
	Why      string  // the outcome's reason, computed
	Evidence []Evidence
	Units    []ClaimUnit
}

// CountOf returns the count with the given label, or -1.
func (t *ClaimTest) CountOf(label string) int {
	for _, c := range t.Counts {
		if c.Label == label {
			return c.N
		}
	}
	return -1
}

// Claim is one of the paper's claims compared with the study.
type Claim struct {
	ID        string // "a", "b", "c", "d"
	Statement string // the paper's claim
	Rule      string // how the tests combine into the verdict
	Tests     []ClaimTest
	Verdict   string
	Why       string // the verdict's reason, computed
}

// SARLGain is the gain of final accuracy of SP and IP over SA-RL in one
// cell (NaN values where the condition is absent).
type SARLGain struct {
	Cell                        CellKey
	SARLSeeds, SPSeeds, IPSeeds int
	SP, IP                      Estimate
}

// Headline is one of the paper's headline gains over SA-RL next to the
// study's cell that stands in for it.
type Headline struct {
	Paper     string  // the paper's cell, e.g. "1.7B math Eval-Opt IP"
	PaperGain float64 // its gain over SA-RL, as a fraction
	Cell      CellKey // the study's cell (empty when none matches)
	Condition string
	Found     bool     // the study has the cell and both conditions
	Gain      Estimate // the study's gain of final accuracy over SA-RL
	Why       string   // how the cell was matched, or why none was
}

// Claims is the study compared with the paper's four claims.
type Claims struct {
	Claims    []Claim
	Gains     []SARLGain // cells with SA-RL and SP or IP, in the study's cell order
	Headlines []Headline
	CI        float64
}

// paperScales are the paper's model sizes, smallest first; a study with
// three scales matches them by rank.
var paperScales = []string{"0.6B", "1.7B", "4B"}

// paperHeadlines are the paper's two headline gains over SA-RL.
var paperHeadlines = []struct {
	scale    int // index into paperScales
	workflow string
	cond     string
	gain     float64
	label    string
}{
	{1, study.EvalOpt, study.IP, 0.101, "1.7B math Eval-Opt IP"},
	{2, study.Voting, study.SP, -0.103, "4B math Voting SP"},
}

// CompareClaims computes the comparison of the study with the paper's
// four claims, the gains over SA-RL per cell and the paper's headline
// gains next to the study's cells.
func CompareClaims(st *Study) *Claims {
	p := st.Params
	cl := &Claims{CI: p.CI}
	cl.Claims = []Claim{
		single("a", "Multi-agent RL (the better of SP and IP) beats the base workflow in most cells.", claimA(st)),
		single("b", "IP reaches a higher ceiling than SP in more cells than not.", claimB(st)),
		claimC(st),
		single("d", "Under SP, a role is captured by the role with the largest gradient mass: its format compliance falls while its outputs converge on the dominant role's (the aggregator's output length is the paper's diagnostic).", claimD(st)),
	}
	cl.Gains = sarlGains(st)
	cl.Headlines = headlines(st, cl.Gains)
	return cl
}

// single makes a claim of one test.
func single(id, statement string, t ClaimTest) Claim {
	c := Claim{ID: id, Statement: statement, Tests: []ClaimTest{t},
		Rule: "The verdict is the test's outcome: reproduced when it holds, not reproduced when it is against, inconclusive when it is undecided."}
	c.Verdict = verdictOf(t.Outcome)
	c.Why = t.Why
	return c
}

func verdictOf(outcome string) string {
	switch outcome {
	case Holds:
		return Reproduced
	case Against:
		return NotReproduced
	}
	return Inconclusive
}

// majorityRule is the rule text of a majority test over units.
func majorityRule(units string) string {
	return fmt.Sprintf("The test holds when the %[1]s that hold are a strict majority of all %[1]s it applies to "+
		"(those without enough data included); it is against when the %[1]s against are at least half of them, "+
		"so that the claim could not hold in a strict majority even if every undecided %[2]s and every %[2]s without enough data held; "+
		"otherwise, and when there is no %[2]s, it is undecided.", units, strings.TrimSuffix(units, "s"))
}

// majority applies the majority rule to judged units and fills the test's
// counts, outcome and reason.
func majority(t *ClaimTest, units string) {
	var h, a, u, d int
	for _, x := range t.Units {
		switch x.Outcome {
		case Holds:
			h++
		case Against:
			a++
		case Undecided:
			u++
		default:
			d++
		}
	}
	n := h + a + u + d
	t.Counts = []Count{{Holds, h}, {Against, a}, {Undecided, u}, {NoData, d}, {"judged", h + a + u}, {"total", n}}
	switch {
	case n == 0:
		t.Outcome = Undecided
		t.Why = fmt.Sprintf("No %s to judge.", units)
	case 2*h > n:
		t.Outcome = Holds
		t.Why = fmt.Sprintf("It holds in %d of %d %s, a strict majority.", h, n, units)
	case 2*a >= n:
		t.Outcome = Against
		t.Why = fmt.Sprintf("It is against in %d of %d %s, so it could not hold in a strict majority.", a, n, units)
	default:
		t.Outcome = Undecided
		t.Why = fmt.Sprintf("It holds in %d of %d %s and is against in %d; the %d undecided and %d without enough data could tip it either way.", h, n, units, a, u, d)
	}
}

// fewSeeds returns the conditions (name and seeds) with fewer than
// MinClaimSeeds seeds, as text, or "" when every one has enough.
func fewSeeds(cs ...*CondSummary) string {
	var out []string
	for _, c := range cs {
		if c != nil && c.Seeds < MinClaimSeeds {
			out = append(out, fmt.Sprintf("%s has %d seed", c.Condition, c.Seeds))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, ", ") + fmt.Sprintf("; a cell is judged only with %d or more seeds per condition, since one seed says nothing of the seed-to-seed spread", MinClaimSeeds)
}

// judgeGain is the outcome of a gain: its interval above 0, below 0, or
// containing 0 (or of zero width, or missing).
func judgeGain(e Estimate) (string, string) {
	switch {
	case e.Excludes(0) && e.Value > 0:
		return Holds, "the interval lies above 0"
	case e.Excludes(0) && e.Value < 0:
		return Against, "the interval lies below 0"
	case !e.HasCI():
		return Undecided, "no interval could be computed"
	case e.Degenerate():
		return Undecided, "the interval has zero width"
	}
	return Undecided, "the interval contains 0"
}

func seedsText(cs *CondSummary) string {
	if cs == nil {
		return "–"
	}
	return fmt.Sprint(cs.Seeds)
}

// claimA: the better of SP and IP (higher mean final accuracy; SP on a
// tie) against base, on final accuracy.
func claimA(st *Study) ClaimTest {
	t := ClaimTest{Name: "better multi-agent condition vs base, final accuracy",
		Rule: "In each cell with base and SP or IP, the better multi-agent condition is the one with the higher final accuracy (mean over seeds; SP on a tie). " +
			"The cell holds when the interval of its final accuracy minus base's lies above 0, is against when it lies below 0, and is undecided otherwise. " +
			"Choosing the better condition on the same data favours the claim slightly. " + majorityRule("cells")}
	for _, c := range st.Cells {
		base, sp, ip := c.Cond(study.Base), c.Cond(study.SP), c.Cond(study.IP)
		if base == nil || (sp == nil && ip == nil) {
			continue
		}
		best := sp
		if sp == nil || (ip != nil && ip.Final.Value > sp.Final.Value) {
			best = ip
		}
		u := ClaimUnit{Cell: c.Key, Evidence: []Evidence{
			{Name: "seeds base/SP/IP", Count: seedsText(base) + "/" + seedsText(sp) + "/" + seedsText(ip)},
			{Name: "base final", Value: base.Final},
			{Name: "SP final", Value: finalOf(sp)},
			{Name: "IP final", Value: finalOf(ip)},
			{Name: "better", Count: best.Condition},
			{Name: "gain over base", Value: best.GainBaseFinal, Signed: true},
		}}
		if why := fewSeeds(base, sp, ip); why != "" {
			u.Outcome, u.Why = NoData, why
		} else {
			o, why := judgeGain(best.GainBaseFinal)
			u.Outcome, u.Why = o, best.Condition+" − base: "+why
		}
		t.Units = append(t.Units, u)
	}
	majority(&t, "cells")
	if len(t.Units) == 0 {
		t.Why = "No cell has base and a multi-agent condition (SP or IP), so the claim cannot be judged."
	}
	return t
}

func finalOf(c *CondSummary) Estimate {
	if c == nil {
		return noCI(math.NaN())
	}
	return c.Final
}

// claimB: IP's ceiling against SP's in each cell with both.
func claimB(st *Study) ClaimTest {
	t := ClaimTest{Name: "IP ceiling vs SP ceiling",
		Rule: "In each cell with SP and IP, the cell holds when the interval of IP's ceiling minus SP's (paired over problems, interval rule of *Definitions*) lies above 0, is against when it lies below 0, and is undecided otherwise. " +
			"A ceiling is a maximum over noisy validations; both conditions share that bias, so their difference is compared. " + majorityRule("cells")}
	for _, c := range st.Cells {
		sp, ip := c.Cond(study.SP), c.Cond(study.IP)
		if sp == nil || ip == nil {
			continue
		}
		g := gain(ip, sp, 1, st.Params)
		u := ClaimUnit{Cell: c.Key, Evidence: []Evidence{
			{Name: "seeds SP/IP", Count: seedsText(sp) + "/" + seedsText(ip)},
			{Name: "SP ceiling", Value: sp.Ceiling},
			{Name: "IP ceiling", Value: ip.Ceiling},
			{Name: "IP − SP ceiling", Value: g, Signed: true},
		}}
		if why := fewSeeds(sp, ip); why != "" {
			u.Outcome, u.Why = NoData, why
		} else {
			o, why := judgeGain(g)
			u.Outcome, u.Why = o, "IP − SP: "+why
		}
		t.Units = append(t.Units, u)
	}
	majority(&t, "cells")
	if len(t.Units) == 0 {
		t.Why = "No cell has both SP and IP, so the claim cannot be judged."
	}
	return t
}

// seedEstimate is the mean of per-seed (or per-run) values with the seed
// part of the interval rule: a t interval over the values (seeds − 1
// degrees of freedom), clamped to [lo, hi]; no interval with one value.
func seedEstimate(vals []float64, ci, lo, hi float64) Estimate {
	if len(vals) == 0 {
		return noCI(math.NaN())
	}
	s := &sampling{seeds: len(vals)}
	var mean float64
	for _, v := range vals {
		s.perSeed = append(s.perSeed, []float64{v})
		mean += v / float64(len(vals))
	}
	part, ok := s.seedPart(0)
	if !ok {
		return noCI(mean)
	}
	return tInterval(mean, []varPart{part}, ci, lo, hi)
}

// condRuns returns the run views of a condition in a cell, by seed.
func condRuns(st *Study, key CellKey, cond string) []*RunResult {
	var out []*RunResult
	for _, r := range st.Runs {
		if r.Cell == key && r.Condition == cond {
			out = append(out, r)
		}
	}
	return out
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

func b01(b bool) float64 {
	if b {
		return 1
	}
	return 0
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
	p := st.Params
	conc := ClaimTest{Name: "IP cliffs concentrate in voting and orch-workers",
		Rule: "In each cell with IP runs, the cliff rate is the fraction of IP seeds with a terminal cliff, with its interval by the rule of *Definitions* (the cliff test rerun on resampled problems gives the problem part). " +
			"Over the cells judged (two or more IP seeds), the mean cliff rate of the voting and orch-workers cells is compared with that of the other workflows' cells (the interval of a mean adds the cells' parts; the difference's interval is Welch–Satterthwaite's). " +
			"The test holds when the interval of the difference lies above 0; it is against when it lies below 0, or when no IP run judged fell off a cliff (the cliffs the claim is about did not occur); " +
			"it is undecided otherwise (a zero-width interval never counts), and when either group has no cell."}
	prec := ClaimTest{Name: "IP cliffs preceded by same-role gradient amplification",
		Rule: "Each IP run judged that fell off a cliff holds when a role's gradient norm rose above amp_k × its early median while the mean cosine between its same-role agents' gradients was above amp_cos, " +
			"at or before the cliff's fall (the cosine exists only for roles with two or more agents); it is against when no role did, and has not enough data without step rows. " + majorityRule("cliff runs")}
	var rateV, rateO []Estimate
	var runsV, runsO, cliffsV, cliffsO, noData int
	for _, c := range st.Cells {
		ip := c.Cond(study.IP)
		if ip == nil {
			continue
		}
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
			noData += ip.Seeds
			conc.Units = append(conc.Units, u)
			continue
		}
		u.Outcome, u.Why = Counted, "its cliff rate enters the comparison of the workflows"
		if slices.Contains(cliffWorkflows, c.Key.Workflow) {
			rateV = append(rateV, ip.CliffRate)
			runsV += ip.Seeds
			cliffsV += ip.CliffRuns
		} else {
			rateO = append(rateO, ip.CliffRate)
			runsO += ip.Seeds
			cliffsO += ip.CliffRuns
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
	rv, ro := meanEstimate(rateV, p.CI), meanEstimate(rateO, p.CI)
	diff := DifferenceInterval(rv, ro, p.CI)
	if diff.HasCI() { // a difference of rates lies in [-1, 1]
		diff.Lo, diff.Hi = math.Max(-1, diff.Lo), math.Min(1, diff.Hi)
	}
	conc.Counts = []Count{{CountRunsV, runsV}, {CountCliffsV, cliffsV}, {CountRunsO, runsO}, {CountCliffsO, cliffsO}, {CountNoData, noData}}
	conc.Evidence = []Evidence{
		{Name: fmt.Sprintf("mean cliff rate, voting and orch-workers (%d cells)", len(rateV)), Value: rv},
		{Name: fmt.Sprintf("mean cliff rate, other workflows (%d cells)", len(rateO)), Value: ro},
		{Name: "difference", Value: diff, Signed: true}}
	switch {
	case runsV+runsO > 0 && cliffsV+cliffsO == 0:
		conc.Outcome = Against
		conc.Why = fmt.Sprintf("None of the %d IP runs judged fell off a cliff.", runsV+runsO)
	case len(rateV) == 0:
		conc.Outcome, conc.Why = Undecided, "No voting or orch-workers cell with IP was judged."
	case len(rateO) == 0:
		conc.Outcome, conc.Why = Undecided, fmt.Sprintf("%d of %d IP runs judged in voting and orch-workers fell off a cliff, but no cell of another workflow with IP was judged to compare with.", cliffsV, runsV)
	default:
		o, why := judgeGain(diff)
		conc.Outcome = o
		conc.Why = fmt.Sprintf("%d of %d IP runs in voting and orch-workers fell off a cliff, %d of %d in other workflows; for the difference of mean cliff rates %s.", cliffsV, runsV, cliffsO, runsO, why)
	}
	majority(&prec, "cliff runs")
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

// captured reports whether a run has role-capture comparisons and whether
// any role was captured, and which roles were.
func captured(r *RunResult) (judged, yes bool, roles []string) {
	for _, c := range r.Capture {
		judged = true
		if c.Captured {
			yes = true
			roles = append(roles, c.Role+"→"+c.Dominant)
		}
	}
	return judged, yes, roles
}

// aggregatorLength returns the ratio of the aggregator's mean output
// length at the last validation to that at the first, from the run's
// evals rows; ok is false without two validations of the role.
func aggregatorLength(r *RunResult) (float64, bool) {
	var first, last float64
	n := 0
	for _, e := range r.Evals() {
		if e.Role != study.Aggregator || math.IsNaN(e.MeanLen) {
			continue
		}
		if n == 0 {
			first = e.MeanLen
		}
		last = e.MeanLen
		n++
	}
	if n < 2 || first <= 0 {
		return 0, false
	}
	return last / first, true
}

// claimD: role capture under SP, cell by cell.
func claimD(st *Study) ClaimTest {
	p := st.Params
	t := ClaimTest{Name: "role capture under SP",
		Rule: "In each cell whose SP runs share one policy among two or more roles, an SP run counts as captured when a role's format compliance fell by at least capture_format_drop from the first to the last validation " +
			"while its outputs converged on those of the role with the largest mean gradient share (see *Role capture*). " +
			"The cell holds when a strict majority of its SP runs were captured, is against when a strict majority were not, and is undecided on a tie; it has not enough data with fewer than two SP runs with capture comparisons. " +
			"Beside it: the capture rate (fraction of SP runs captured, with a t interval over seeds, the seed part of the interval rule, since capture is not recomputed on resampled problems) " +
			"and, as the paper's diagnostic, the aggregator's output length at the last validation over that at the first (mean over seeds, same interval) for SP and for IP. " + majorityRule("cells")}
	byWF := map[string][2]int{}
	for _, c := range st.Cells {
		sp := c.Cond(study.SP)
		if sp == nil {
			continue
		}
		runs := condRuns(st, c.Key, study.SP)
		var ind, lenSP, lenIP []float64
		roleSet := map[string]bool{}
		shared := false
		for _, r := range runs {
			if len(r.Dominance) > 0 {
				shared = true
			}
			if judged, yes, roles := captured(r); judged {
				ind = append(ind, b01(yes))
				for _, x := range roles {
					roleSet[x] = true
				}
			}
			if v, ok := aggregatorLength(r); ok {
				lenSP = append(lenSP, v)
			}
		}
		if !shared {
			continue // no policy of two or more roles: the claim does not apply
		}
		for _, r := range condRuns(st, c.Key, study.IP) {
			if v, ok := aggregatorLength(r); ok {
				lenIP = append(lenIP, v)
			}
		}
		k := int(math.Round(sum(ind)))
		roles := slices.Sorted(maps.Keys(roleSet))
		u := ClaimUnit{Cell: c.Key, Evidence: []Evidence{
			{Name: "SP runs captured", Count: fmt.Sprintf("%d/%d", k, len(ind))},
			{Name: "capture rate", Value: seedEstimate(ind, p.CI, 0, 1)},
			{Name: "captured → dominant", Count: dashIfEmpty(strings.Join(roles, ", "))},
			{Name: "aggregator length last/first, SP", Value: seedEstimate(lenSP, p.CI, 0, math.Inf(1))},
			{Name: "aggregator length last/first, IP", Value: seedEstimate(lenIP, p.CI, 0, math.Inf(1))},
		}}
		switch {
		case len(ind) < MinClaimSeeds:
			u.Outcome = NoData
			u.Why = fmt.Sprintf("%s with capture comparisons; a cell is judged only with %d or more", plural(len(ind), "SP run"), MinClaimSeeds)
		case 2*k > len(ind):
			u.Outcome, u.Why = Holds, "a strict majority of SP runs captured"
		case 2*k < len(ind):
			u.Outcome, u.Why = Against, "a strict majority of SP runs not captured"
		default:
			u.Outcome, u.Why = Undecided, "as many SP runs captured as not"
		}
		w := byWF[c.Key.Workflow]
		w[1]++
		if u.Outcome == Holds {
			w[0]++
		}
		byWF[c.Key.Workflow] = w
		t.Units = append(t.Units, u)
	}
	majority(&t, "cells")
	if len(t.Units) == 0 {
		t.Why = "No cell has SP runs whose policy is shared by two or more roles, so the claim cannot be judged."
	} else {
		var parts []string
		for _, wf := range slices.Sorted(maps.Keys(byWF)) {
			parts = append(parts, fmt.Sprintf("%s %d of %d", wf, byWF[wf][0], byWF[wf][1]))
		}
		t.Why += " Cells that hold, by workflow: " + strings.Join(parts, ", ") + "."
	}
	return t
}

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
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

// sarlGains lists the gains of SP and IP over SA-RL per cell.
func sarlGains(st *Study) []SARLGain {
	var out []SARLGain
	for _, c := range st.Cells {
		sarl, sp, ip := c.Cond(study.SARL), c.Cond(study.SP), c.Cond(study.IP)
		if sarl == nil || (sp == nil && ip == nil) {
			continue
		}
		g := SARLGain{Cell: c.Key, SARLSeeds: sarl.Seeds, SP: noCI(math.NaN()), IP: noCI(math.NaN())}
		if sp != nil {
			g.SP, g.SPSeeds = sp.GainSARLFinal, sp.Seeds
		}
		if ip != nil {
			g.IP, g.IPSeeds = ip.GainSARLFinal, ip.Seeds
		}
		out = append(out, g)
	}
	return out
}

// headlines matches the paper's headline cells: the scale by rank among
// the study's three scales (0.6B, 1.7B, 4B), the task by a name containing
// "math", the workflow and condition by name.
func headlines(st *Study, gains []SARLGain) []Headline {
	scales, tasks := map[string]bool{}, map[string]bool{}
	for _, c := range st.Cells {
		scales[c.Key.Scale] = true
		tasks[c.Key.Task] = true
	}
	sl := slices.Collect(maps.Keys(scales))
	sort.Slice(sl, func(i, j int) bool { return ScaleLess(sl[i], sl[j]) })
	var mathTasks []string
	for _, t := range slices.Sorted(maps.Keys(tasks)) {
		if strings.Contains(strings.ToLower(t), "math") {
			mathTasks = append(mathTasks, t)
		}
	}
	var out []Headline
	for _, ph := range paperHeadlines {
		h := Headline{Paper: ph.label, PaperGain: ph.gain, Condition: ph.cond, Gain: noCI(math.NaN())}
		switch {
		case len(sl) != len(paperScales):
			h.Why = fmt.Sprintf("the study has %s, not %d, so the paper's %s cannot be matched by rank", plural(len(sl), "scale"), len(paperScales), paperScales[ph.scale])
		case len(mathTasks) != 1:
			h.Why = fmt.Sprintf("the study has %s whose name contains math, not one, so the paper's math task cannot be matched", plural(len(mathTasks), "task"))
		default:
			h.Cell = CellKey{Workflow: ph.workflow, Task: mathTasks[0], Scale: sl[ph.scale]}
			h.Why = fmt.Sprintf("scale %s stands in for %s, task %s for math", sl[ph.scale], paperScales[ph.scale], mathTasks[0])
			for _, g := range gains {
				if g.Cell != h.Cell {
					continue
				}
				e := g.SP
				if ph.cond == study.IP {
					e = g.IP
				}
				if !math.IsNaN(e.Value) {
					h.Found, h.Gain = true, e
				}
			}
			if !h.Found {
				h.Why += fmt.Sprintf("; the study has no %s and SA-RL in cell %s", ph.cond, h.Cell)
			}
		}
		out = append(out, h)
	}
	return out
}
