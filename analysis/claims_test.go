package analysis

import (
	"math"
	"testing"

	"github.com/marlowlab/marlow/analysis/analysistest"
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

func TestClaimVerdicts(t *testing.T) {
	amp := func(a *arm) { a.Amplify = true }
	tests := []struct {
		name   string
		claim  string // "a".."d"
		arms   []arm
		want   string
		counts map[string]int // test 0's counts that must match
		tests  []string       // the outcome of each test, when given
	}{
		// a: the better of SP and IP against base
		{"a reproduced: SP and IP end far above base", "a", join(
			cells("base", 3, flat(0.2), voting, twoScales, nil),
			cells("sp", 3, rise(0.2, 0.7), voting, twoScales, nil),
			cells("ip", 3, rise(0.2, 0.6), voting, twoScales, nil)),
			Reproduced, map[string]int{Holds: 2, "total": 2}, nil},
		{"a not reproduced: both end far below base", "a", join(
			cells("base", 3, flat(0.7), voting, twoScales, nil),
			cells("sp", 3, rise(0.7, 0.2), voting, twoScales, nil),
			cells("ip", 3, rise(0.7, 0.25), voting, twoScales, nil)),
			NotReproduced, map[string]int{Against: 2, "total": 2}, nil},
		{"a inconclusive: base has one seed", "a", join(
			cells("base", 1, flat(0.2), voting, twoScales, nil),
			cells("sp", 3, rise(0.2, 0.7), voting, twoScales, nil),
			cells("ip", 3, rise(0.2, 0.6), voting, twoScales, nil)),
			Inconclusive, map[string]int{NoData: 2, "judged": 0}, nil},
		{"a inconclusive: no gain distinguishable from zero", "a", join(
			cells("base", 3, flat(0.4), voting, twoScales, nil),
			cells("sp", 3, flat(0.4), voting, twoScales, nil),
			cells("ip", 3, flat(0.4), voting, twoScales, nil)),
			Inconclusive, map[string]int{Undecided: 2}, nil},
		{"a cannot be judged: no multi-agent condition", "a",
			cells("base", 3, flat(0.4), voting, twoScales, nil),
			Inconclusive, map[string]int{"total": 0}, nil},

		// b: IP's ceiling against SP's
		{"b reproduced: IP peaks far above SP", "b", join(
			cells("sp", 3, rise(0.3, 0.4), voting, twoScales, nil),
			cells("ip", 3, rise(0.3, 0.8), voting, twoScales, nil)),
			Reproduced, map[string]int{Holds: 2}, nil},
		{"b not reproduced: SP peaks far above IP", "b", join(
			cells("sp", 3, rise(0.3, 0.8), voting, twoScales, nil),
			cells("ip", 3, rise(0.3, 0.4), voting, twoScales, nil)),
			NotReproduced, map[string]int{Against: 2}, nil},
		{"b inconclusive: one cell each way and one undecided", "b", join(
			cells("sp", 3, rise(0.3, 0.4), voting, []string{"s"}, nil),
			cells("ip", 3, rise(0.3, 0.8), voting, []string{"s"}, nil),
			cells("sp", 3, rise(0.3, 0.8), voting, []string{"m"}, nil),
			cells("ip", 3, rise(0.3, 0.4), voting, []string{"m"}, nil),
			cells("sp", 3, rise(0.3, 0.5), voting, []string{"l"}, nil),
			cells("ip", 3, rise(0.3, 0.5), voting, []string{"l"}, nil)),
			// 1 holds, 1 against, 1 undecided of 3: neither a strict
			// majority for nor half against
			Inconclusive, map[string]int{Holds: 1, Against: 1, Undecided: 1}, nil},

		// c: IP cliffs in voting and orch-workers, after amplification
		{"c reproduced: cliffs in voting and orch-workers, amplified first", "c", join(
			cells("ip", 3, peak(0.3, 0.7, 0.2), []string{"voting", "orch-workers"}, []string{"s"}, amp),
			cells("ip", 3, func(seed int) []float64 { // seed 3 without a cliff
				if seed == 3 {
					return rise(0.3, 0.7)(seed)
				}
				return peak(0.3, 0.7, 0.2)(seed)
			}, voting, []string{"m"}, amp),
			cells("ip", 3, rise(0.3, 0.7), []string{"eval-opt"}, twoScales, nil)),
			Reproduced, map[string]int{CountCliffsV: 8, CountRunsO: 6, CountCliffsO: 0}, []string{Holds, Holds}},
		{"c not reproduced: no IP run falls off a cliff", "c", join(
			cells("ip", 3, rise(0.3, 0.7), []string{"voting", "orch-workers", "eval-opt"}, twoScales, amp)),
			NotReproduced, map[string]int{CountCliffsV: 0, CountCliffsO: 0, CountRunsV: 12}, []string{Against, Undecided}},
		{"c not reproduced: cliffs without amplification", "c", join(
			cells("ip", 3, peak(0.3, 0.7, 0.2), []string{"voting", "orch-workers"}, []string{"s"}, nil),
			cells("ip", 3, rise(0.3, 0.7), []string{"eval-opt"}, twoScales, nil)),
			NotReproduced, nil, []string{"", Against}},
		{"c inconclusive: IP has one seed per cell", "c", join(
			cells("ip", 1, peak(0.3, 0.7, 0.2), []string{"voting", "orch-workers", "eval-opt"}, twoScales, amp)),
			Inconclusive, map[string]int{CountNoData: 6, CountRunsV: 0}, []string{Undecided, Undecided}},
		{"c inconclusive: no other workflow to compare with", "c", join(
			cells("ip", 3, peak(0.3, 0.7, 0.2), voting, twoScales, amp)),
			Inconclusive, map[string]int{CountRunsO: 0, CountCliffsV: 6}, []string{Undecided, Holds}},

		// d: role capture under SP
		{"d reproduced: the aggregator is captured in every SP run", "d", join(
			cells("sp", 3, rise(0.3, 0.5), voting, twoScales, captureMod(analysistest.Captured))),
			Reproduced, map[string]int{Holds: 2}, nil},
		{"d not reproduced: no SP run captured", "d", join(
			cells("sp", 3, rise(0.3, 0.5), voting, twoScales, captureMod(analysistest.NotCaptured))),
			NotReproduced, map[string]int{Against: 2}, nil},
		{"d inconclusive: one cell captured, one not, one without capture rows", "d", join(
			cells("sp", 3, rise(0.3, 0.5), voting, []string{"s"}, captureMod(analysistest.Captured)),
			cells("sp", 3, rise(0.3, 0.5), voting, []string{"m"}, captureMod(analysistest.NotCaptured)),
			cells("sp", 3, rise(0.3, 0.5), voting, []string{"l"}, nil)),
			Inconclusive, map[string]int{Holds: 1, Against: 1, NoData: 1}, nil},
		{"d inconclusive: SP has one seed", "d", join(
			cells("sp", 1, rise(0.3, 0.5), voting, twoScales, captureMod(analysistest.Captured))),
			Inconclusive, map[string]int{NoData: 2}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := Analyze(analysistest.Study(tc.arms...))
			if err != nil {
				t.Fatal(err)
			}
			cl := CompareClaims(st)
			var c *Claim
			for i := range cl.Claims {
				if cl.Claims[i].ID == tc.claim {
					c = &cl.Claims[i]
				}
			}
			if c == nil {
				t.Fatalf("no claim %s", tc.claim)
			}
			if c.Verdict != tc.want {
				t.Errorf("verdict %q, want %q (%s)", c.Verdict, tc.want, c.Why)
				for _, ts := range c.Tests {
					for _, u := range ts.Units {
						t.Logf("%s %s %s: %s (%s)", ts.Name, u.Cell, u.Run, u.Outcome, u.Why)
					}
				}
			}
			if c.Why == "" || c.Rule == "" || c.Tests[0].Rule == "" {
				t.Errorf("claim %s lacks its reason or rule: why %q, rule %q", c.ID, c.Why, c.Rule)
			}
			for i, o := range tc.tests {
				if o != "" && c.Tests[i].Outcome != o {
					t.Errorf("test %q: %s, want %s (%s)", c.Tests[i].Name, c.Tests[i].Outcome, o, c.Tests[i].Why)
				}
			}
			for label, n := range tc.counts {
				if got := c.Tests[0].CountOf(label); got != n {
					t.Errorf("count %q = %d, want %d (counts %v)", label, got, n, c.Tests[0].Counts)
				}
			}
		})
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
	c := CompareClaims(st).Claims[2]
	conc, prec := c.Tests[0], c.Tests[1]
	if len(conc.Units) != 2 || conc.Units[0].Outcome != Counted {
		t.Fatalf("concentration units %+v", conc.Units)
	}
	var rate Estimate
	for _, u := range conc.Units {
		if u.Cell.Workflow == "voting" {
			rate = u.Evidence[1].Value
		}
	}
	if rate.Value != 1 || !rate.HasCI() {
		t.Errorf("voting cliff rate %+v, want 1 with an interval", rate)
	}
	if len(prec.Units) != 3 {
		t.Fatalf("%d cliff-run units, want 3", len(prec.Units))
	}
	for _, u := range prec.Units {
		if u.Outcome != Holds || u.Evidence[1].Count != "51" || u.Run == "" {
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
	if !h.Found || h.Cell != (CellKey{"eval-opt", "synth-math", "m"}) || h.Condition != "ip" || !near(h.PaperGain, 0.101) || h.Gain.Value <= 0 {
		t.Errorf("headline 0: %+v", h)
	}
	h = cl.Headlines[1]
	if !h.Found || h.Cell != (CellKey{"voting", "synth-math", "l"}) || h.Condition != "sp" || !near(h.PaperGain, -0.103) {
		t.Errorf("headline 1: %+v", h)
	}

	// two scales: the paper's cells cannot be matched by rank
	st, err = Analyze(analysistest.Study(join(
		cells("sa-rl", 2, rise(0.3, 0.4), []string{"single"}, twoScales, func(a *arm) { a.EvalWorkflows = []string{"single", "voting"} }),
		cells("sp", 2, rise(0.3, 0.4), voting, twoScales, nil))...))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range CompareClaims(st).Headlines {
		if h.Found || h.Why == "" {
			t.Errorf("two scales: headline %+v matched", h)
		}
	}
}

func TestMajority(t *testing.T) {
	tests := []struct {
		h, a, u, d int
		want       string
	}{
		{0, 0, 0, 0, Undecided},
		{2, 0, 0, 1, Holds},
		{2, 0, 0, 2, Undecided}, // 2 of 4 is not a strict majority
		{1, 2, 1, 0, Against},   // half against
		{1, 1, 0, 0, Against},
		{1, 1, 1, 0, Undecided},
		{0, 1, 1, 1, Undecided},
		{3, 2, 0, 0, Holds},
	}
	for _, tc := range tests {
		var ts ClaimTest
		for _, x := range []struct {
			n int
			o string
		}{{tc.h, Holds}, {tc.a, Against}, {tc.u, Undecided}, {tc.d, NoData}} {
			for range x.n {
				ts.Units = append(ts.Units, ClaimUnit{Outcome: x.o})
			}
		}
		majority(&ts, "cells")
		if ts.Outcome != tc.want {
			t.Errorf("holds %d against %d undecided %d no data %d: %s, want %s", tc.h, tc.a, tc.u, tc.d, ts.Outcome, tc.want)
		}
		if ts.CountOf("judged") != tc.h+tc.a+tc.u || ts.CountOf("total") != tc.h+tc.a+tc.u+tc.d {
			t.Errorf("counts %v", ts.Counts)
		}
	}
}
