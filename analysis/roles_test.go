package analysis

import (
	"math"
	"testing"

	"github.com/marlowlab/marlow/analysis/analysistest"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

func TestClopperPearson(t *testing.T) {
	tests := []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 36, 0, 0.0974},  // 1 − 0.025^(1/36)
		{0, 18, 0, 0.1853},  // 1 − 0.025^(1/18)
		{18, 18, 0.8147, 1}, // the mirror image
		{16, 18, 0.6529, 0.9862},
		{5, 10, 0.1871, 0.8129},
	}
	for _, tc := range tests {
		r := ClopperPearson(tc.k, tc.n, 0.95)
		if math.Abs(r.Lo-tc.lo) > 5e-5 || math.Abs(r.Hi-tc.hi) > 5e-5 || r.K != tc.k || r.N != tc.n {
			t.Errorf("%d/%d: [%.4f, %.4f], want [%.4f, %.4f]", tc.k, tc.n, r.Lo, r.Hi, tc.lo, tc.hi)
		}
		m := ClopperPearson(tc.n-tc.k, tc.n, 0.95)
		if math.Abs(r.Lo-(1-m.Hi)) > 1e-9 {
			t.Errorf("%d/%d: lower bound %v is not 1 minus the mirror's upper %v", tc.k, tc.n, r.Lo, m.Hi)
		}
	}
	if r := ClopperPearson(0, 0, 0.95); !math.IsNaN(r.Lo) || !math.IsNaN(r.Hi) || !math.IsNaN(r.Value()) {
		t.Errorf("0/0: %+v, want NaN bounds", r)
	}
}

func TestFisherGreater(t *testing.T) {
	tests := []struct {
		k1, n1, k2, n2 int
		want           float64
	}{
		{16, 18, 4, 18, 6.6096e-5}, // the IP vs SP format collapse
		{3, 3, 0, 3, 0.05},         // 1 / C(6, 3)
		{0, 3, 3, 3, 1},            // IP lowest: every table is at least as extreme
		{2, 4, 2, 4, 0.7571},       // equal rates
	}
	for _, tc := range tests {
		got := FisherGreater(tc.k1, tc.n1, tc.k2, tc.n2)
		if math.Abs(got-tc.want) > 1e-4*math.Max(tc.want, 1e-3) && math.Abs(got-tc.want) > 1e-8 {
			t.Errorf("%d/%d vs %d/%d: p %.6g, want %.6g", tc.k1, tc.n1, tc.k2, tc.n2, got, tc.want)
		}
	}
	if !math.IsNaN(FisherGreater(1, 0, 0, 3)) {
		t.Error("an empty group gives a p-value")
	}
}

func TestPowerRule(t *testing.T) {
	binom := []struct {
		name string
		got  float64
		want float64
	}{
		{"P(X<=0), n 3, 1/2", BinomLE(0, 3, 0.5), 0.125},
		{"P(X>=3), n 3, 1/2", BinomGE(3, 3, 0.5), 0.125},
		{"P(X>=0)", BinomGE(0, 5, 0.3), 1},
		{"P(X<=5), n 18, 1/2", BinomLE(5, 18, 0.5), 0.048126},
		{"P(X>=2), n 4, 1/4", BinomGE(2, 4, 0.25), 0.26172},
		// 6 against 6 runs: only 4/6 against 0/6 (or 6/6 against 2/6) reaches p < 0.05
		{"Fisher, 6 vs 6", FisherDetectable(6, 6, 0.05), 4.0 / 6},
		// 3 against 3: 3/3 vs 0/3 gives p = 0.05, not below it
		{"Fisher, 3 vs 3", FisherDetectable(3, 3, 0.05), math.NaN()},
		// 18 runs at 1/2: 5/18 gives p 0.048, 6/18 p 0.119
		{"binomial, 18 at 1/2", BinomDetectable(18, 0.5, 0.05), 0.5 - 5.0/18},
		{"binomial, 3 at 1/2", BinomDetectable(3, 0.5, 0.05), math.NaN()},
	}
	for _, tc := range binom {
		if math.IsNaN(tc.want) != math.IsNaN(tc.got) || math.Abs(tc.got-tc.want) > 1e-4 {
			t.Errorf("%s: %.6g, want %.6g", tc.name, tc.got, tc.want)
		}
	}
	// the detectable difference is one the test rejects, and no smaller one is
	d := FisherDetectable(18, 18, 0.05)
	for k1 := 0; k1 <= 18; k1++ {
		for k2 := 0; k2 <= 18; k2++ {
			diff := float64(k1-k2) / 18
			if diff > 0 && diff < d-1e-12 && FisherGreater(k1, 18, k2, 18) < 0.05 {
				t.Fatalf("%d/18 vs %d/18 rejects at a difference %.3f below the detectable %.3f", k1, k2, diff, d)
			}
		}
	}
}

