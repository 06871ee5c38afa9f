package analysis

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis/analysistest"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

func pts(acc ...float64) []Point {
	out := make([]Point, len(acc))
	for i, a := range acc {
		out[i] = Point{Step: int64(i * 10), Acc: a}
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 || (math.IsNaN(a) && math.IsNaN(b)) }

func TestMetricsAndCliff(t *testing.T) {
	p := DefaultParams()
	tests := []struct {
		name                       string
		curve                      []Point
		ceiling, final, floor, auc float64
		ceilStep                   int64
		cliff                      bool
		fallStep                   int64
	}{
		{"clean rise", pts(0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0), 1.0, 0.9, 0.8, 0.6, 80, false, -1},
		{"plateau", pts(0.5, 0.5, 0.5, 0.5, 0.5), 0.5, 0.5, 0.5, 0.5, 0, false, -1},
		{"noisy plateau", pts(0.5, 0.55, 0.48, 0.53, 0.47, 0.52, 0.49, 0.54, 0.5), 0.55, 0.51, 0.49, 0.51, 10, false, -1},
		{"early dip that recovers", pts(0.5, 0.3, 0.25, 0.4, 0.55, 0.6, 0.62, 0.62, 0.61), 0.62, 0.6166666666666667, 0.61, 0.486875, 60, false, -1},
		{"late cliff", pts(0.3, 0.4, 0.5, 0.6, 0.7, 0.7, 0.4, 0.3, 0.2), 0.7, 0.3, 0.2, 0.48125, 40, true, 60},
		{"early fall stays low", pts(0.3, 0.7, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3), 0.7, 0.3, 0.3, 0.35, 10, false, 20},
		{"single point (base)", pts(0.42), 0.42, 0.42, 0.42, 0.42, 0, false, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ComputeMetrics(tc.curve, p)
			if err != nil {
				t.Fatal(err)
			}
			if !near(m.Ceiling, tc.ceiling) || m.CeilingStep != tc.ceilStep || !near(m.Final, tc.final) || !near(m.Floor, tc.floor) || !near(m.AUC, tc.auc) {
				t.Errorf("got ceiling %v@%d final %v floor %v auc %v; want %v@%d %v %v %v", m.Ceiling, m.CeilingStep, m.Final, m.Floor, m.AUC, tc.ceiling, tc.ceilStep, tc.final, tc.floor, tc.auc)
			}
			if !near(m.Drop, m.Ceiling-m.Final) || m.Base != tc.curve[0].Acc {
				t.Errorf("drop %v base %v inconsistent", m.Drop, m.Base)
			}
			if m.Cliff.Cliff != tc.cliff || m.Cliff.FallStep != tc.fallStep {
				t.Errorf("cliff %v fall step %d (threshold %v), want %v %d", m.Cliff.Cliff, m.Cliff.FallStep, m.Cliff.Threshold, tc.cliff, tc.fallStep)
			}
		})
	}
}

func TestComputeMetricsErrors(t *testing.T) {
	if _, err := ComputeMetrics(nil, DefaultParams()); err == nil {
		t.Error("empty curve: no error")
	}
	if _, err := ComputeMetrics([]Point{{5, 0.1}, {5, 0.2}}, DefaultParams()); err == nil || !strings.Contains(err.Error(), "step 5") {
		t.Errorf("repeated step: error %v", err)
	}
}

func TestParams(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]float64
		want func(*Params)
		err  string
	}{
		{"defaults", nil, func(*Params) {}, ""},
		{"override", map[string]float64{"cliff_abs": 0.2, "ngram": 4, "bootstrap_seed": 9}, func(p *Params) { p.CliffAbs, p.NGram, p.BootstrapSeed = 0.2, 4, 9 }, ""},
		{"unknown key", map[string]float64{"cliff": 1}, nil, `unknown analysis parameter "cliff"`},
		{"fractional ngram", map[string]float64{"ngram": 2.5}, nil, "ngram"},
		{"ci out of range", map[string]float64{"ci": 1.5}, nil, "ci"},
		{"nan", map[string]float64{"amp_k": math.NaN()}, nil, "amp_k"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParamsFromMap(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := DefaultParams()
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v want %+v", got, want)
			}
		})
	}
}

