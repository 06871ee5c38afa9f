package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/analysis/analysistest"
)

// claimsStudy is a synthetic study of three seeds: voting and eval-opt at
// scales s, m, l of synth-math with base, SA-RL, SP and IP; SP captures
// the aggregator, IP falls off a cliff in voting after amplification.
func claimsStudy(t *testing.T) *analysis.Study {
	t.Helper()
	curve := func(b, p, e float64, cliff bool) func(int) []float64 {
		return func(seed int) []float64 {
			out := make([]float64, 11)
			for i := range out {
				out[i] = b + (p-b)*float64(i)/10
				if cliff && i >= 7 {
					out[i] = e
				}
				if i >= 8 {
					out[i] += 0.025 * float64(seed%2)
				}
			}
			return out
		}
	}
	var arms []analysistest.Arm
	for _, sc := range []string{"s", "m", "l"} {
		arms = append(arms, analysistest.Arm{Workflow: "single", Cond: "sa-rl", Task: "synth-math", Scale: sc, Seeds: 3,
			Curve: curve(0.3, 0.45, 0, false), EvalWorkflows: []string{"eval-opt", "single", "voting"}})
		for _, wf := range []string{"voting", "eval-opt"} {
			arms = append(arms,
				analysistest.Arm{Workflow: wf, Cond: "base", Task: "synth-math", Scale: sc, Seeds: 3, Curve: curve(0.3, 0.3, 0, false)},
				analysistest.Arm{Workflow: wf, Cond: "sp", Task: "synth-math", Scale: sc, Seeds: 3, Curve: curve(0.3, 0.5, 0, false), Capture: analysistest.Captured},
				analysistest.Arm{Workflow: wf, Cond: "ip", Task: "synth-math", Scale: sc, Seeds: 3, Curve: curve(0.3, 0.8, 0.2, wf == "voting"), Amplify: wf == "voting"})
		}
	}
	st, err := analysis.Analyze(analysistest.Study(arms...))
	if err != nil {
		t.Fatal(err)
	}
	// every detector's control shown, so the verdicts follow the evidence
	for _, d := range analysis.Detectors {
		st.Controls[d] = "synthetic"
	}
	return st
}

// TestReadmeClaims checks that the report's summary gives every claim's
// verdict and its claims section shows every claim with its verdict, rule,
// counts and per-cell intervals, the gains over SA-RL and the paper's
// headline cells, and that it is rebuilt byte-identically.
func TestReadmeClaims(t *testing.T) {
	st := claimsStudy(t)
	text := readme(st, nil, fixtureOpts)
	s0, s1 := strings.Index(text, "\n## Summary\n"), strings.Index(text, "\n## Matrix\n")
	i := strings.Index(text, "\n## The paper's claims\n")
	j := strings.Index(text, "\n## Figures\n")
	if s0 < 0 || s1 < s0 || i < s1 || j < i {
		t.Fatalf("want the summary, the matrix, the claims and the figures in this order: at %d, %d, %d, %d", s0, s1, i, j)
	}
	summary, sec := text[s0:s1], text[i:j]
	cl := analysis.CompareClaims(st)
	claims := claimTexts(cl)
	for _, c := range claims {
		if want := "| " + c.id + ". " + c.statement + " | **" + c.verdict + "** |"; !strings.Contains(summary, want) {
			t.Errorf("claim %s: summary lacks %q", c.id, want)
		}
		if want := "### " + c.id + ". " + c.statement + "\n\n**Verdict: " + c.verdict + ".** " + c.why; !strings.Contains(sec, want) {
			t.Errorf("claim %s: section lacks %q", c.id, want)
		}
		for _, ts := range c.tests {
			if !strings.Contains(sec, "Rule: "+ts.rule) || !strings.Contains(sec, "Counts: "+countsText(ts)+".") {
				t.Errorf("claim %s test %q: rule or counts missing", c.id, ts.name)
			}
		}
	}
	// this study: IP's voting cliffs keep its ceiling near SP's there, so
	// claim b holds in the three eval-opt cells only
	wantVerdicts := map[string]string{"a": "reproduced", "b": "inconclusive", "c": "reproduced", "d": "reproduced"}
	for _, c := range claims {
		if c.verdict != wantVerdicts[c.id] {
			t.Errorf("claim %s: %s (%s), want %s", c.id, c.verdict, c.why, wantVerdicts[c.id])
		}
	}
	for _, want := range []string{
		"Counts: holds 6, against 0, undecided 0, not enough data 0, judged 6, total 6.",
		"Counts: holds 3, against 0, undecided 3, not enough data 0, judged 6, total 6.",
		"| synth-math | voting | m | 3/3/3 |",
		"### Gains over SA-RL",
		"| 1.7B math Eval-Opt IP | +0.101 (+10.1 points) | eval-opt/synth-math/m ip |",
		"| 4B math Voting SP | -0.103 (-10.3 points) | voting/synth-math/l sp | +0.045 [",
		"| above | as the paper's, significantly | scale m stands in for 1.7B",
		"| no | opposite to the paper's, not significantly | scale l stands in for 4B",
		"scale m stands in for 1.7B, task synth-math for math",
		"Differing from SA-RL at the 95% level: ",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("section lacks %q", want)
		}
	}
	// per-cell rows carry estimates with intervals
	if n := len(regexp.MustCompile(`[+-]\d\.\d{3} \[-?\d\.\d{3}, -?\d\.\d{3}\] \| holds \|`).FindAllString(sec, -1)); n != 9 {
		t.Errorf("%d cell rows with a gain, its interval and the outcome holds, want 9 (6 of claim a, 3 of b)", n)
	}
	if again := readme(claimsStudy(t), nil, fixtureOpts); again != text {
		t.Errorf("two builds of the README differ\n%s", firstDiff(text, again))
	}
}

