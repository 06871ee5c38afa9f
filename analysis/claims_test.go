package analysis

import (
	"math"
	"slices"
	"testing"

	"github.com/marlowlab/marlow/analysis/analysistest"
	"github.com/marlowlab/marlow/harness/runlog"
)

// Curves at steps 0, 10, ..., 100 for the synthetic claims studies; the
// seed moves the last three validations by one problem in 40, so the seeds
// differ a little.
func flat(v float64) func(int) []float64 {
	return func(seed int) []float64 {
		out := make([]float64, 11)
		for i := range out {
			out[i] = v
		}
		return jitter(out, seed)
	}
}

// rise climbs linearly from b to e.
func rise(b, e float64) func(int) []float64 {
	return func(seed int) []float64 {
		out := make([]float64, 11)
		for i := range out {
			out[i] = b + (e-b)*float64(i)/10
		}
		return jitter(out, seed)
	}
}

// peak climbs from b to p at step 60 and falls back to e from step 70: a
// terminal cliff when p - e is large.
func peak(b, p, e float64) func(int) []float64 {
	return func(seed int) []float64 {
		out := make([]float64, 11)
		for i := range out {
			switch {
			case i <= 6:
				out[i] = b + (p-b)*float64(i)/6
			default:
				out[i] = e
			}
		}
		return jitter(out, seed)
	}
}

func jitter(c []float64, seed int) []float64 {
	for i := len(c) - 3; i < len(c); i++ {
		c[i] = math.Max(0, math.Min(1, c[i]+0.025*float64(seed%2)))
	}
	return c
}

type arm = analysistest.Arm

// cells returns the arms of cond in each workflow x scale of synth-math.
func cells(cond string, seeds int, curve func(int) []float64, wfs []string, scales []string, mod func(*arm)) []arm {
	var out []arm
	for _, wf := range wfs {
		for _, sc := range scales {
			a := arm{Workflow: wf, Cond: cond, Task: "synth-math", Scale: sc, Seeds: seeds, Curve: curve}
			if mod != nil {
				mod(&a)
			}
			out = append(out, a)
		}
	}
	return out
}

