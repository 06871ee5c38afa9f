package report

import (
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
