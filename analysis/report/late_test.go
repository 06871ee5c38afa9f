package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/analysis/analysistest"
)

// lateStudy is a synthetic dynamics-style study: voting x synth-code x s,
// 400 steps at a constant rate validated every 20. withCliff gives IP a
// late cliff (a fall at step 300 from a peak at 240, after its generator's
// gradient amplification from step 51); otherwise every run learns and
// holds.
func lateStudy(t *testing.T, withCliff bool) *analysis.Study {
	t.Helper()
	curve := func(cliff bool) func(int) []float64 {
		return func(seed int) []float64 {
			out := make([]float64, 21)
			for i := range out {
				out[i] = 0.1 + 0.2*float64(min(i, 12))/12 + 0.01*float64(seed%2)
				if cliff && i >= 15 {
					out[i] = 0.02
				}
			}
			return out
		}
	}
	arms := []analysistest.Arm{
		{Workflow: "voting", Cond: "sp", Task: "synth-code", Scale: "s", Seeds: 3, Curve: curve(false), Long: true},
		{Workflow: "voting", Cond: "ip", Task: "synth-code", Scale: "s", Seeds: 3, Curve: curve(withCliff), Long: true, Amplify: withCliff},
	}
	st, err := analysis.Analyze(analysistest.Study(arms...))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestReadmeLateRules: a study that holds its rate through a long second
// half is judged by the late-training rules: the summary states the gate,
// claims c and d are the late rules' (not testable where an arm is
// missing, with the arm named), and the late-events table lists every
// trained run with its events.
func TestReadmeLateRules(t *testing.T) {
	cases := []struct {
		name      string
		cliff     bool
		gate      string
		cVerdict  string
		why       string
		lateCells int // runs whose cliff column says late
	}{
		{"gate open", true, "**The gate is open**", "not testable at this budget", "where not testable (no run is in the group of IP eval-opt", 3},
		{"gate closed", false, "**The gate is closed**", "not testable at this budget", "where not testable (the gate is closed", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := lateStudy(t, tc.cliff)
			if !analysis.LateStudy(st) {
				t.Fatal("a 400-step constant-rate study is not judged by the late rules")
			}
			text := readme(st, nil, fixtureOpts)
			for _, want := range []string{
				tc.gate,
				"| c. IP's late accuracy cliffs concentrate in voting and orch-workers, are predicted by same-role gradient amplification, and the coherence regularizer (I6) prevents them (late-training rules). | **" + tc.cVerdict + "**",
				"## Late events and the gate",
				tc.why,
			} {
				if !strings.Contains(text, want) {
					t.Errorf("README lacks %q", want)
				}
			}
			if got := strings.Count(text, " late | "); got < tc.lateCells {
				t.Errorf("%d late cliffs in the late-events table, want %d", got, tc.lateCells)
			}
			// every IP run falls, so the signature's rarity cannot be measured;
			// each cliff run's signature leads its fall
			if tc.cliff && (!strings.Contains(text, "#### signature: not testable\n\nevery IP run has a late cliff") ||
				!strings.Contains(text, "IP cliff runs whose signature leads 3/3")) {
				t.Errorf("the signature test of the amplified cliff runs is not as expected")
			}
			if text != readme(st, nil, fixtureOpts) {
				t.Error("README not byte-identical on a rebuild")
			}
		})
	}
	// the short synthetic studies are judged by the short-run rules
	if analysis.LateStudy(claimsStudy(t)) {
		t.Error("a 100-step study is judged by the late rules")
	}
}

// TestWriteInterventions: the section beside claim c lists each
// intervention's collapse rates, and says that I1 lowering them where I6
// did not does not tell drift from coherence, only there; the
// summary's line sums the conditions; without an intervention arm both
// are empty.
func TestWriteInterventions(t *testing.T) {
	rate := func(k, n int) analysis.Rate { return analysis.ClopperPearson(k, n, 0.95) }
	row := func(iv, cond string, kw, ko int, p float64) analysis.InterventionCollapse {
		return analysis.InterventionCollapse{Intervention: iv, Condition: cond, Recipes: 4, With: rate(kw, 12), Without: rate(ko, 12),
			LateWith: rate(0, 12), LateWithout: rate(2, 12), P: p, CeilingDiff: -0.016}
	}
	cases := []struct {
		name      string
		rows      []analysis.InterventionCollapse
		want      []string // in the section
		finding   string   // in the summary's line ("" none)
		notDrift  bool     // the drift sentence must be absent
		noSection bool
	}{
		{name: "no intervention arm", noSection: true},
		{name: "I1 lowers, I6 does not", rows: []analysis.InterventionCollapse{row("I1", "ip", 0, 12, 3.7e-7), row("I6", "ip", 12, 12, 1)},
			want:    []string{"### What the interventions did", "| I1 | ip | 4 | 0/12 = 0.000 [0.000, 0.265] | 12/12 = 1.000 [0.735, 1.000] | 3.7e-07 |", "Under IP, I1 lowered the format-collapse rate"},
			finding: "with I1, 0 of 12 runs had a role's format collapse, against 12 of 12 without it in the same cells; with I6, 12 of 12"},
		{name: "I1 lowers under both conditions", rows: []analysis.InterventionCollapse{row("I1", "ip", 0, 12, 3.7e-7), row("I1", "sp", 0, 12, 1.7e-4), row("I6", "ip", 12, 12, 1), row("I6", "sp", 7, 12, 0.33)},
			want: []string{"Under IP and SP, I1 lowered the format-collapse rate"}, finding: "Under IP and SP, I1 lowered the collapse rate and I6 did not"},
		{name: "both lower: no drift reading", rows: []analysis.InterventionCollapse{row("I1", "ip", 0, 12, 3.7e-7), row("I6", "ip", 1, 12, 1e-5)},
			want: []string{"| I6 | ip | 4 | 1/12"}, finding: "with I6, 1 of 12", notDrift: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lc := &analysis.LateClaims{Interventions: tc.rows, Alpha: 0.05, Gate: analysis.Gate{CliffControlled: true}}
			var b strings.Builder
			writeInterventions(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }, lc)
			got, f := b.String(), interventionFinding(lc)
			if tc.noSection {
				if got != "" || f != "" {
					t.Fatalf("section %q, finding %q; want none", got, f)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("section lacks %q:\n%s", w, got)
				}
			}
			if !strings.Contains(f, tc.finding) {
				t.Errorf("finding %q lacks %q", f, tc.finding)
			}
			const drift0 = "does not tell drift from gradient coherence"
			if drift := strings.Contains(got, drift0) || strings.Contains(f, drift0); drift == tc.notDrift {
				t.Errorf("drift sentence present %v, want %v", drift, !tc.notDrift)
			}
		})
	}
}