func TestCompareMeans(t *testing.T) {
	// 33/384 as the mean of three seeds' fractions summed in two orders
	a := (10.0/384 + 11.0/384 + 12.0/384) / 3
	b := (12.0/384)/3 + (10.0/384)/3 + (11.0/384)/3
	if CompareMeans(a, b) != 0 || CompareMeans(b, a) != 0 {
		t.Errorf("%v and %v (both 11/384) are not a tie", a, b)
	}
	if CompareMeans(a+1.0/(3*384), a) != 1 || CompareMeans(a, a+1.0/(3*384)) != -1 {
		t.Error("one problem of one seed apart is not an order")
	}
}

// row makes one validation sample row.
func row(problem string, role string, completion, parsed string, compliant, correct bool) runlog.SampleRow {
	return runlog.SampleRow{Step: 10, Workflow: "w", Split: "val", ProblemID: problem, Role: role, Agent: role,
		Completion: completion, Parsed: parsed, Compliant: compliant, Correct: correct}
}

func TestWorkflowSteps(t *testing.T) {
	r := &runlog.Run{Samples: []runlog.SampleRow{
		// voting: a parsed choice of a correct candidate
		row("p1", study.Generator, "a", "1", true, false), row("p1", study.Generator, "b", "2", true, true),
		row("p1", study.Aggregator, "Selected: 2", "2", true, true), row("p1", "final", "b", "2", true, true),
		// an unparsed choice whose first digit names the candidate: right only leniently
		row("p2", study.Generator, "a", "1", true, false), row("p2", study.Generator, "b", "2", true, true),
		row("p2", study.Aggregator, "I think 2 is best", "2", false, true), row("p2", "final", "b", "2", true, true),
		// an unparsed choice without a digit falls back to candidate 1
		row("p3", study.Generator, "a", "1", true, true), row("p3", study.Generator, "b", "2", true, false),
		row("p3", study.Aggregator, "ant ant ant", "1", false, true), row("p3", "final", "a", "1", true, true),
		// a digit naming no candidate also falls back to candidate 1
		row("p4", study.Generator, "a", "1", true, false), row("p4", study.Generator, "b", "2", true, false),
		row("p4", study.Aggregator, "9 of them", "1", false, false), row("p4", "final", "a", "1", true, false),
	}}
	// a sample of another split or workflow is not read
	r.Samples = append(r.Samples, runlog.SampleRow{Step: 10, Workflow: "other", Split: "val", ProblemID: "p9", Role: "final", Correct: true})
	ws := WorkflowSteps(r, "w")
	if len(ws) != 1 {
		t.Fatalf("%d steps, want 1", len(ws))
	}
	w := ws[0]
	if w.Episodes != 4 || w.Lenient != 3 || w.Strict != 1 || w.Turns != 12 {
		t.Errorf("episodes %d lenient %d strict %d turns %d, want 4 3 1 12", w.Episodes, w.Lenient, w.Strict, w.Turns)
	}
	if w.StrictRate() != 0.25 || w.LenientRate() != 0.75 {
		t.Errorf("rates %v %v", w.StrictRate(), w.LenientRate())
	}
	agg := w.Role(study.Aggregator)
	if agg.Turns != 4 || agg.Unparsed != 3 || agg.Fallbacks[FallbackFirstDigit] != 1 || agg.Fallbacks[FallbackCandidate1] != 2 {
		t.Errorf("aggregator %+v", agg)
	}
	if w.Choices != 4 || w.WithCorrect != 3 || w.PickedCorrect != 3 || w.PickedFirst != 2 {
		t.Errorf("choices %d with a correct candidate %d picked correct %d picked first %d", w.Choices, w.WithCorrect, w.PickedCorrect, w.PickedFirst)
	}
}