// TestAmplificationEMACosine: where the logs have a role's cosine to its
// gradient EMA (coherence_cos), a step counts only when it is above amp_cos
// too, for a role with one agent as for one with several.
func TestAmplificationEMACosine(t *testing.T) {
	p := DefaultParams()
	ramp := func(s int) float64 {
		if s >= 60 {
			return 1 + 0.5*float64(s-59)
		}
		return 1
	}
	nan := func(int) float64 { return math.NaN() }
	// The EMA cosine is evidence beside the test: it never gates it, and
	// EMAAligned counts the steps over the norm threshold where it exceeds
	// amp_cos. The same-role cosine still gates a role with several agents.
	tests := []struct {
		name      string
		agentCos  func(int) float64
		emaCos    func(int) float64
		amplified bool
		ema       bool
		aligned   bool // every step over the threshold aligned with the EMA
	}{
		{"one agent, aligned with its EMA", nan, analysistest.Const(0.8), true, true, true},
		{"one agent, not aligned with its EMA", nan, analysistest.Const(0.1), true, true, false},
		{"several agents agree, not aligned with the EMA", analysistest.Const(0.8), analysistest.Const(0.1), true, true, false},
		{"several agents agree, aligned with the EMA", analysistest.Const(0.8), analysistest.Const(0.9), true, true, true},
		{"several agents disagree, aligned with the EMA", analysistest.Const(0.1), analysistest.Const(0.9), false, true, false},
		{"no EMA in the logs: the norm alone", nan, nan, true, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows := analysistest.RoleSteps("r", "pol", "aggregator", 100, ramp, tc.agentCos, analysistest.Const(1))
			for i := range rows {
				rows[i].CoherenceCos = tc.emaCos(int(rows[i].Step))
				if i == 0 {
					rows[i].CoherenceCos = math.NaN() // no EMA yet at the first trained step
				}
			}
			got := DetectAmplification(rows, Cliff{FallStep: -1}, p)
			if len(got) != 1 {
				t.Fatalf("%d results, want 1", len(got))
			}
			a := got[0]
			if a.Amplified != tc.amplified || a.EMA != tc.ema {
				t.Fatalf("amplified %v EMA %v; want %v %v", a.Amplified, a.EMA, tc.amplified, tc.ema)
			}
			want := 0
			if tc.aligned {
				want = len(a.Steps)
			}
			if a.EMAAligned != want || len(a.EMACos) != len(a.Steps) {
				t.Errorf("EMA-aligned steps %d of %d (%d cosines), want %d", a.EMAAligned, len(a.Steps), len(a.EMACos), want)
			}
		})
	}
}