func join(groups ...[]arm) []arm {
	var out []arm
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

var (
	voting    = []string{"voting"}
	twoScales = []string{"s", "m"}
)

func captureMod(c analysistest.Capture) func(*arm) { return func(a *arm) { a.Capture = c } }

// judged is a unit's outcome and reason, as the tests compare them.
type judged struct {
	o Outcome
	r Reason
}

// claimResult is one claim's typed result in a shape the table compares:
// its verdict, each test, and each test's units.
type claimResult struct {
	verdict Verdict
	tests   []Test
	units   [][]judged
}

func unitsOf[U any](us []U, j func(U) Judgement) []judged {
	out := make([]judged, len(us))
	for i, u := range us {
		x := j(u)
		out[i] = judged{x.Outcome, x.Reason}
	}
	return out
}

// resultOf picks claim id ("a".."d") out of the comparison.
func resultOf(cl *Claims, id string) claimResult {
	r := resultOfTests(cl, id)
	for i := range r.tests {
		r.tests[i].RefuteAt = 0 // pinned by TestMajority
	}
	return r
}

func resultOfTests(cl *Claims, id string) claimResult {
	switch id {
	case "a":
		return claimResult{cl.Better.Verdict, []Test{cl.Better.Test},
			[][]judged{unitsOf(cl.Better.Cells, func(u BetterCell) Judgement { return u.Judgement })}}
	case "b":
		return claimResult{cl.Ceiling.Verdict, []Test{cl.Ceiling.Test},
			[][]judged{unitsOf(cl.Ceiling.Cells, func(u CeilingCell) Judgement { return u.Judgement })}}
	case "c":
		c := cl.Cliffs
		return claimResult{c.Verdict, []Test{c.Concentration.Test, c.Amplification.Test}, [][]judged{
			unitsOf(c.Concentration.Cells, func(u CliffCell) Judgement { return u.Judgement }),
			unitsOf(c.Amplification.Runs, func(u CliffRun) Judgement { return u.Judgement })}}
	}
	return claimResult{cl.Capture.Verdict, []Test{cl.Capture.Test},
		[][]judged{unitsOf(cl.Capture.Cells, func(u CaptureCell) Judgement { return u.Judgement })}}
}

// repeat is n copies of a unit's outcome and reason.
func repeat(n int, o Outcome, r Reason) []judged {
	out := make([]judged, n)
	for i := range out {
		out[i] = judged{o, r}
	}
	return out
}

func cat(groups ...[]judged) []judged {
	out := []judged{}
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// evenSplit is one cell of two SP seeds, the first captured and the
// second not.
func evenSplit() []*runlog.Run {
	var out []*runlog.Run
	for _, c := range []struct {
		capture analysistest.Capture
		seed    int
	}{{analysistest.Captured, 1}, {analysistest.NotCaptured, 2}} {
		runs := analysistest.Study(cells("sp", 2, rise(0.3, 0.5), voting, []string{"s"}, captureMod(c.capture))...)
		for _, r := range runs {
			if r.Manifest.SeedIndex == c.seed {
				out = append(out, r)
			}
		}
	}
	return out
}

// TestClaimVerdicts pins the typed results of the four claims, built from
// synthetic logs: each verdict of each claim, with its tests' outcomes,
// reasons and tallies and its units' outcomes and reasons.
func TestClaimVerdicts(t *testing.T) {
	amp := func(a *arm) { a.Amplify = true }
	none := []judged{}
	tests := []struct {
		name  string
		claim string // "a".."d"
		arms  []arm
		runs  []*runlog.Run // instead of arms, when set
		want  claimResult
	}{
		// a: the better of SP and IP against base
		{"a reproduced: SP and IP end far above base", "a", join(
			cells("base", 3, flat(0.2), voting, twoScales, nil),
			cells("sp", 3, rise(0.2, 0.7), voting, twoScales, nil),
			cells("ip", 3, rise(0.2, 0.6), voting, twoScales, nil)), nil,
			claimResult{Reproduced, []Test{{Holds, Majority, Tally{Holds: 2}, 0}}, [][]judged{repeat(2, Holds, AboveZero)}}},
		// the power rule: 2 cells of 2 against give a one-sided binomial p
		// of 0.25, too few to refute (TestMajority pins a refuting count)
		{"a inconclusive: both end far below base in two cells", "a", join(
			cells("base", 3, flat(0.7), voting, twoScales, nil),
			cells("sp", 3, rise(0.7, 0.2), voting, twoScales, nil),
			cells("ip", 3, rise(0.7, 0.25), voting, twoScales, nil)), nil,
			claimResult{Inconclusive, []Test{{Undecided, Split, Tally{Against: 2}, 0}}, [][]judged{repeat(2, Against, BelowZero)}}},
		{"a not testable: base has one seed", "a", join(
			cells("base", 1, flat(0.2), voting, twoScales, nil),
			cells("sp", 3, rise(0.2, 0.7), voting, twoScales, nil),
			cells("ip", 3, rise(0.2, 0.6), voting, twoScales, nil)), nil,
			claimResult{NotTestable, []Test{{Untestable, NoneJudged, Tally{NoData: 2}, 0}}, [][]judged{repeat(2, NoData, FewSeeds)}}},
		{"a inconclusive: no gain distinguishable from zero", "a", join(
			cells("base", 3, flat(0.4), voting, twoScales, nil),
			cells("sp", 3, flat(0.4), voting, twoScales, nil),
			cells("ip", 3, flat(0.4), voting, twoScales, nil)), nil,
			claimResult{Inconclusive, []Test{{Undecided, Split, Tally{Undecided: 2}, 0}}, [][]judged{repeat(2, Undecided, ContainsZero)}}},
		{"a not testable: no multi-agent condition", "a",
			cells("base", 3, flat(0.4), voting, twoScales, nil), nil,
			claimResult{NotTestable, []Test{{Untestable, NoUnits, Tally{}, 0}}, [][]judged{none}}},

		// b: IP's ceiling against SP's
		{"b reproduced: IP peaks far above SP", "b", join(
			cells("sp", 3, rise(0.3, 0.4), voting, twoScales, nil),
			cells("ip", 3, rise(0.3, 0.8), voting, twoScales, nil)), nil,
			claimResult{Reproduced, []Test{{Holds, Majority, Tally{Holds: 2}, 0}}, [][]judged{repeat(2, Holds, AboveZero)}}},
		{"b inconclusive: SP peaks far above IP in two cells", "b", join(
			cells("sp", 3, rise(0.3, 0.8), voting, twoScales, nil),
			cells("ip", 3, rise(0.3, 0.4), voting, twoScales, nil)), nil,
			claimResult{Inconclusive, []Test{{Undecided, Split, Tally{Against: 2}, 0}}, [][]judged{repeat(2, Against, BelowZero)}}},
		{"b inconclusive: one cell each way and one undecided", "b", join(
			cells("sp", 3, rise(0.3, 0.4), voting, []string{"s"}, nil),
			cells("ip", 3, rise(0.3, 0.8), voting, []string{"s"}, nil),
			cells("sp", 3, rise(0.3, 0.8), voting, []string{"m"}, nil),
			cells("ip", 3, rise(0.3, 0.4), voting, []string{"m"}, nil),
			cells("sp", 3, rise(0.3, 0.5), voting, []string{"l"}, nil),
			cells("ip", 3, rise(0.3, 0.5), voting, []string{"l"}, nil)), nil,
			// 1 holds, 1 against, 1 undecided of 3: neither a strict
			// majority for nor half against (cells in scale order s, m, l)
			claimResult{Inconclusive, []Test{{Undecided, Split, Tally{Holds: 1, Against: 1, Undecided: 1}, 0}},
				[][]judged{{{Holds, AboveZero}, {Against, BelowZero}, {Undecided, ContainsZero}}}}},
		{"b not testable: SP has one seed", "b", join(
			cells("sp", 1, rise(0.3, 0.4), voting, twoScales, nil),
			cells("ip", 3, rise(0.3, 0.8), voting, twoScales, nil)), nil,
			claimResult{NotTestable, []Test{{Untestable, NoneJudged, Tally{NoData: 2}, 0}}, [][]judged{repeat(2, NoData, FewSeeds)}}},

		// c: IP cliffs in voting and orch-workers, after amplification
		{"c reproduced: cliffs in voting and orch-workers, amplified first", "c", join(
			cells("ip", 3, peak(0.3, 0.7, 0.2), []string{"voting", "orch-workers"}, []string{"s"}, amp),
			cells("ip", 3, func(seed int) []float64 { // seed 3 without a cliff
				if seed == 3 {
					return rise(0.3, 0.7)(seed)
				}
				return peak(0.3, 0.7, 0.2)(seed)
			}, voting, []string{"m"}, amp),
			cells("ip", 3, rise(0.3, 0.7), []string{"eval-opt"}, twoScales, nil)), nil,
			claimResult{Reproduced, []Test{{Holds, RateInterval, Tally{}, 0}, {Holds, Majority, Tally{Holds: 8}, 0}},
				[][]judged{repeat(5, Counted, EntersRates), repeat(8, Holds, AmplifiedFirst)}}},
		{"c not testable: a cosine schedule to zero leaves no late phase", "c", join(
			cells("ip", 3, peak(0.3, 0.7, 0.2), voting, []string{"s"}, func(a *arm) { a.Amplify, a.LR = true, analysistest.CosineLR(100) }),
			cells("ip", 3, rise(0.3, 0.7), []string{"eval-opt"}, []string{"s"}, func(a *arm) { a.LR = analysistest.CosineLR(100) })), nil,
			claimResult{NotTestable, []Test{{Untestable, NoLatePhase, Tally{}, 0}, {Holds, Majority, Tally{Holds: 3}, 0}},
				[][]judged{repeat(2, Counted, EntersRates), repeat(3, Holds, AmplifiedFirst)}}},
		// the power rule: no cliff anywhere does not refute where cliffs fall
		{"c not testable: no IP run falls off a cliff", "c", join(
			cells("ip", 3, rise(0.3, 0.7), []string{"voting", "orch-workers", "eval-opt"}, twoScales, amp)), nil,
			claimResult{NotTestable, []Test{{Undecided, NoCliffs, Tally{}, 0}, {Untestable, NoCliffRuns, Tally{}, 0}},
				[][]judged{repeat(6, Counted, EntersRates), none}}},
		{"c not reproduced: cliffs without amplification", "c", join(
			cells("ip", 3, peak(0.3, 0.7, 0.2), []string{"voting", "orch-workers"}, []string{"s"}, nil),
			cells("ip", 3, rise(0.3, 0.7), []string{"eval-opt"}, twoScales, nil)), nil,
			// every cell's cliff rate is 0 or 1 without spread: the
			// difference's interval has zero width
			claimResult{Refuted, []Test{{Undecided, RateInterval, Tally{}, 0}, {Against, HalfAgainst, Tally{Against: 6}, 0}},
				[][]judged{repeat(4, Counted, EntersRates), repeat(6, Against, NotAmplified)}}},
		{"c not testable: IP has one seed per cell", "c", join(
			cells("ip", 1, peak(0.3, 0.7, 0.2), []string{"voting", "orch-workers", "eval-opt"}, twoScales, amp)), nil,
			claimResult{NotTestable, []Test{{Untestable, NoneJudged, Tally{}, 0}, {Untestable, NoCliffRuns, Tally{}, 0}},
				[][]judged{repeat(6, NoData, FewSeeds), none}}},
		{"c inconclusive: no other workflow to compare with", "c", join(
			cells("ip", 3, peak(0.3, 0.7, 0.2), voting, twoScales, amp)), nil,
			claimResult{Inconclusive, []Test{{Undecided, NoOtherCell, Tally{}, 0}, {Holds, Majority, Tally{Holds: 6}, 0}},
				[][]judged{repeat(2, Counted, EntersRates), repeat(6, Holds, AmplifiedFirst)}}},
		{"c not testable: no IP run", "c",
			cells("sp", 3, rise(0.3, 0.5), voting, twoScales, nil), nil,
			claimResult{NotTestable, []Test{{Undecided, NoCliffCell, Tally{}, 0}, {Untestable, NoCliffRuns, Tally{}, 0}}, [][]judged{none, none}}},

		// d: role capture under SP
		{"d reproduced: the aggregator is captured in every SP run", "d", join(
			cells("sp", 3, rise(0.3, 0.5), voting, twoScales, captureMod(analysistest.Captured))), nil,
			claimResult{Reproduced, []Test{{Holds, Majority, Tally{Holds: 2}, 0}}, [][]judged{repeat(2, Holds, MostCaptured)}}},
		// the power rule: 0 of 3 SP runs captured has a one-sided binomial
		// p of 0.125, so the cell is undecided, not against
		{"d inconclusive: no SP run captured, three seeds a cell", "d", join(
			cells("sp", 3, rise(0.3, 0.5), voting, twoScales, captureMod(analysistest.NotCaptured))), nil,
			claimResult{Inconclusive, []Test{{Undecided, Split, Tally{Undecided: 2}, 0}}, [][]judged{repeat(2, Undecided, EvenCaptured)}}},
		// 0 of 6 (p 0.016) makes the cell against; one cell against of one
		// cannot refute the claim (p 0.5)
		{"d inconclusive: no SP run captured in one cell of six seeds", "d", join(
			cells("sp", 6, rise(0.3, 0.5), voting, []string{"s"}, captureMod(analysistest.NotCaptured))), nil,
			claimResult{Inconclusive, []Test{{Undecided, Split, Tally{Against: 1}, 0}}, [][]judged{{{Against, MostNotCaptured}}}}},
		{"d inconclusive: one cell captured, one not, one without capture rows", "d", join(
			cells("sp", 3, rise(0.3, 0.5), voting, []string{"s"}, captureMod(analysistest.Captured)),
			cells("sp", 3, rise(0.3, 0.5), voting, []string{"m"}, captureMod(analysistest.NotCaptured)),
			cells("sp", 3, rise(0.3, 0.5), voting, []string{"l"}, nil)), nil,
			claimResult{Inconclusive, []Test{{Undecided, Split, Tally{Holds: 1, Undecided: 1, NoData: 1}, 0}},
				[][]judged{{{Holds, MostCaptured}, {Undecided, EvenCaptured}, {NoData, FewCaptureRuns}}}}},
		{"d not testable: SP has one seed", "d", join(
			cells("sp", 1, rise(0.3, 0.5), voting, twoScales, captureMod(analysistest.Captured))), nil,
			claimResult{NotTestable, []Test{{Untestable, NoneJudged, Tally{NoData: 2}, 0}}, [][]judged{repeat(2, NoData, FewCaptureRuns)}}},
		{"d inconclusive: as many SP runs captured as not", "d", nil, evenSplit(),
			claimResult{Inconclusive, []Test{{Undecided, Split, Tally{Undecided: 1}, 0}}, [][]judged{{{Undecided, EvenCaptured}}}}},
		{"d not testable: no shared policy", "d",
			cells("ip", 3, rise(0.3, 0.5), voting, twoScales, captureMod(analysistest.Captured)), nil,
			claimResult{NotTestable, []Test{{Untestable, NoSharedCell, Tally{}, 0}}, [][]judged{none}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runs := tc.runs
			if runs == nil {
				runs = analysistest.Study(tc.arms...)
			}
			st, err := Analyze(runs)
			if err != nil {
				t.Fatal(err)
			}
			st.Controls = allControls()
			got := resultOf(CompareClaims(st), tc.claim)
			if got.verdict != tc.want.verdict {
				t.Errorf("verdict %d, want %d", got.verdict, tc.want.verdict)
			}
			if !slices.Equal(got.tests, tc.want.tests) {
				t.Errorf("tests %+v, want %+v", got.tests, tc.want.tests)
			}
			for i := range tc.want.units {
				if !slices.Equal(got.units[i], tc.want.units[i]) {
					t.Errorf("test %d units %+v, want %+v", i, got.units[i], tc.want.units[i])
				}
			}
		})
	}
}

// TestClaimEvidence checks the numbers the claims rest on: the chosen
// condition of claim a and its figures, the seeds of claim b, the counts
// and rates of claim c's concentration test and the pairs and workflow
// tally of claim d.
func TestClaimEvidence(t *testing.T) {
	st, err := Analyze(analysistest.Study(join(
		cells("base", 3, flat(0.2), voting, []string{"s"}, nil),
		cells("sp", 1, rise(0.2, 0.5), voting, []string{"s"}, captureMod(analysistest.Captured)),
		cells("ip", 3, rise(0.2, 0.7), voting, []string{"s"}, nil),
		cells("ip", 3, peak(0.3, 0.7, 0.2), []string{"orch-workers"}, []string{"s"}, func(a *arm) { a.Amplify = true }),
		cells("ip", 3, rise(0.3, 0.7), []string{"eval-opt"}, []string{"s"}, nil))...))
	if err != nil {
		t.Fatal(err)
	}
	st.Controls = allControls()
	cl := CompareClaims(st)

	if len(cl.Better.Cells) != 1 {
		t.Fatalf("claim a: %d cells, want 1", len(cl.Better.Cells))
	}
	a := cl.Better.Cells[0]
	var c *CellResult
	for _, x := range st.Cells {
		if x.Key == a.Cell {
			c = x
		}
	}
	if c == nil || a.Cell.Workflow != "voting" || a.Better != "ip" || c.BetterMultiAgent().Condition != "ip" {
		t.Errorf("claim a: better %q in %s, want ip", a.Better, a.Cell)
	}
	if a.BaseSeeds != 3 || a.SPSeeds != 1 || a.IPSeeds != 3 || a.Gain != c.Cond("ip").GainBaseFinal || a.IPFinal != c.Cond("ip").Final || a.SPFinal != c.Cond("sp").Final {
		t.Errorf("claim a: evidence %+v", a)
	}
	if a.Reason != FewSeeds || !slices.Equal(a.Few, []CondSeeds{{"sp", 1}}) {
		t.Errorf("claim a: %d %+v, want SP's one seed", a.Reason, a.Few)
	}

	b := cl.Ceiling.Cells
	if len(b) != 1 || b[0].SPSeeds != 1 || b[0].IPSeeds != 3 || b[0].Outcome != NoData {
		t.Errorf("claim b: cells %+v", b)
	}

	conc := cl.Cliffs.Concentration
	if conc.RunsV != 6 || conc.CliffsV != 3 || conc.RunsO != 3 || conc.CliffsO != 0 || conc.NoDataRuns != 0 || conc.CellsV != 2 || conc.CellsO != 1 {
		t.Errorf("claim c: counts %+v", conc)
	}
	if !near(conc.RateV.Value, 0.5) || !near(conc.RateO.Value, 0) || !near(conc.Diff.Value, 0.5) || conc.Diff.Lo < -1 || conc.Diff.Hi > 1 {
		t.Errorf("claim c: rates %+v, %+v, difference %+v", conc.RateV, conc.RateO, conc.Diff)
	}

	d := cl.Capture
	if len(d.Cells) != 1 || d.Cells[0].Captured != 1 || d.Cells[0].Judged != 1 ||
		!slices.Equal(d.Cells[0].Pairs, []RolePair{{"aggregator", "generator"}}) || d.Cells[0].Reason != FewCaptureRuns {
		t.Errorf("claim d: cells %+v", d.Cells)
	}
	if !slices.Equal(d.ByWorkflow, []WorkflowTally{{"voting", 0, 1}}) {
		t.Errorf("claim d: by workflow %+v", d.ByWorkflow)
	}
}

func TestBetterMultiAgent(t *testing.T) {
	cond := func(name string, final float64) CondSummary {
		return CondSummary{Condition: name, Final: Estimate{Value: final}}
	}
	tests := []struct {
		name  string
		conds []CondSummary
		want  string // "" for none
	}{
		{"neither", []CondSummary{cond("base", 0.5)}, ""},
		{"SP only", []CondSummary{cond("base", 0.5), cond("sp", 0.1)}, "sp"},
		{"IP only", []CondSummary{cond("ip", 0.1)}, "ip"},
		{"IP higher", []CondSummary{cond("sp", 0.4), cond("ip", 0.6)}, "ip"},
		{"SP higher", []CondSummary{cond("sp", 0.6), cond("ip", 0.4)}, "sp"},
		{"a tie goes to SP", []CondSummary{cond("sp", 0.5), cond("ip", 0.5)}, "sp"},
	}
	for _, tc := range tests {
		c := &CellResult{Conditions: tc.conds}
		got := ""
		if b := c.BetterMultiAgent(); b != nil {
			got = b.Condition
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestClaimCUnits checks the evidence of claim c: per-cell cliff rates with
// intervals and one unit per cliff run with its amplified step.
func TestClaimCUnits(t *testing.T) {
	runs := analysistest.Study(join(
		cells("ip", 3, peak(0.3, 0.7, 0.2), voting, []string{"s"}, func(a *arm) { a.Amplify = true }),
		cells("ip", 3, rise(0.3, 0.7), []string{"eval-opt"}, []string{"s"}, nil))...)
	st, err := Analyze(runs)
	if err != nil {
		t.Fatal(err)
	}
	st.Controls = allControls()
	c := CompareClaims(st).Cliffs
	conc, prec := c.Concentration, c.Amplification
	if len(conc.Cells) != 2 || conc.Cells[0].Outcome != Counted {
		t.Fatalf("concentration units %+v", conc.Cells)
	}
	var rate Estimate
	for _, u := range conc.Cells {
		if u.Cell.Workflow == "voting" {
			rate = u.Rate
			if u.CliffRuns != 3 || u.Seeds != 3 || u.Amplified != 3 {
				t.Errorf("voting cell %+v, want 3 cliffs of 3 runs, all amplified first", u)
			}
		}
	}
	if rate.Value != 1 || !rate.HasCI() {
		t.Errorf("voting cliff rate %+v, want 1 with an interval", rate)
	}
	// rates of 1 and 0 without spread: the difference has zero width
	if conc.Outcome != Undecided || conc.Reason != RateInterval || conc.DiffReason != ZeroWidth || conc.Diff.Value != 1 {
		t.Errorf("concentration %d %d (difference %d %+v), want undecided on a zero-width difference of 1", conc.Outcome, conc.Reason, conc.DiffReason, conc.Diff)
	}
	if len(prec.Runs) != 3 {
		t.Fatalf("%d cliff-run units, want 3", len(prec.Runs))
	}
	for _, u := range prec.Runs {
		if u.Outcome != Holds || u.FirstAmplified != 53 || u.FallStep != 70 || u.Run == "" {
			t.Errorf("cliff run unit %+v", u)
		}
	}
}

// TestSARLGainsAndHeadlines checks the gains over SA-RL per cell and the
// matching of the paper's headline cells by scale rank and task name.
func TestSARLGainsAndHeadlines(t *testing.T) {
	scales := []string{"l", "s", "m"}
	arms := join(
		cells("sa-rl", 3, rise(0.3, 0.4), []string{"single"}, scales, func(a *arm) { a.EvalWorkflows = []string{"eval-opt", "single", "voting"} }),
		cells("ip", 3, rise(0.3, 0.8), []string{"eval-opt"}, scales, nil),
		cells("sp", 3, rise(0.3, 0.35), voting, scales, nil))
	st, err := Analyze(analysistest.Study(arms...))
	if err != nil {
		t.Fatal(err)
	}
	st.Controls = allControls()
	cl := CompareClaims(st)
	if len(cl.Gains) != 6 {
		t.Fatalf("%d gain rows, want 6 (eval-opt and voting at three scales)", len(cl.Gains))
	}
	for _, g := range cl.Gains {
		switch g.Cell.Workflow {
		case "eval-opt":
			if !g.IP.Excludes(0) || g.IP.Value <= 0 || !math.IsNaN(g.SP.Value) || g.IPSeeds != 3 || g.SARLSeeds != 3 {
				t.Errorf("%s: IP gain %+v, SP %+v", g.Cell, g.IP, g.SP)
			}
		case "voting":
			if math.IsNaN(g.SP.Value) || !math.IsNaN(g.IP.Value) {
				t.Errorf("%s: SP gain %+v, IP %+v", g.Cell, g.SP, g.IP)
			}
		}
	}
	if len(cl.Headlines) != 2 {
		t.Fatalf("%d headlines", len(cl.Headlines))
	}
	h := cl.Headlines[0]
	if h.Match != Matched || !h.Found || h.Cell != (CellKey{Workflow: "eval-opt", Task: "synth-math", Scale: "m"}) || h.Condition != "ip" ||
		h.PaperScale != "1.7B" || h.PaperWorkflow != "eval-opt" || !near(h.PaperGain, 0.101) || h.Gain.Value <= 0 {
		t.Errorf("headline 0: %+v", h)
	}
	h = cl.Headlines[1]
	if h.Match != Matched || !h.Found || h.Cell != (CellKey{Workflow: "voting", Task: "synth-math", Scale: "l"}) || h.Condition != "sp" ||
		h.PaperScale != "4B" || h.PaperWorkflow != "voting" || !near(h.PaperGain, -0.103) {
		t.Errorf("headline 1: %+v", h)
	}

	for _, tc := range []struct {
		name             string
		arms             []arm
		match            HeadlineMatch
		scales, mathTask int
	}{
		{"two scales: no match by rank", join(
			cells("sa-rl", 2, rise(0.3, 0.4), []string{"single"}, twoScales, func(a *arm) { a.EvalWorkflows = []string{"single", "voting"} }),
			cells("sp", 2, rise(0.3, 0.4), voting, twoScales, nil)), ScalesUnmatched, 2, 1},
		{"two math tasks: no task to match", join(
			cells("sp", 2, rise(0.3, 0.4), voting, scales, nil),
			cells("sp", 2, rise(0.3, 0.4), voting, scales, func(a *arm) { a.Task = "alt-math" })), TaskUnmatched, 3, 2},
		{"the cell lacks SA-RL", join(
			cells("sp", 2, rise(0.3, 0.4), voting, scales, nil),
			cells("ip", 2, rise(0.3, 0.4), []string{"eval-opt"}, scales, nil)), Matched, 3, 1},
	} {
		st, err := Analyze(analysistest.Study(tc.arms...))
		if err != nil {
			t.Fatal(err)
		}
		st.Controls = allControls()
		for _, h := range CompareClaims(st).Headlines {
			if h.Found || h.Match != tc.match || h.Scales != tc.scales || h.MathTasks != tc.mathTask || (h.Match == Matched) == (h.Cell == CellKey{}) {
				t.Errorf("%s: headline %+v", tc.name, h)
			}
		}
	}
}

func TestJudgeGain(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		e    Estimate
		want Judgement
	}{
		{Estimate{Value: 0.2, Lo: 0.1, Hi: 0.3}, Judgement{Outcome: Holds, Reason: AboveZero}},
		{Estimate{Value: -0.2, Lo: -0.3, Hi: -0.1}, Judgement{Outcome: Against, Reason: BelowZero}},
		{Estimate{Value: 0.2, Lo: -0.1, Hi: 0.3}, Judgement{Outcome: Undecided, Reason: ContainsZero}},
		{Estimate{Value: 0.2, Lo: 0.2, Hi: 0.2}, Judgement{Outcome: Undecided, Reason: ZeroWidth}},
		{Estimate{Value: 0.2, Lo: nan, Hi: nan}, Judgement{Outcome: Undecided, Reason: NoInterval}},
		{Estimate{Value: nan, Lo: nan, Hi: nan}, Judgement{Outcome: Undecided, Reason: NoInterval}},
	}
	for _, tc := range tests {
		if got := judgeGain(tc.e); got.Outcome != tc.want.Outcome || got.Reason != tc.want.Reason {
			t.Errorf("%+v: %+v, want %+v", tc.e, got, tc.want)
		}
	}
}

func TestMajority(t *testing.T) {
	tests := []struct {
		h, a, u, d int
		want       Outcome
		reason     Reason
	}{
		{0, 0, 0, 0, Untestable, NoUnits},
		{0, 0, 0, 2, Untestable, NoneJudged}, // nothing judged: not testable
		{2, 0, 0, 1, Holds, Majority},
		{2, 0, 0, 2, Undecided, Split}, // 2 of 4 is not a strict majority
		{1, 2, 1, 0, Undecided, Split}, // half against: not significantly more than half
		{1, 1, 0, 0, Undecided, Split},
		{0, 6, 0, 0, Against, HalfAgainst}, // 6 of 6: one-sided binomial p 0.016
		{0, 5, 0, 1, Undecided, Split},     // 5 of 6: p 0.11
		{1, 9, 0, 0, Against, HalfAgainst}, // 9 of 10: p 0.011
		{1, 1, 1, 0, Undecided, Split},
		{0, 1, 1, 1, Undecided, Split},
		{3, 2, 0, 0, Holds, Majority},
	}
	for _, tc := range tests {
		var os []Outcome
		for _, x := range []struct {
			n int
			o Outcome
		}{{tc.h, Holds}, {tc.a, Against}, {tc.u, Undecided}, {tc.d, NoData}} {
			for range x.n {
				os = append(os, x.o)
			}
		}
		ts := majority(os, 0.05)
		if ts.Outcome != tc.want || ts.Reason != tc.reason {
			t.Errorf("holds %d against %d undecided %d no data %d: outcome %d reason %d, want %d %d", tc.h, tc.a, tc.u, tc.d, ts.Outcome, ts.Reason, tc.want, tc.reason)
		}
		if ts.Tally != (Tally{tc.h, tc.a, tc.u, tc.d}) || ts.Tally.Judged() != tc.h+tc.a+tc.u || ts.Tally.Total() != tc.h+tc.a+tc.u+tc.d {
			t.Errorf("tally %+v", ts.Tally)
		}
	}
	// a cell counted into claim c's rates counts as without enough data
	if ts := majority([]Outcome{Counted, Holds}, 0.05); ts.Tally != (Tally{Holds: 1, NoData: 1}) {
		t.Errorf("counted: tally %+v", ts.Tally)
	}
}

// allControls marks every detector's positive control as shown, so that
// the synthetic tests reach the verdicts the detectors' evidence gives.
func allControls() map[Detector]string {
	m := map[Detector]string{}
	for _, d := range Detectors {
		m[d] = "synthetic"
	}
	return m
}

// TestClaimsWithoutControls: a test resting on a detector without a shown
// positive control is not testable, whatever its units say.
func TestClaimsWithoutControls(t *testing.T) {
	amp := func(a *arm) { a.Amplify = true }
	tests := []struct {
		name    string
		arms    []arm
		missing Detector
		claim   string
		want    claimResult
	}{
		{"c: cliffs in voting, amplified first, but no cliff control", join(
			cells("ip", 3, peak(0.3, 0.7, 0.2), voting, twoScales, amp),
			cells("ip", 3, rise(0.3, 0.7), []string{"eval-opt"}, twoScales, nil)), CliffDetector, "c",
			claimResult{NotTestable, []Test{{Untestable, NoControl, Tally{}, 0}, {Holds, Majority, Tally{Holds: 6}, 0}}, nil}},
		{"c: cliffs amplified first, but no amplification control", join(
			cells("ip", 3, peak(0.3, 0.7, 0.2), voting, twoScales, amp),
			cells("ip", 3, peak(0.3, 0.7, 0.2), []string{"eval-opt"}, twoScales, amp)), AmplificationDetector, "c",
			claimResult{NotTestable, []Test{{Undecided, RateInterval, Tally{}, 0}, {Untestable, NoControl, Tally{Holds: 12}, 0}}, nil}},
		{"d: every SP run captured, but no capture control", join(
			cells("sp", 3, rise(0.3, 0.5), voting, twoScales, captureMod(analysistest.Captured))), CaptureDetector, "d",
			claimResult{NotTestable, []Test{{Untestable, NoControl, Tally{Holds: 2}, 0}}, nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := Analyze(analysistest.Study(tc.arms...))
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Controls) != len(PositiveControls) {
				t.Errorf("a new study has controls %v, want PositiveControls %v", st.Controls, PositiveControls)
			}
			st.Controls = allControls()
			delete(st.Controls, tc.missing)
			got := resultOf(CompareClaims(st), tc.claim)
			if got.verdict != tc.want.verdict || !slices.Equal(got.tests, tc.want.tests) {
				t.Errorf("verdict %d tests %+v, want %d %+v", got.verdict, got.tests, tc.want.verdict, tc.want.tests)
			}
		})
	}
}