func TestWorkflowStepsEvaluatorAndOrchestrator(t *testing.T) {
	r := &runlog.Run{Samples: []runlog.SampleRow{
		// eval-opt: a wrong answer accepted (false accept)
		row("e1", study.Generator, "x", "1", true, false), row("e1", study.Evaluator, "Verdict: Correct", "Correct", true, false),
		row("e1", "final", "x", "1", true, false),
		// a right answer rejected, then an unparsed verdict (counted Incorrect), then accepted
		row("e2", study.Generator, "y", "2", true, true), row("e2", study.Evaluator, "Verdict: Incorrect", "Incorrect", true, false),
		row("e2", study.Generator, "y", "2", true, true), row("e2", study.Evaluator, "hmm", "", false, false),
		row("e2", study.Generator, "y", "2", true, true), row("e2", study.Evaluator, "Verdict: Correct", "Correct", true, true),
		row("e2", "final", "y", "2", true, true),
		// orch-workers: no usable strategy, one free worker
		row("o1", study.Orchestrator, "just do it", "", false, false), row("o1", study.Worker, "z", "3", true, true),
		row("o1", study.Synthesizer, "z", "3", true, true), row("o1", "final", "z", "3", true, true),
		// two strategies parsed
		row("o2", study.Orchestrator, "Strategy 1: a\nStrategy 2: b", "a\nb", true, false),
		row("o2", study.Worker, "z", "3", true, true), row("o2", study.Worker, "z", "3", true, true),
		row("o2", study.Synthesizer, "no idea", "", false, false), row("o2", "final", "", "", false, false),
	}}
	w := WorkflowSteps(r, "w")[0]
	if w.Verdicts != 3 || w.Accepts != 2 || w.FalseAccepts != 1 || w.FalseRejects != 1 || w.CorrectJudged != 2 {
		t.Errorf("verdicts %d accepts %d false accepts %d false rejects %d on correct %d, want 3 2 1 1 2", w.Verdicts, w.Accepts, w.FalseAccepts, w.FalseRejects, w.CorrectJudged)
	}
	if ev := w.Role(study.Evaluator); ev.Turns != 4 || ev.Unparsed != 1 || ev.Fallbacks[FallbackIncorrect] != 1 {
		t.Errorf("evaluator %+v", ev)
	}
	if or := w.Role(study.Orchestrator); or.Unparsed != 1 || or.Fallbacks[FallbackFreeWorker] != 1 {
		t.Errorf("orchestrator %+v", or)
	}
	if sy := w.Role(study.Synthesizer); sy.Unparsed != 1 || sy.Fallbacks[FallbackNoAnswer] != 1 {
		t.Errorf("synthesizer %+v", sy)
	}
	if w.Plans != 2 || w.Strategies != 2 || w.Workers != 3 {
		t.Errorf("plans %d strategies %d workers %d, want 2 2 3", w.Plans, w.Strategies, w.Workers)
	}
	// e2 is right but had an unparsed verdict; o1 is right with an unparsed plan
	if w.Episodes != 4 || w.Lenient != 2 || w.Strict != 0 {
		t.Errorf("episodes %d lenient %d strict %d, want 4 2 0", w.Episodes, w.Lenient, w.Strict)
	}
}

func TestSignatureOf(t *testing.T) {
	tests := []struct {
		text string
		want Signature
	}{
		{"Step 1: 2+2\nAnswer: 4", SigAnswerLine},
		{"```python\nprint(1)\n```", SigCodeFence},
		{"x = 2\ny = x + 1", SigWorkedSteps},
		{"1. add\n2. carry", SigWorkedSteps},
		{"Selected: 2", SigNone},
		{"ant ant ant", SigNone},
	}
	for _, tc := range tests {
		if got := SignatureOf(tc.text); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.text, got, tc.want)
		}
	}
}

