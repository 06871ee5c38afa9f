package analysis

import (
	"fmt"
	"math"
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