// TestReadmeClaimsCannotBeJudged: a study without multi-agent conditions
// says, for each claim, that it cannot be judged and why.
func TestReadmeClaimsCannotBeJudged(t *testing.T) {
	flat := func(int) []float64 { return []float64{0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4} }
	st, err := analysis.Analyze(analysistest.Study(analysistest.Arm{Workflow: "voting", Cond: "base", Task: "synth-math", Scale: "s", Seeds: 2, Curve: flat}))
	if err != nil {
		t.Fatal(err)
	}
	text := readme(st, nil, fixtureOpts)
	for _, want := range []string{
		"**Verdict: not testable at this budget.** No cell has base and a multi-agent condition (SP or IP), so the claim cannot be judged.",
		"**Verdict: not testable at this budget.** No cell has both SP and IP, so the claim cannot be judged.",
		"**Verdict: not testable at this budget.** No cell has IP runs, so the claim cannot be judged.",
		"**Verdict: not testable at this budget.** No cell has SP runs whose policy is shared by two or more roles, so the claim cannot be judged.",
		"No cell has SA-RL next to SP or IP.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("README lacks %q", want)
		}
	}
}

// TestClaimWords pins the words the report gives the typed results of
// analysis.CompareClaims: outcomes, verdicts, the reasons of gains and of
// majority tests, and the matching of the paper's headline cells.
func TestClaimWords(t *testing.T) {
	words := map[string]string{
		verdictWord(analysis.Reproduced):   "reproduced",
		verdictWord(analysis.Refuted):      "refuted",
		verdictWord(analysis.NotTestable):  "not testable at this budget",
		outcomeWord(analysis.Untestable):   "not testable",
		verdictWord(analysis.Inconclusive): "inconclusive",
		outcomeWord(analysis.Holds):        "holds",
		outcomeWord(analysis.Against):      "against",
		outcomeWord(analysis.Undecided):    "undecided",
		outcomeWord(analysis.NoData):       "not enough data",
		outcomeWord(analysis.Counted):      "counted",
		gainWhy(analysis.AboveZero):        "the interval lies above 0",
		gainWhy(analysis.BelowZero):        "the interval lies below 0",
		gainWhy(analysis.NoInterval):       "no interval could be computed",
		gainWhy(analysis.ZeroWidth):        "the interval has zero width",
		gainWhy(analysis.ContainsZero):     "the interval contains 0",
	}
	if len(words) != 15 {
		t.Errorf("%d distinct words for 15 verdicts, outcomes and reasons", len(words))
	}
	for got, want := range words {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}

	for _, tc := range []struct {
		test analysis.Test
		want string
	}{
		{analysis.Test{Reason: analysis.NoUnits}, "No cliff runs to judge."},
		{analysis.Test{Outcome: analysis.Holds, Reason: analysis.Majority, Tally: analysis.Tally{Holds: 2, NoData: 1}}, "It holds in 2 of 3 cliff runs, a strict majority."},
		{analysis.Test{Outcome: analysis.Against, Reason: analysis.HalfAgainst, Tally: analysis.Tally{Holds: 1, Against: 9}}, "It is against in 9 of 10 cliff runs, significantly more than half (one-sided binomial)."},
		{analysis.Test{Reason: analysis.Split, Tally: analysis.Tally{Holds: 1, Against: 1, Undecided: 1, NoData: 1}},
			"It holds in 1 of 4 cliff runs and is against in 1; the 1 undecided and 1 without enough data could tip it either way. With 4 cliff runs, no count against could refute it."},
		{analysis.Test{Reason: analysis.Split, Tally: analysis.Tally{Holds: 1, Against: 2, Undecided: 5}, RefuteAt: 7},
			"It holds in 1 of 8 cliff runs and is against in 2; the 5 undecided and 0 without enough data could tip it either way. To refute it, 7 of the 8 cliff runs would have to be against (one-sided binomial)."},
	} {
		if got := majorityWhy(tc.test, "cliff runs"); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.test, got, tc.want)
		}
	}
	if got, want := countsText(testText{counts: majorityCounts(analysis.Tally{Holds: 3, Against: 1, NoData: 2})}),
		"holds 3, against 1, undecided 0, not enough data 2, judged 4, total 6"; got != want {
		t.Errorf("counts %q, want %q", got, want)
	}
	if got, want := fewSeedsWhy([]analysis.CondSeeds{{Condition: "base", Seeds: 1}, {Condition: "ip", Seeds: 1}}),
		"base has 1 seed, ip has 1 seed; a cell is judged only with 2 or more seeds per condition, since one seed says nothing of the seed-to-seed spread"; got != want {
		t.Errorf("few seeds: %q, want %q", got, want)
	}

	cell := analysis.CellKey{Workflow: "voting", Task: "synth-math", Scale: "l"}
	for _, tc := range []struct {
		h          analysis.Headline
		label, why string
	}{
		{analysis.Headline{PaperScale: "1.7B", PaperWorkflow: "eval-opt", Condition: "ip", Match: analysis.ScalesUnmatched, Scales: 1, MathTasks: 1},
			"1.7B math Eval-Opt IP", "the study has 1 scale, not 3, so the paper's 1.7B cannot be matched by rank"},
		{analysis.Headline{PaperScale: "4B", PaperWorkflow: "voting", Condition: "sp", Match: analysis.TaskUnmatched, Scales: 3, MathTasks: 0},
			"4B math Voting SP", "the study has 0 tasks whose name contains math, not one, so the paper's math task cannot be matched"},
		{analysis.Headline{PaperScale: "4B", PaperWorkflow: "voting", Condition: "sp", Match: analysis.Matched, Scales: 3, MathTasks: 1, Cell: cell, Found: true},
			"4B math Voting SP", "scale l stands in for 4B, task synth-math for math"},
		{analysis.Headline{PaperScale: "4B", PaperWorkflow: "voting", Condition: "sp", Match: analysis.Matched, Scales: 3, MathTasks: 1, Cell: cell},
			"4B math Voting SP", "scale l stands in for 4B, task synth-math for math; the study has no sp and SA-RL in cell voting/synth-math/l"},
	} {
		if got := headlineLabel(tc.h); got != tc.label {
			t.Errorf("label %q, want %q", got, tc.label)
		}
		if got := headlineWhy(tc.h); got != tc.why {
			t.Errorf("why %q, want %q", got, tc.why)
		}
	}
}