func TestAmplification(t *testing.T) {
	p := DefaultParams()
	nan := func(int) float64 { return math.NaN() }
	ramp := func(s int) float64 {
		if s >= 60 {
			return 1 + 0.5*float64(s-59)
		}
		return 1
	}
	cliff := Cliff{Cliff: true, FallStep: 80}
	tests := []struct {
		name        string
		norm, cos   func(int) float64
		cliff       Cliff
		amplified   bool
		before      bool
		firstStep   int64
		earlyMedian float64
	}{
		{"amplification before a cliff", ramp, analysistest.Const(0.8), cliff, true, true, 64, 1},
		{"amplification after the cliff", func(s int) float64 {
			if s >= 90 {
				return 10
			}
			return 1
		}, analysistest.Const(0.8), cliff, true, false, 90, 1},
		{"norm rises but agents disagree", ramp, analysistest.Const(0.1), cliff, false, false, -1, 1},
		{"single-agent role is tested on its norm alone", ramp, nan, cliff, true, true, 64, 1},
		{"a spike is not sustained", func(s int) float64 {
			if s == 70 || s == 74 {
				return 10
			}
			return 1
		}, analysistest.Const(0.8), cliff, false, false, 70, 1},
		{"warm-up steps are left out of the baseline", func(s int) float64 {
			if s <= 5 {
				return 0.01
			}
			return 1
		}, analysistest.Const(0.8), cliff, false, false, -1, 1},
		{"steady norm", analysistest.Const(2), analysistest.Const(0.9), cliff, false, false, -1, 2},
		{"amplified without a cliff", ramp, analysistest.Const(0.8), Cliff{FallStep: -1}, true, false, 64, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows := analysistest.RoleSteps("r", "pol", "generator", 100, tc.norm, tc.cos, analysistest.Const(1))
			got := DetectAmplification(rows, tc.cliff, p)
			if len(got) != 1 {
				t.Fatalf("%d results, want 1", len(got))
			}
			a := got[0]
			if a.Amplified != tc.amplified || a.BeforeCliff != tc.before || a.EarlyMedian != tc.earlyMedian {
				t.Fatalf("amplified %v before %v median %v; want %v %v %v", a.Amplified, a.BeforeCliff, a.EarlyMedian, tc.amplified, tc.before, tc.earlyMedian)
			}
			if tc.amplified {
				if a.Steps[0] != tc.firstStep || a.Norms[0] <= p.AmpK*a.EarlyMedian || a.Cos[0] <= p.AmpCos {
					t.Errorf("evidence step %d norm %v cos %v; want first step %d", a.Steps[0], a.Norms[0], a.Cos[0], tc.firstStep)
				}
				if a.Sustained < a.Steps[AmpSustainK-1] || a.Sustained > a.Steps[0]+AmpSustainN-1 {
					t.Errorf("sustained at %d, want the step closing the first %d-of-%d window from %d", a.Sustained, AmpSustainK, AmpSustainN, a.Steps[0])
				}
			} else if a.Sustained != -1 || (tc.firstStep < 0 && len(a.Steps) != 0) || (tc.firstStep >= 0 && a.Steps[0] != tc.firstStep) {
				t.Errorf("evidence steps %v sustained %d for a non-amplified role", a.Steps, a.Sustained)
			}
			// warm-up steps 1..5, baseline steps 6..24 (early_frac of the rest)
			if a.EarlyUntil != 24 {
				t.Errorf("early until %d, want 24", a.EarlyUntil)
			}
		})
	}
}

func TestDominance(t *testing.T) {
	rows := append(analysistest.RoleSteps("r", "shared", "generator", 10, analysistest.Const(2), analysistest.Const(0.5), func(s int) float64 {
		if s <= 3 {
			return 0.4
		}
		return 0.9
	}), analysistest.RoleSteps("r", "shared", "aggregator", 10, analysistest.Const(1), analysistest.Const(0.5), func(s int) float64 {
		if s <= 3 {
			return 0.6
		}
		return 0.1
	})...)
	rows = append(rows, analysistest.RoleSteps("r", "solo", "evaluator", 10, analysistest.Const(1), analysistest.Const(1), analysistest.Const(1))...)
	got := DetectDominance(rows)
	if len(got) != 1 || got[0].Policy != "shared" {
		t.Fatalf("got %d dominance results (%+v), want one for policy shared", len(got), got)
	}
	d := got[0]
	if d.DominantRole != "generator" || !near(d.DominantFrac, 0.7) {
		t.Errorf("dominant %s frac %v, want generator 0.7", d.DominantRole, d.DominantFrac)
	}
	if !reflect.DeepEqual(d.Roles, []string{"aggregator", "generator"}) || !near(d.MeanShare[1], 0.75) || !near(d.MeanShare[0], 0.25) {
		t.Errorf("roles %v mean shares %v", d.Roles, d.MeanShare)
	}
	if d.Dominant[0] != "aggregator" || d.Dominant[9] != "generator" {
		t.Errorf("per-step dominant %v", d.Dominant)
	}
}

