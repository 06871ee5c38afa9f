package analysis

import (
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
// Inconclusive. The results are data only (outcomes, reasons, counts and
// the estimates they rest on); package analysis/report states the rules
// and writes every sentence. The rules the code applies:
//
//   - A cell is judged only when every condition it compares has two or
//     more seeds (MinClaimSeeds): with one seed the interval leaves out the
//     seed-to-seed spread, so a cell with one seed is NoData, not evidence.
//   - A gain holds when its interval (the interval rule of interval.go)
//     lies above 0, is against when it lies below 0, and is undecided when
//     it contains 0 or has zero width.
//   - The majority rule over N units (every unit the claim applies to,
//     NoData included): the test holds when the units that hold are a
//     strict majority of N; by the power rule (exact.go) it is against
//     only when a one-sided exact binomial test finds the units against
//     significantly more than half of N (p below alpha = 1 - ci), so that
//     a few units against cannot refute; it is undecided otherwise, and
//     the report prints how many units against would have refuted it
//     (Test.RefuteAt).
//   - A test with no unit judged (none the claim applies to, or none with
//     enough data) is NotTestable: the study lacks what the claim needs.
//   - A claim with one test takes its verdict from it (Holds: reproduced,
//     Against: refuted, NotTestable: not testable at this budget,
//     Undecided: inconclusive); claim c, with two tests, is refuted when
//     either is against, not testable when neither is against and either
//     is not testable, reproduced when both hold, and inconclusive
//     otherwise.
//   - Claim c's concentration test is NotTestable when fewer than half of
//     the IP runs judged have a late phase (LatePhase): a terminal cliff
//     needs validations after the ceiling and learning rate left to fall
//     with.
//   - A test that rests on a detector without a shown positive control
//     (PositiveControls) is NotTestable: its units are still judged and
//     shown, but they cannot decide the claim.
//   - Ties are ties: means of fractions are compared with CompareMeans.

// Verdict is a claim's verdict.
type Verdict int

// Verdicts of a claim.
const (
	Inconclusive Verdict = iota
	Reproduced
	// Refuted: the study had the conditions the claim needs and the claim
	// did not hold.
	Refuted
	// NotTestable: the study lacks the conditions the claim needs (no
	// late phase, no unit with enough data, a detector not shown to fire
	// in this regime), so it says nothing of the claim at this budget.
	NotTestable
)

// Outcome is the outcome of one unit (cell or run) or one test of a claim.
type Outcome int

// Outcomes of a unit or a test.
const (
	Undecided Outcome = iota
	Holds
	Against
	NoData
	// Counted marks a cell whose cliff rate enters the comparison of
	// workflows (claim c) rather than being judged on its own.
	Counted
	// Untestable marks a test (or a unit) the study cannot decide for want
	// of the conditions it needs.
	Untestable
)

// Reason is what decided an outcome or a verdict.
type Reason int

// Reasons of outcomes and verdicts. Those of a gain's interval come first;
// then a unit's, a test's and a claim's.
const (
	NoReason Reason = iota

	// A gain's interval (or a difference's).
	AboveZero    // the interval lies above 0
	BelowZero    // the interval lies below 0
	NoInterval   // no interval could be computed
	ZeroWidth    // the interval has zero width
	ContainsZero // the interval contains 0

	// A unit.
	FewSeeds        // a condition compared has fewer than MinClaimSeeds seeds (Judgement.Few)
	FewCaptureRuns  // claim d: fewer than MinClaimSeeds SP runs with capture comparisons
	MostCaptured    // claim d: a strict majority of SP runs captured
	MostNotCaptured // claim d: significantly fewer than half of the SP runs captured (one-sided binomial)
	EvenCaptured    // claim d: not a strict majority captured, and not significantly fewer than half
	EntersRates     // claim c: the cell's cliff rate enters the comparison of workflows
	NoStepRows      // claim c: a cliff run without step rows
	AmplifiedFirst  // claim c: a role amplified at or before the cliff's fall
	NotAmplified    // claim c: no role amplified at or before the cliff's fall

	// A test.
	NoUnits      // nothing to judge
	Majority     // the units that hold are a strict majority
	HalfAgainst  // the units against are significantly more than half (one-sided binomial)
	Split        // neither: the rest could tip it either way
	NoCliffs     // claim c: no IP run judged fell off a cliff
	NoCliffCell  // claim c: no voting or orch-workers cell with IP was judged
	NoOtherCell  // claim c: no cell of another workflow with IP was judged
	RateInterval // claim c: decided by the interval of the difference of rates (Concentration.DiffReason)
	NoneJudged   // no unit had enough data
	NoLatePhase  // claim c: fewer than half the IP runs judged have a late phase
	NoCliffRuns  // claim c: no IP run judged fell off a cliff, so no run to test for amplification
	NoSharedCell // claim d: no cell's SP policy is shared by two or more roles
	NoValueCell  // claim d: every cell it applies to has a supervisor that adds no value at base
	NoControl    // the detector the test rests on has no shown positive control (PositiveControls)

	// A verdict of claim c.
	NoIPCell      // no cell has IP runs
	BothHold      // both tests hold
	EitherAgainst // a test is against
	EitherUntest  // no test is against and one is not testable
	Mixed         // otherwise
)

// MinClaimSeeds is the fewest seeds a condition needs for a cell to be
// judged under a claim.
const MinClaimSeeds = 2

// cliffWorkflows are where claim c puts IP's terminal cliffs: the
// workflows whose stages run several agents of the same role (the
// registry's study.SameRoleWorkflows; the paper's voting and
// orch-workers), so a new such workflow falls on that side of the rule
// without being named (a workflow file's too, once a spec registered it).
func cliffWorkflows() []string { return study.SameRoleWorkflows() }

// SameRoleWorkflowsText names claim c's workflows (cliffWorkflows) as
// prose, the last two joined by conj ("and", "or").
func SameRoleWorkflowsText(conj string) string { return joinNames(cliffWorkflows(), conj) }

// OneAgentPerRoleWorkflowsText names claim c's comparison workflows
// (study.OneAgentPerRoleWorkflows) as prose, joined like
// SameRoleWorkflowsText.
func OneAgentPerRoleWorkflowsText(conj string) string {
	return joinNames(study.OneAgentPerRoleWorkflows(), conj)
}

// joinNames writes names as prose, the last two joined by conj.
func joinNames(ws []string, conj string) string {
	n := len(ws)
	if n < 2 {
		return strings.Join(ws, "")
	}
	return strings.Join(ws[:n-1], ", ") + " " + conj + " " + ws[n-1]
}

// CondSeeds is a condition with its number of seeds.
type CondSeeds struct {
	Condition string
	Seeds     int
}

// Judgement is the outcome of one unit and what decided it.
type Judgement struct {
	Outcome Outcome
	Reason  Reason
	Few     []CondSeeds // the conditions with too few seeds (Reason FewSeeds)
}

// Tally counts the outcomes of a test's units: Counted units count as
// NoData.
type Tally struct {
	Holds, Against, Undecided, NoData int
}

// Judged is the number of units judged (with enough data).
func (t Tally) Judged() int { return t.Holds + t.Against + t.Undecided }

// Total is the number of units the test applies to.
func (t Tally) Total() int { return t.Judged() + t.NoData }

// Test is the outcome of one test of a claim over its units.
type Test struct {
	Outcome Outcome // Holds, Against or Undecided
	Reason  Reason
	// Tally counts the units of a majority test; it is zero for claim c's
	// concentration test, which compares rates and keeps its own counts.
	Tally Tally
	// RefuteAt is, for a majority test, the fewest units against (of all
	// it applies to) with which it would be against: the power rule's
	// smallest detectable shortfall; 0 when no count could refute.
	RefuteAt int
}

// BetterClaim is claim a: the better multi-agent condition (of SP and IP)
// against base, cell by cell, on final accuracy.
type BetterClaim struct {
	Verdict Verdict
	Test    Test
	Cells   []BetterCell
	NoBase  bool // the study has no base runs at all
}

// BetterCell is one cell of claim a.
type BetterCell struct {
	Cell CellKey
	Judgement
	BaseSeeds, SPSeeds, IPSeeds int      // 0 when the condition is absent
	BaseFinal, SPFinal, IPFinal Estimate // final accuracy, NaN when absent
	Better                      string   // the better multi-agent condition (BetterMultiAgent)
	Gain                        Estimate // its final accuracy minus base's
}

// CeilingClaim is claim b: IP's ceiling against SP's in each cell with both.
type CeilingClaim struct {
	Verdict Verdict
	Test    Test
	Cells   []CeilingCell
}

// CeilingCell is one cell of claim b.
type CeilingCell struct {
	Cell CellKey
	Judgement
	SPSeeds, IPSeeds     int
	SPCeiling, IPCeiling Estimate
	Diff                 Estimate // IP's ceiling minus SP's
}

// CliffClaim is claim c: IP's terminal cliffs concentrate in voting and
// orch-workers and are preceded by same-role gradient amplification.
type CliffClaim struct {
	Verdict       Verdict
	Reason        Reason // NoIPCell, BothHold, EitherAgainst or Mixed
	Concentration Concentration
	Amplification AmplificationTest
}

// Concentration is claim c's first test: the mean cliff rate of the
// voting and orch-workers cells (V) against that of the other workflows'
// cells (O), over the cells judged.
type Concentration struct {
	Test
	Cells          []CliffCell
	RunsV, CliffsV int // IP runs and those with a cliff in the V cells judged
	RunsO, CliffsO int // the same in the O cells judged
	NoDataRuns     int // IP runs in cells without enough data
	CellsV, CellsO int // cells judged
	RateV, RateO   Estimate
	Diff           Estimate // RateV − RateO, clamped to [-1, 1]
	DiffReason     Reason   // how Diff's interval stands against 0
	// ExactV and ExactO are the pooled cliff counts of the V and O cells
	// judged with their exact (Clopper–Pearson) intervals.
	ExactV, ExactO Rate
	LateRuns       int     // IP runs judged with a late phase (LatePhaseOf)
	LRShare        float64 // the largest second-half learning-rate share of those runs, NaN when none has step rows
}

// CliffCell is one cell with IP runs of claim c.
type CliffCell struct {
	Cell CellKey
	Judgement
	CliffRuns, Seeds int      // IP runs with a cliff, of all IP runs
	Rate             Estimate // the cliff rate
	Amplified        int      // cliff runs preceded by amplification
	LateRuns         int      // IP runs with a late phase (LatePhaseOf)
	LRShare          float64  // the largest second-half learning-rate share of its IP runs, NaN without step rows
}

// AmplificationTest is claim c's second test: each IP run judged that fell
// off a cliff.
type AmplificationTest struct {
	Test
	Runs []CliffRun
}

// CliffRun is one IP run with a cliff, of a cell judged.
type CliffRun struct {
	Cell CellKey
	Run  string
	Judgement
	FallStep       int64
	FirstAmplified int64 // the first amplified step of any role, -1 when none
}

// CaptureClaim is claim d: role capture under SP, cell by cell.
type CaptureClaim struct {
	Verdict    Verdict
	Test       Test
	Cells      []CaptureCell
	ByWorkflow []WorkflowTally // the cells that hold per workflow, by name
	Pooled     Rate            // SP runs captured of those with capture comparisons, over the cells, exact interval
	Excluded   []CellKey       // cells left out: their supervisor adds no value at base (SupervisorRule)
	Alpha      float64         // 1 - ci, the level of the cells' binomial tests
}

// CaptureCell is one cell of claim d.
type CaptureCell struct {
	Cell CellKey
	Judgement
	Captured, Judged int        // SP runs captured, of those with capture comparisons
	Rate             Estimate   // capture rate, t interval over seeds
	Exact            Rate       // the same count with its exact (Clopper–Pearson) interval
	Pairs            []RolePair // captured roles and their dominant roles, sorted
	LenSP, LenIP     Estimate   // the aggregator's length at the last validation over the first
	// P is the one-sided exact binomial p-value that fewer than half of
	// the SP runs are captured (NaN without runs): the cell is against only
	// when it is below alpha. Detectable is the smallest shortfall below
	// one half that test could detect with the cell's runs (NaN: none).
	P, Detectable float64
}

// RolePair is a captured role and the role it was captured by.
type RolePair struct {
	Role, Dominant string
}

// WorkflowTally counts the cells of a workflow that hold.
type WorkflowTally struct {
	Workflow     string
	Holds, Cells int
}

// SARLGain is the gain of final accuracy of SP and IP over SA-RL in one
// cell (NaN values where the condition is absent).
type SARLGain struct {
	Cell                        CellKey
	SARLSeeds, SPSeeds, IPSeeds int
	SP, IP                      Estimate
}

// HeadlineMatch says how a paper's headline cell was matched.
type HeadlineMatch int

// Matches of a headline cell.
const (
	// Matched: the study's scale of the paper's rank and its one math task.
	Matched HeadlineMatch = iota
	// ScalesUnmatched: the study has not as many scales as the paper.
	ScalesUnmatched
	// TaskUnmatched: the study has not exactly one task named like math.
	TaskUnmatched
)

// Headline is one of the paper's headline gains over SA-RL next to the
// study's cell that stands in for it.
type Headline struct {
	PaperScale    string  // the paper's model size, one of PaperScales
	PaperWorkflow string  // the paper's workflow, by the study's name
	Condition     string  // the paper's condition, by the study's name
	PaperGain     float64 // its gain over SA-RL, as a fraction
	Match         HeadlineMatch
	Scales        int      // the study's scales
	MathTasks     int      // the study's tasks whose name contains math
	Cell          CellKey  // the study's cell (empty unless Matched)
	Found         bool     // the study has the cell and both conditions
	Gain          Estimate // the study's gain of final accuracy over SA-RL
}

// Claims is the study compared with the paper's four claims.
type Claims struct {
	Better   BetterClaim  // claim a
	Ceiling  CeilingClaim // claim b
	Cliffs   CliffClaim   // claim c
	Capture  CaptureClaim // claim d
	Collapse []CollapseGroup
	Gains    []SARLGain // cells with SA-RL and SP or IP, in the study's cell order
	// Supervisors is the supervisor value at base of each cell with a
	// supervisory role (supervisor.go); claims c and d leave out the cells
	// whose supervisor adds none.
	Supervisors []SupervisorValue
	Headlines   []Headline
	CI          float64
	// Late is claims c and d under the late-training rules (claims_late.go),
	// set when the study has a late phase (LateStudy); the report then
	// judges c and d by them instead of by Cliffs and Capture.
	Late *LateClaims
}

// PaperScales are the paper's model sizes, smallest first; a study with
// three scales matches them by rank.
var PaperScales = []string{"0.6B", "1.7B", "4B"}

// paperHeadlines are the paper's two headline gains over SA-RL.
var paperHeadlines = []struct {
	scale    int // index into PaperScales
	workflow string
	cond     string
	gain     float64
}{
	{1, study.EvalOpt, study.IP, 0.101},
	{2, study.Voting, study.SP, -0.103},
}

// CompareClaims computes the comparison of the study with the paper's
// four claims, the gains over SA-RL per cell and the paper's headline
// gains next to the study's cells.
func CompareClaims(st *Study) *Claims {
	cl := &Claims{CI: st.Params.CI}
	cl.Better = claimA(st)
	cl.Ceiling = claimB(st)
	cl.Cliffs = claimC(st)
	cl.Supervisors = SupervisorValues(st)
	valued := valuedCells(cl.Supervisors)
	cl.Capture = claimD(st, valued)
	cl.Collapse = CompareCollapse(st)
	cl.Gains = sarlGains(st)
	cl.Headlines = headlines(st, cl.Gains)
	if LateStudy(st) {
		cl.Late = compareLate(st, valued)
	}
	return cl
}

// verdictOf is the verdict of a claim of one test.
func verdictOf(outcome Outcome) Verdict {
	switch outcome {
	case Holds:
		return Reproduced
	case Against:
		return Refuted
	case Untestable:
		return NotTestable
	}
	return Inconclusive
}

// majority applies the majority rule to the outcomes of a test's units at
// level alpha.
func majority(outcomes []Outcome, alpha float64) Test {
	var t Tally
	for _, o := range outcomes {
		switch o {
		case Holds:
			t.Holds++
		case Against:
			t.Against++
		case Undecided:
			t.Undecided++
		default:
			t.NoData++
		}
	}
	n := t.Total()
	switch {
	case n == 0:
		return Test{Outcome: Untestable, Reason: NoUnits, Tally: t}
	case t.Judged() == 0:
		return Test{Outcome: Untestable, Reason: NoneJudged, Tally: t}
	case 2*t.Holds > n:
		return Test{Outcome: Holds, Reason: Majority, Tally: t}
	case Rejects(BinomGE(t.Against, n, 0.5), alpha):
		return Test{Outcome: Against, Reason: HalfAgainst, Tally: t, RefuteAt: refuteAt(n, alpha)}
	}
	return Test{Outcome: Undecided, Reason: Split, Tally: t, RefuteAt: refuteAt(n, alpha)}
}

// refuteAt is the fewest units against, of n, that make the majority rule
// against at alpha (0 when no count can).
func refuteAt(n int, alpha float64) int {
	for k := 0; k <= n; k++ {
		if Rejects(BinomGE(k, n, 0.5), alpha) {
			return k
		}
	}
	return 0
}

// fewSeeds returns the conditions with fewer than MinClaimSeeds seeds, as
// a NoData judgement, or ok false when every one has enough.
func fewSeeds(cs ...*CondSummary) (Judgement, bool) {
	var few []CondSeeds
	for _, c := range cs {
		if c != nil && c.Seeds < MinClaimSeeds {
			few = append(few, CondSeeds{c.Condition, c.Seeds})
		}
	}
	return Judgement{Outcome: NoData, Reason: FewSeeds, Few: few}, len(few) > 0
}

// judgeGain is the outcome of a gain: its interval above 0, below 0, or
// containing 0 (or of zero width, or missing).
func judgeGain(e Estimate) Judgement {
	switch {
	case e.Excludes(0) && e.Value > 0:
		return Judgement{Outcome: Holds, Reason: AboveZero}
	case e.Excludes(0) && e.Value < 0:
		return Judgement{Outcome: Against, Reason: BelowZero}
	case !e.HasCI():
		return Judgement{Outcome: Undecided, Reason: NoInterval}
	case e.Degenerate():
		return Judgement{Outcome: Undecided, Reason: ZeroWidth}
	}
	return Judgement{Outcome: Undecided, Reason: ContainsZero}
}

func seedsOf(cs *CondSummary) int {
	if cs == nil {
		return 0
	}
	return cs.Seeds
}

// BetterMultiAgent returns the cell's better multi-agent condition: of SP
// and IP, the one with the higher final accuracy (mean over seeds,
// compared by CompareMeans), SP on a tie; nil when the cell has neither.
func (c *CellResult) BetterMultiAgent() *CondSummary {
	sp, ip := c.Cond(study.SP), c.Cond(study.IP)
	if sp == nil || (ip != nil && CompareMeans(ip.Final.Value, sp.Final.Value) > 0) {
		return ip
	}
	return sp
}

// claimA: the better of SP and IP against base, on final accuracy.
func claimA(st *Study) BetterClaim {
	cl := BetterClaim{NoBase: true}
	var outcomes []Outcome
	for _, c := range st.Cells {
		base, sp, ip := c.Cond(study.Base), c.Cond(study.SP), c.Cond(study.IP)
		if base != nil {
			cl.NoBase = false
		}
		best := c.BetterMultiAgent()
		if base == nil || best == nil {
			continue
		}
		u := BetterCell{Cell: c.Key,
			BaseSeeds: base.Seeds, SPSeeds: seedsOf(sp), IPSeeds: seedsOf(ip),
			BaseFinal: base.Final, SPFinal: finalOf(sp), IPFinal: finalOf(ip),
			Better: best.Condition, Gain: best.GainBaseFinal}
		if j, few := fewSeeds(base, sp, ip); few {
			u.Judgement = j
		} else {
			u.Judgement = judgeGain(best.GainBaseFinal)
		}
		cl.Cells = append(cl.Cells, u)
		outcomes = append(outcomes, u.Outcome)
	}
	cl.Test = majority(outcomes, 1-st.Params.CI)
	cl.Verdict = verdictOf(cl.Test.Outcome)
	return cl
}

func finalOf(c *CondSummary) Estimate {
	if c == nil {
		return noCI(math.NaN())
	}
	return c.Final
}

// claimB: IP's ceiling against SP's in each cell with both.
func claimB(st *Study) CeilingClaim {
	var cl CeilingClaim
	var outcomes []Outcome
	for _, c := range st.Cells {
		sp, ip := c.Cond(study.SP), c.Cond(study.IP)
		if sp == nil || ip == nil {
			continue
		}
		g := gain(ip, sp, 1, st.Params)
		u := CeilingCell{Cell: c.Key, SPSeeds: sp.Seeds, IPSeeds: ip.Seeds,
			SPCeiling: sp.Ceiling, IPCeiling: ip.Ceiling, Diff: g}
		if j, few := fewSeeds(sp, ip); few {
			u.Judgement = j
		} else {
			u.Judgement = judgeGain(g)
		}
		cl.Cells = append(cl.Cells, u)
		outcomes = append(outcomes, u.Outcome)
	}
	cl.Test = majority(outcomes, 1-st.Params.CI)
	cl.Verdict = verdictOf(cl.Test.Outcome)
	return cl
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