// TestReadmeNoBaseRuns: a study without base runs says so for claim a,
// in its section and in the summary's table.
func TestReadmeNoBaseRuns(t *testing.T) {
	flat := func(int) []float64 { return []float64{0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4} }
	st, err := analysis.Analyze(analysistest.Study(analysistest.Arm{Workflow: "voting", Cond: "sp", Task: "synth-math", Scale: "s", Seeds: 2, Curve: flat}))
	if err != nil {
		t.Fatal(err)
	}
	text := readme(st, nil, fixtureOpts)
	for _, want := range []string{
		"**Verdict: not testable at this budget.** This study has no base runs (its matrix has no base condition), so the claim cannot be judged here.",
		"| **not testable at this budget** | this study has no base runs (its matrix has no base condition) |",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("README lacks %q", want)
		}
	}
}

// TestMainResults: the summary names the smallest p-value of the format-
// collapse comparisons only when it is below alpha.
func TestMainResults(t *testing.T) {
	st := &analysis.Study{}
	rate := func(k, n int) analysis.Rate { return analysis.ClopperPearson(k, n, 0.95) }
	cl := &analysis.Claims{CI: 0.95, Collapse: []analysis.CollapseGroup{{Task: "synth-math", IP: rate(9, 9), SP: rate(2, 9), P: 1e-3}, {IP: rate(16, 18), SP: rate(4, 18), P: 6.6e-5}}}
	got := strings.Join(mainResults(studyHeadline(st, cl)), " ")
	if want := "Strongest exact test: a role's format collapsed in 16 of 18 IP runs against 4 of 18 SP runs in voting and orch-workers (all tasks; one-sided Fisher exact p = 6.6e-05)."; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	cl.Collapse = []analysis.CollapseGroup{{IP: rate(3, 6), SP: rate(1, 6), P: 0.27}}
	if got := mainResults(studyHeadline(st, cl)); len(got) != 0 {
		t.Errorf("a p-value above alpha is named: %q", got)
	}
}