// TestSignatureFinding: claim c's against on a common signature is
// followed by a finding that names the roles carrying it and how many of
// them have one agent; any other outcome gets no such finding.
func TestSignatureFinding(t *testing.T) {
	roles := []analysis.SignatureRole{{Role: "aggregator", Runs: 10}, {Role: "evaluator", SameRole: true, Runs: 3}}
	cases := []struct {
		name  string
		sig   analysis.LateTest
		quiet []analysis.SignatureRole
		want  string // "" no finding
	}{
		{name: "common signature", sig: analysis.LateTest{Outcome: analysis.Against, Reason: analysis.CommonSignature}, quiet: roles,
			want: "sits first on aggregator in 10, evaluator in 3; in 10 of these 13 runs on a role with one agent"},
		{name: "against because few lead", sig: analysis.LateTest{Outcome: analysis.Against, Reason: analysis.FewLead}, quiet: roles},
		{name: "undecided", sig: analysis.LateTest{Outcome: analysis.Undecided, Reason: analysis.Between}, quiet: roles},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &analysis.Study{Params: analysis.DefaultParams()}
			cl := &analysis.Claims{Late: &analysis.LateClaims{Cliffs: analysis.LateCliffClaim{Verdict: analysis.Refuted, Signature: tc.sig, QuietSignature: tc.quiet}}}
			got := strings.Join(premiseFindings(st, cl), "\n")
			if tc.want == "" {
				if strings.Contains(got, "signature sits first") {
					t.Errorf("unexpected signature finding: %s", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("findings %q lack %q", got, tc.want)
			}
		})
	}
}

// TestWriteByRate: the late cliffs by learning rate, as the section's table
// and the summary's line print them, and what the trend test's outcome
// says; nothing in a study without rate rungs.
func TestWriteByRate(t *testing.T) {
	ev := func(cond, lr string, fall int64) analysis.RunEvents {
		e := analysis.RunEvents{Cell: analysis.CellKey{Workflow: "voting", Task: "synth-math", Scale: "s"}, Condition: cond, MainRecipe: true,
			Settings: analysis.RunSettings{LR: lr}}
		if fall > 0 {
			e.Events.Cliff = analysis.LateCliff{Found: true, FallStep: fall, Late: fall > 200}
		}
		return e
	}
	runs := func(lo, hi []int64) []analysis.RunEvents {
		var out []analysis.RunEvents
		for i, f := range lo {
			out = append(out, ev([]string{"sp", "ip"}[i%2], "0.003", f))
		}
		for i, f := range hi {
			out = append(out, ev([]string{"sp", "ip"}[i%2], "0.004", f))
		}
		return out
	}
	none := make([]int64, 8)
	cases := []struct {
		name      string
		runs      []analysis.RunEvents
		want      []string // in the finding
		row       string   // in the section ("" none checked)
		noSection bool
	}{
		{name: "one rate", runs: runs(none, nil), noSection: true},
		{name: "more at the higher rate", runs: runs(none, []int64{300, 300, 300, 300, 300, 0, 100, 0}),
			want: []string{"0.003 0/8, 0.004 5/8", "at 0.004 by condition and workflow ip voting 2/4, sp voting 3/4", "p 0.0128, below 0.05: more common at the higher rate"},
			row:  "| 0.004 | all | 8 | 5/8 = 0.625 [0.245, 0.915] | 6/8 = 0.750 [0.349, 0.968] |"},
		{name: "not significant", runs: runs(none[:4], []int64{300, 0, 0, 0}),
			want: []string{"0.003 0/4, 0.004 1/4", "p 0.5, not below 0.05 (the smallest excess it could detect at these numbers of runs: 1.000)"}},
		{name: "too few to tell", runs: runs(none[:2], []int64{300, 0}),
			want: []string{"0.003 0/2, 0.004 1/2", "p 0.5, and no difference is detectable at these numbers of runs"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lc := &analysis.LateClaims{Alpha: 0.05}
			lc.ByRate, lc.RateTrend = analysis.CliffsByRate(analysis.Gate{Runs: tc.runs}, 0.95)
			var b strings.Builder
			writeByRate(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }, lc)
			got, f := b.String(), rateFinding(lc)
			if tc.noSection {
				if got != "" || f != "" {
					t.Fatalf("section %q, finding %q; want none", got, f)
				}
				return
			}
			if !strings.Contains(got, tc.row) {
				t.Errorf("section lacks %q:\n%s", tc.row, got)
			}
			for _, w := range tc.want {
				if !strings.Contains(f, w) {
					t.Errorf("finding lacks %q:\n%s", w, f)
				}
			}
			if !strings.Contains(got, rateTrendText(lc)) {
				t.Errorf("section lacks the trend %q", rateTrendText(lc))
			}
		})
	}
}