func TestCapture(t *testing.T) {
	p := DefaultParams()
	dom := Dominance{Policy: "shared", Roles: []string{"aggregator", "generator"}, DominantRole: "generator"}
	st := []int64{0, 50, 100}
	captured := func(j int) string {
		return strings.Replace(analysistest.Generator(j+1), "Answer:", "Selected answer:", 1)
	}
	// long: the generator's text followed by many distinct words, so that
	// the aggregator ends far past the generator's length without repeating
	long := func(j int) string {
		w := make([]string, 60)
		for i := range w {
			w[i] = fmt.Sprintf("w%d_%d", j, i)
		}
		return captured(j) + " " + strings.Join(w, " ")
	}
	// loop: a phrase repeated, cut at the token cap
	loop := func(j int) string { return strings.Repeat(fmt.Sprintf("%d + %d = ", j, j), 20) }
	tests := []struct {
		name                        string
		formatEnd                   float64
		endText                     func(int) string
		finish                      string // finish reason of the aggregator's outputs at the end
		collapse, conv, degen, capt bool
	}{
		{"capture with format collapse", 0.3, captured, "stop", true, true, false, true},
		{"outputs converge without format collapse", 0.9, captured, "stop", false, true, false, false},
		{"format collapse without converging outputs", 0.3, func(j int) string { return "Selected: ?" }, "stop", true, false, false, false},
		{"length past the overshoot", 0.3, long, "stop", true, false, false, false},
		{"converging but cut at the token cap", 0.3, captured, "length", true, true, true, false},
		{"repetition loop converging in length and n-grams", 0.3, loop, "stop", true, true, true, false},
		{"no change", 0.95, analysistest.Aggregator, "stop", false, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &runlog.Run{Manifest: analysistest.Manifest("r", "voting", "sp", "t", "s", 1)}
			r.Evals = analysistest.RoleEvals("r", "voting", "aggregator", st, func(i int) float64 {
				if i == 2 {
					return tc.formatEnd
				}
				return 0.95
			}, analysistest.Const(10))
			end := analysistest.RoleSamples("r", "voting", "aggregator", "shared", 100, 5, tc.endText)
			for i := range end {
				end[i].Finish = tc.finish
			}
			r.Samples = append(r.Samples, analysistest.RoleSamples("r", "voting", "generator", "shared", 0, 5, analysistest.Generator)...)
			r.Samples = append(r.Samples, analysistest.RoleSamples("r", "voting", "generator", "shared", 100, 5, analysistest.Generator)...)
			r.Samples = append(r.Samples, analysistest.RoleSamples("r", "voting", "aggregator", "shared", 0, 5, analysistest.Aggregator)...)
			r.Samples = append(r.Samples, end...)
			got := DetectCapture(r, "voting", dom, p)
			if len(got) != 1 {
				t.Fatalf("%d results, want 1", len(got))
			}
			c := got[0]
			if c.FormatCollapse != tc.collapse || c.Converging != tc.conv || c.Degenerate != tc.degen || c.Captured != tc.capt {
				t.Errorf("collapse %v converging %v degenerate %v captured %v (sim %v->%v, len ratio %v->%v); want %v %v %v %v",
					c.FormatCollapse, c.Converging, c.Degenerate, c.Captured, c.SimBase, c.SimEnd, c.LenRatioBase, c.LenRatioEnd, tc.collapse, tc.conv, tc.degen, tc.capt)
			}
			if c.BaseStep != 0 || c.EndStep != 100 || c.ExampleBase != analysistest.Aggregator(0) || c.ExampleEnd != tc.endText(0) || c.DominantExampleEnd != analysistest.Generator(0) {
				t.Errorf("evidence steps %d..%d examples %q %q %q", c.BaseStep, c.EndStep, c.ExampleBase, c.ExampleEnd, c.DominantExampleEnd)
			}
			// the degeneration detector sees the same outputs
			var deg *Degeneration
			for _, d := range DetectDegeneration(r, "voting") {
				if d.Role == "aggregator" {
					deg = &d
				}
			}
			if deg == nil || deg.Degenerated != tc.degen || deg.DegenerateBase {
				t.Errorf("degeneration %+v, want degenerated %v", deg, tc.degen)
			}
		})
	}
}