// TestHeadlineFigure: the figure linked under *Main results* draws the
// strongest exact test when it rejects, the gains otherwise, nothing
// without either, and renders the same bytes twice.
func TestHeadlineFigure(t *testing.T) {
	rate := func(k, n int) analysis.Rate { return analysis.ClopperPearson(k, n, 0.95) }
	gains := []condGain{{cond: "sa-rl", views: []float64{0.1, 0.05}}, {cond: "ip", views: []float64{-0.02}}}
	test := &headlineTest{labelA: "IP", labelB: "SP", a: rate(16, 18), b: rate(4, 18), p: 6.6e-5, condA: "ip", condB: "sp"}
	for _, tc := range []struct {
		name   string
		h      headline
		ok     bool
		inText string // in the title or caption
	}{
		{"test", headline{gains: gains, test: test}, true, "p = 6.6e-05"},
		{"gains", headline{gains: gains}, true, "gain of final accuracy"},
		{"nothing", headline{}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ok, err := headlineFigure(tc.h, 0.95)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if f.Kind != kindHeadline || f.Name != "headline" || len(f.PNG) == 0 || len(f.SVG) == 0 {
				t.Errorf("figure %q of kind %q, %d PNG bytes", f.Name, f.Kind, len(f.PNG))
			}
			if !strings.Contains(f.Title+" "+f.Caption, tc.inText) {
				t.Errorf("title %q and caption %q lack %q", f.Title, f.Caption, tc.inText)
			}
			again, _, err := headlineFigure(tc.h, 0.95)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(f.PNG, again.PNG) || !bytes.Equal(f.SVG, again.SVG) {
				t.Error("rendering twice gives different bytes")
			}
		})
	}
}

// TestRestsOn: the summary's cell of a claim is one short phrase per
// test, said once when every test reads the same.
func TestRestsOn(t *testing.T) {
	tally := func(h, a, u, nd int) analysis.Test {
		return analysis.Test{Tally: analysis.Tally{Holds: h, Against: a, Undecided: u, NoData: nd}}
	}
	late := func(n int) testText {
		return lateTestText("where", "", analysis.LateTest{Rates: []analysis.LateRate{{Group: "IP", Rate: analysis.ClopperPearson(0, n, 0.95)}}}, 0.05)
	}
	for _, tc := range []struct {
		name  string
		tests []testText
		want  string
	}{
		{"holds", []testText{majorityTest("a", "", "cells", tally(11, 0, 7, 0), nil)}, "holds in 11 of 18 judged cells"},
		{"against", []testText{majorityTest("a", "", "cells", tally(1, 2, 3, 0), nil)}, "holds in 1 and against in 2 of 6 judged cells"},
		{"too few seeds", []testText{majorityTest("a", "", "cells", tally(0, 0, 0, 1), nil)}, "no cells judged: 1 with not enough data"},
		{"none", []testText{majorityTest("a", "", "cliff runs", tally(0, 0, 0, 0), nil)}, "no cliff runs judged"},
		{"same phrase", []testText{late(0), late(0)}, "where, where: no runs to compare"},
		{"mixed", []testText{late(0), {name: "x", outcome: "undecided"}}, "where: no runs to compare; x: undecided"},
		{"no late phase", []testText{concentrationText(analysis.Concentration{RunsV: 36, RunsO: 18, LateRuns: 0, Test: analysis.Test{Reason: analysis.NoLatePhase}}, 0.95)}, "0 of 54 IP runs judged have a late phase"},
		{"cliffs", []testText{concentrationText(analysis.Concentration{RunsV: 6, CliffsV: 4, RunsO: 3, CliffsO: 1, LateRuns: 9, Test: analysis.Test{Reason: analysis.RateInterval}}, 0.95)}, "cliffs in 4 of 6 IP runs in voting and orch-workers, 1 of 3 elsewhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := restsOn(claimText{tests: tc.tests}); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