func TestLengthToward(t *testing.T) {
	tests := []struct {
		base, end float64
		want      bool
	}{
		{0.6, 2.6, false}, // shorter, then far past the dominant's length: a blow-out, not a copy
		{0.6, 1.2, true},  // past 1, within the overshoot
		{0.6, 0.95, true}, // toward it
		{0.6, 0.8, true},  // toward it, a little
		{0.6, 0.3, false}, // away from it
		{0.6, 0.6, false}, // no move
		{3, 1.5, true},    // longer, shrinking toward it
		{3, 0.4, false},   // longer, shrinking past 1/overshoot
		{3, 6, false},     // longer, growing
		{1, 1.1, false},   // at the dominant's length already: no move toward it
		{0, 2, false},     // no length
		{math.NaN(), 2, false},
	}
	for _, tc := range tests {
		if got := lengthToward(tc.base, tc.end); got != tc.want {
			t.Errorf("%v → %v: %v, want %v", tc.base, tc.end, got, tc.want)
		}
	}
}

func TestCompareCollapse(t *testing.T) {
	runs := analysistest.Study(join(
		cells("ip", 3, rise(0.3, 0.5), voting, []string{"s"}, captureMod(analysistest.Captured)),
		cells("sp", 3, rise(0.3, 0.5), voting, []string{"s"}, captureMod(analysistest.NotCaptured)),
		cells("ip", 2, rise(0.3, 0.5), []string{"eval-opt"}, []string{"s"}, captureMod(analysistest.Captured)))...)
	st, err := Analyze(runs)
	if err != nil {
		t.Fatal(err)
	}
	got := CompareCollapse(st)
	if len(got) != 1 {
		t.Fatalf("%d groups, want one task", len(got))
	}
	g := got[0]
	// eval-opt is not one of the workflows compared
	if g.Task != "synth-math" || g.IP.K != 3 || g.IP.N != 3 || g.SP.K != 0 || g.SP.N != 3 || math.Abs(g.P-0.05) > 1e-12 {
		t.Errorf("group %+v, want IP 3/3, SP 0/3, p 0.05", g)
	}
}

func TestBetterMultiAgentTie(t *testing.T) {
	// the same mean of three seeds' fractions (4, 8 and 12 of 40 problems)
	// summed in two orders differs in the last bit
	seeds := []float64{0.1, 0.2, 0.3}
	var fwd, rev float64
	for i := range seeds {
		fwd += seeds[i] / 3
		rev += seeds[len(seeds)-1-i] / 3
	}
	if fwd == rev {
		t.Fatalf("%v == %v: pick fractions whose sums differ in the last bit", fwd, rev)
	}
	for _, tc := range []struct {
		sp, ip float64
		want   string
	}{
		{fwd, rev, study.SP}, {rev, fwd, study.SP}, // a tie, in either order
		{0.2, 0.2 + 1.0/120, study.IP}, // one problem of one seed more
		{0.2 + 1.0/120, 0.2, study.SP},
	} {
		c := &CellResult{Conditions: []CondSummary{
			{Condition: study.SP, Final: Estimate{Value: tc.sp}}, {Condition: study.IP, Final: Estimate{Value: tc.ip}}}}
		if b := c.BetterMultiAgent(); b == nil || b.Condition != tc.want {
			t.Errorf("SP %v, IP %v: better %+v, want %s", tc.sp, tc.ip, b, tc.want)
		}
	}
}

func TestFinalRates(t *testing.T) {
	r := &RunResult{Workflow: []WorkflowStep{
		{Step: 0, Episodes: 10, Lenient: 9, Strict: 9},
		{Step: 10, Episodes: 10, Lenient: 6, Strict: 3},
		{Step: 20, Episodes: 10, Lenient: 3, Strict: 0},
		{Step: 30, Episodes: 10, Lenient: 6, Strict: 0},
	}}
	s, l, ok := r.FinalRates()
	if !ok || math.Abs(s-0.1) > 1e-12 || math.Abs(l-0.5) > 1e-12 {
		t.Errorf("strict %v lenient %v ok %v, want the mean of the last 3 validations: 0.1 0.5", s, l, ok)
	}
	if _, _, ok := (&RunResult{}).FinalRates(); ok {
		t.Error("a run without samples has final rates")
	}
}