func TestNGramSimilarity(t *testing.T) {
	tests := []struct {
		a, b []string
		want float64
	}{
		{[]string{"abcabc"}, []string{"abcabc"}, 1},
		{[]string{"aaaa"}, []string{"bbbb"}, 0},
		{[]string{"ab"}, []string{"ab"}, 1}, // shorter than n
		{nil, []string{"abc"}, math.NaN()},
	}
	for _, tc := range tests {
		if got := NGramSimilarity(tc.a, tc.b, 3); !near(got, tc.want) {
			t.Errorf("NGramSimilarity(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestAnalyzeFixture(t *testing.T) {
	st, err := Analyze(analysistest.Fixture())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range st.Cells {
		keys = append(keys, c.Key.String())
	}
	want := []string{"single/synth-math/s", "single/synth-math/m", "voting/synth-math/s", "voting/synth-math/m"} // scales by size, not by name
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("cells %v, want %v", keys, want)
	}
	cell := st.Cells[3] // voting/synth-math/m
	var conds []string
	for _, c := range cell.Conditions {
		conds = append(conds, c.Condition)
	}
	if !reflect.DeepEqual(conds, []string{"base", "sa-rl", "sp", "ip"}) {
		t.Fatalf("conditions %v", conds)
	}
	ip := cell.Cond(study.IP)
	if ip.Seeds != 2 || ip.CIMethod != MethodSeedsProblems || ip.CliffRuns != 1 {
		t.Errorf("ip seeds %d method %s cliffs %d", ip.Seeds, ip.CIMethod, ip.CliffRuns)
	}
	base, sa := cell.Cond(study.Base), cell.Cond(study.SARL)
	if base.CIMethod != "problems" || sa.CIMethod != "problems" {
		t.Errorf("base/sa-rl CI methods %s %s, want problems", base.CIMethod, sa.CIMethod)
	}
	if !near(ip.GainBaseFinal.Value, ip.Final.Value-base.Final.Value) || !near(ip.GainSARLFinal.Value, ip.Final.Value-sa.Final.Value) {
		t.Errorf("gains %+v %+v", ip.GainBaseFinal, ip.GainSARLFinal)
	}
	for _, e := range []Estimate{ip.Final, ip.Ceiling, base.Base, sa.Final, ip.GainBaseFinal} {
		if !(e.Lo <= e.Value+1e-9 && e.Value <= e.Hi+1e-9) {
			t.Errorf("estimate %+v: value outside its interval", e)
		}
	}
	// the ip seed-2 run at scale m has amplification before its cliff
	var found bool
	for _, r := range st.Runs {
		if r.RunID == "voting-ip-m-math-seed2" {
			for _, a := range r.Amplification {
				if a.Role == "generator" && a.BeforeCliff {
					found = true
				}
			}
		}
		if r.Condition == study.SP && r.Cell.Workflow == "voting" {
			if len(r.Capture) != 1 || !r.Capture[0].Captured || r.Capture[0].Role != "aggregator" {
				t.Errorf("%s: capture %+v, want aggregator captured", r.RunID, r.Capture)
			}
		}
	}
	if !found {
		t.Error("no amplification before the cliff of voting-ip-m-math-seed2")
	}
	// determinism: a second analysis gives identical intervals
	st2, err := Analyze(analysistest.Fixture())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st.Cells[2].Conditions[3].Final, st2.Cells[2].Conditions[3].Final) {
		t.Error("bootstrap not deterministic")
	}
}

func TestAnalyzeErrors(t *testing.T) {
	mk := func(mut func([]*runlog.Run) []*runlog.Run) []*runlog.Run { return mut(analysistest.Fixture()) }
	tests := []struct {
		name string
		runs []*runlog.Run
		err  string
	}{
		{"no runs", nil, "no runs"},
		{"duplicate run id", mk(func(r []*runlog.Run) []*runlog.Run { return append(r, r[0]) }), "appears twice"},
		{"mixed experiments", mk(func(r []*runlog.Run) []*runlog.Run { r[1].Manifest.Experiment = "other"; return r }), "experiment"},
		{"empty task", mk(func(r []*runlog.Run) []*runlog.Run { r[0].Manifest.Task = ""; return r }), "task is empty"},
		{"conflicting params", mk(func(r []*runlog.Run) []*runlog.Run { r[3].Manifest.Analysis = map[string]float64{"amp_k": 5}; return r }), "analysis parameters"},
		{"same seed twice", mk(func(r []*runlog.Run) []*runlog.Run { r[3].Manifest.SeedIndex = 2; return r }), "both condition ip seed 2"},
		{"accuracy out of range", mk(func(r []*runlog.Run) []*runlog.Run { r[0].Evals[0].Accuracy = 1.5; return r }), "not in [0,1]"},
		{"seeds of one condition with different settings", mk(func(r []*runlog.Run) []*runlog.Run {
			return withConfigs(r, "voting-sp-s-math-seed", func(seed int, c map[string]any) {
				if seed == 2 {
					c["grpo"] = map[string]any{"lr": 0.003, "steps": 150.0}
				}
			})
		}), `"voting-sp-s-math-seed1" (runs/fixture/voting-sp-s-math-seed1) and "voting-sp-s-math-seed2" (runs/fixture/voting-sp-s-math-seed2) are seeds of one condition but were run with different settings (grpo.lr: 0.001 -> 0.003; grpo.steps: 60 -> 150)`},
		{"a setting only one seed has", mk(func(r []*runlog.Run) []*runlog.Run {
			return withConfigs(r, "voting-sp-s-math-seed", func(seed int, c map[string]any) {
				if seed == 2 {
					c["grpo"].(map[string]any)["kl_coef"] = 0.01
				}
			})
		}), "grpo.kl_coef: (absent) -> 0.01"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Analyze(tc.runs)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// withConfigs gives the runs whose id starts with prefix a stored config
// that differs between them only in identity, seeds and the checkpoint's
// place, then lets edit change it per seed.
func withConfigs(runs []*runlog.Run, prefix string, edit func(seed int, c map[string]any)) []*runlog.Run {
	for _, r := range runs {
		m := &r.Manifest
		if !strings.HasPrefix(m.RunID, prefix) {
			continue
		}
		c := map[string]any{
			"id": m.RunID, "seed_index": float64(m.SeedIndex), "seed": float64(m.Seed), "val_seed": float64(100 + m.SeedIndex),
			"model": map[string]any{"scale": m.Scale, "checkpoint": fmt.Sprintf("/node%d/models/s", m.SeedIndex)},
			"grpo":  map[string]any{"lr": 0.001, "steps": 60.0},
		}
		edit(m.SeedIndex, c)
		m.Config = c
	}
	return runs
}

// TestSeedsMayDifferInIdentityAndPlaces: the settings check accepts seeds
// that differ only in what differs between seeds by construction and in
// where a machine keeps its files.
func TestSeedsMayDifferInIdentityAndPlaces(t *testing.T) {
	runs := withConfigs(analysistest.Fixture(), "voting-sp-", func(int, map[string]any) {})
	if _, err := Analyze(runs); err != nil {
		t.Fatalf("seeds differing in identity, seeds and checkpoint place: %v", err)
	}
}

func TestTInterval(t *testing.T) {
	tests := []struct {
		name           string
		v              float64
		parts          []varPart
		lo, hi, se, df float64
	}{
		// t(10) 97.5% quantile 2.228139
		{"one part", 0, []varPart{{1, 10}}, -2.228139, 2.228139, 1, 10},
		// Welch-Satterthwaite: (1+1)^2 / (1/2 + 1/2) = 4 df; t(4) 2.776445
		{"two parts", 0, []varPart{{1, 2}, {1, 2}}, -2.776445 * math.Sqrt2, 2.776445 * math.Sqrt2, math.Sqrt2, 4},
		{"clamped", 0.9, []varPart{{0.01, 10}}, 0.9 - 0.2228139, 1, 0.1, 10},
		{"zero variance", 0.3, []varPart{{0, 5}}, 0.3, 0.3, 0, math.Inf(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi := -10.0, 10.0
			if tc.name == "clamped" {
				lo, hi = 0, 1
			}
			e := tInterval(tc.v, tc.parts, 0.95, lo, hi)
			if math.Abs(e.Lo-tc.lo) > 1e-5 || math.Abs(e.Hi-tc.hi) > 1e-5 || !near(e.SE, tc.se) || e.DF != tc.df && !near(e.DF, tc.df) {
				t.Errorf("got [%v, %v] se %v df %v, want [%v, %v] se %v df %v", e.Lo, e.Hi, e.SE, e.DF, tc.lo, tc.hi, tc.se, tc.df)
			}
			if tc.se == 0 && (!e.Degenerate() || e.Excludes(0.5)) {
				t.Errorf("zero-width interval %+v: Degenerate %v, Excludes(0.5) %v", e, e.Degenerate(), e.Excludes(0.5))
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load("/nonexistent/runs/x")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/runs/x") {
		t.Errorf("missing source: error %v, want one naming the path", err)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no runs") {
		t.Errorf("empty folder: error %v, want no runs", err)
	}
}

func TestScaleLess(t *testing.T) {
	cases := []struct {
		in   []string
		want []string
	}{
		{[]string{"m", "l", "s"}, []string{"s", "m", "l"}},
		{[]string{"XL", "xs", "M"}, []string{"xs", "M", "XL"}},
		{[]string{"4b", "0.6b", "1.7b"}, []string{"0.6b", "1.7b", "4b"}},
		{[]string{"tiny", "4b", "s", "huge"}, []string{"s", "4b", "huge", "tiny"}},
		{[]string{"b", "a"}, []string{"a", "b"}},
	}
	for _, tc := range cases {
		got := append([]string(nil), tc.in...)
		sort.Slice(got, func(i, j int) bool { return ScaleLess(got[i], got[j]) })
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("sorted %v = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestAnalyzeArms: runs of a spec arm with the main matrix's workflow,
// task, scale, condition and seeds form a cell of their own, after the
// main matrix's; their different settings are not an error.
func TestAnalyzeArms(t *testing.T) {
	runs := analysistest.Fixture()
	arm := analysistest.InArm(runs, "voting-sp-s-math-", "lowlr")
	if len(arm) != 2 {
		t.Fatalf("%d arm runs, want 2", len(arm))
	}
	runs = withConfigs(append(runs, arm...), "voting-sp-s-math-", func(_ int, c map[string]any) {
		if strings.Contains(c["id"].(string), "-lowlr-") {
			c["grpo"] = map[string]any{"lr": 0.0005, "steps": 60.0}
			c["arm"] = "lowlr"
		}
	})
	st, err := Analyze(runs)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range st.Cells {
		keys = append(keys, c.Key.String())
	}
	want := []string{"single/synth-math/s", "single/synth-math/m", "voting/synth-math/s", "voting/synth-math/s [lowlr]", "voting/synth-math/m"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("cells %v, want %v", keys, want)
	}
	c := st.Cells[3]
	if len(c.Conditions) != 1 || c.Conditions[0].Condition != study.SP || c.Conditions[0].Seeds != 2 || c.Key.Main() != st.Cells[2].Key {
		t.Errorf("arm cell %s: %+v", c.Key, c.Conditions)
	}
	if got := st.Arms(); !reflect.DeepEqual(got, []string{"lowlr"}) {
		t.Errorf("arms %v", got)
	}
	// the main matrix's cell keeps its four conditions and two sp seeds
	if sp := st.Cells[2].Cond(study.SP); sp == nil || sp.Seeds != 2 || len(st.Cells[2].Conditions) != 4 {
		t.Errorf("main cell %s: %+v", st.Cells[2].Key, st.Cells[2].Conditions)
	}
	// the study's scales for the paper's headlines are the main matrix's
	if _, err := Analyze(analysistest.InArm(analysistest.Fixture(), "voting-", "x")); err != nil {
		t.Errorf("a study of one arm: %v", err)
	}
}