// TestWorkflowStepsReadLoggedFallbacks: from schema 3 on the fallback
// column decides an unparsed turn's fallback, not its text; a dropped
// strategy counts as list-items, and a synthesizer without an answer
// and an orchestrator that proposed too many strategies (both logged with
// no word) as no-answer and ended. The same rows in an older log are
// derived from their text.
func TestWorkflowStepsReadLoggedFallbacks(t *testing.T) {
	logged := func(s runlog.SampleRow, f study.Fallback) runlog.SampleRow {
		s.Fallback = string(f)
		return s
	}
	rows := []runlog.SampleRow{
		// the text's first digit names candidate 2, but the workflow logged candidate-1
		row("p1", study.Generator, "a", "1", true, false), row("p1", study.Generator, "b", "2", true, true),
		logged(row("p1", study.Aggregator, "2 or 1", "1", false, false), study.FallbackFirstCandidate), row("p1", "final", "a", "1", true, false),
		// the text has no digit, but the workflow logged first-digit
		row("p2", study.Generator, "a", "1", true, false), row("p2", study.Generator, "b", "2", true, true),
		logged(row("p2", study.Aggregator, "none", "2", false, true), study.FallbackFirstDigit), row("p2", "final", "b", "2", true, true),
		// dropped strategies, and a synthesizer without an answer
		logged(row("o1", study.Orchestrator, "Strategy 1: a\nStrategy 2: a", "a", false, false), study.FallbackDropped),
		row("o1", study.Worker, "z", "3", true, true), row("o1", study.Synthesizer, "hmm", "", false, false), row("o1", "final", "", "", false, false),
		// too many strategies: the episode ended, no fallback logged
		row("o2", study.Orchestrator, "Strategy 1: a\nStrategy 2: b\nStrategy 3: c", "a\nb\nc", false, false), row("o2", "final", "", "", false, false),
	}
	for _, tc := range []struct {
		schema                               int
		firstDigit, candidate1, lists, ended int
	}{{3, 1, 1, 1, 1}, {2, 0, 2, 2, 0}} {
		r := &runlog.Run{Manifest: runlog.Manifest{SchemaVersion: tc.schema}, Samples: rows}
		w := WorkflowSteps(r, "w")[0]
		agg, or, sy := w.Role(study.Aggregator), w.Role(study.Orchestrator), w.Role(study.Synthesizer)
		if agg.Fallbacks[FallbackFirstDigit] != tc.firstDigit || agg.Fallbacks[FallbackCandidate1] != tc.candidate1 {
			t.Errorf("schema %d: aggregator fallbacks %v, want first-digit %d candidate-1 %d", tc.schema, agg.Fallbacks, tc.firstDigit, tc.candidate1)
		}
		if or.Fallbacks[FallbackListItems] != tc.lists || or.Fallbacks[FallbackEnded] != tc.ended || or.Unparsed != 2 {
			t.Errorf("schema %d: orchestrator %d unparsed, fallbacks %v, want list-items %d ended %d", tc.schema, or.Unparsed, or.Fallbacks, tc.lists, tc.ended)
		}
		if sy.Fallbacks[FallbackNoAnswer] != 1 || len(sy.Fallbacks) != 1 {
			t.Errorf("schema %d: synthesizer fallbacks %v, want no-answer 1", tc.schema, sy.Fallbacks)
		}
	}
}

func TestSupervisorOf(t *testing.T) {
	for wf, want := range map[string]string{
		study.Single: "", study.EvalOpt: study.Evaluator, study.Voting: study.Aggregator,
		study.OrchWorkers: study.Synthesizer, "unknown": "",
	} {
		if got := SupervisorOf(wf); got != want {
			t.Errorf("SupervisorOf(%s) = %q, want %q", wf, got, want)
		}
	}
}
