package analysis

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// rungRun is a run view whose stored config holds the keys RateRungs and
// Settings read.
func rungRun(wf, cond, arm string, seed int, lr string, kl map[string]any, extra map[string]any) *RunResult {
	grpo := map[string]any{"lr": lr, "steps": 400}
	if kl != nil {
		grpo["kl_coef"] = kl
	}
	cfg := map[string]any{"id": fmt.Sprintf("%s-%s-%s-seed%d", wf, cond, arm, seed), "seed": seed * 7, "grpo": grpo,
		"model": map[string]any{"scale": "s"}}
	if arm != "" {
		cfg["arm"] = arm
	}
	for k, v := range extra {
		cfg[k] = v
	}
	return &RunResult{RunID: cfg["id"].(string), Cell: CellKey{Workflow: wf, Task: "synth-math", Scale: "s", Arm: arm},
		TrainWorkflow: wf, Condition: cond, SeedIndex: seed,
		run: &runlog.Run{Manifest: runlog.Manifest{Config: cfg}}}
}

// grid is the runs of one arm over voting and eval-opt x SP and IP x 2
// seeds, at rate lr, each changed by change (nil: none).
func grid(arm, lr string, change func(r *RunResult)) []*RunResult {
	var out []*RunResult
	for _, wf := range []string{study.Voting, study.EvalOpt} {
		for _, cond := range []string{study.SP, study.IP} {
			for seed := 1; seed <= 2; seed++ {
				r := rungRun(wf, cond, arm, seed, lr, nil, nil)
				if change != nil {
					change(r)
				}
				out = append(out, r)
			}
		}
	}
	return out
}

func TestRateRungs(t *testing.T) {
	main := grid("", "0.0015", nil)
	setKey := func(k string, v any) func(r *RunResult) {
		return func(r *RunResult) { r.run.Manifest.Config.(map[string]any)[k] = v }
	}
	cases := []struct {
		name string
		arms []*RunResult
		want []string
	}{
		{"a rate arm over the whole grid is a rung", grid("r25", "0.0025", nil), []string{"r25"}},
		{"two rungs", slices.Concat(grid("r25", "0.0025", nil), grid("r35", "0.0035", nil)), []string{"r25", "r35"}},
		{"the main matrix's rate is no rung", grid("same", "0.0015", nil), nil},
		{"another setting beside the rate", grid("i6", "0.0025", setKey("coherence", 0.5)), nil},
		{"a setting changed in one run", grid("odd", "0.0025", func(r *RunResult) {
			if r.Condition == study.IP && r.SeedIndex == 2 && r.Cell.Workflow == study.Voting {
				r.run.Manifest.Config.(map[string]any)["grpo"].(map[string]any)["steps"] = 200
			}
		}), nil},
		{"part of the grid (voting only)", slices.DeleteFunc(grid("lowlr", "0.001", nil), func(r *RunResult) bool { return r.Cell.Workflow != study.Voting }), nil},
		{"a grid point the main matrix lacks", append(grid("more", "0.0025", nil), rungRun(study.Voting, study.SP, "more", 3, "0.0025", nil, nil)), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &Study{Runs: slices.Concat(main, tc.arms)}
			if got := RateRungs(st); !slices.Equal(got, tc.want) {
				t.Errorf("rungs %v, want %v", got, tc.want)
			}
		})
	}
	if got := RateRungs(&Study{Runs: grid("r25", "0.0025", nil)}); got != nil {
		t.Errorf("without a main matrix: rungs %v, want none", got)
	}
}

func TestSettingsAnchor(t *testing.T) {
	cases := []struct {
		name                   string
		wf                     string
		kl                     map[string]any
		intervention, anchored string
	}{
		{"no KL", study.Voting, nil, NoIntervention, ""},
		{"the aggregator anchored", study.Voting, map[string]any{"aggregator": 0.1}, NoIntervention, "aggregator"},
		{"the evaluator anchored", study.EvalOpt, map[string]any{"evaluator": 0.1, "aggregator": 0.1}, NoIntervention, "evaluator"},
		{"a zero coefficient anchors nothing", study.Voting, map[string]any{"aggregator": 0}, NoIntervention, ""},
		{"the generator's KL is I1", study.Voting, map[string]any{"generator": 0.1}, I1, ""},
		{"every role's KL is I1", study.Voting, map[string]any{"generator": 0.1, "aggregator": 0.1}, I1, ""},
		// a KL on a role the workflow does not call has no effect
		{"an evaluator's KL in voting is nothing", study.Voting, map[string]any{"evaluator": 0.1}, NoIntervention, ""},
		{"a worker's KL in eval-opt is nothing", study.EvalOpt, map[string]any{"worker": 0.1}, NoIntervention, ""},
		{"the worker's KL in orch-workers is I1", study.OrchWorkers, map[string]any{"worker": 0.1, "synthesizer": 0.1}, I1, ""},
		{"the synthesizer anchored", study.OrchWorkers, map[string]any{"synthesizer": 0.1}, NoIntervention, "synthesizer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := rungRun(tc.wf, study.IP, "", 1, "0.0015", tc.kl, nil).Settings()
			if s.Intervention != tc.intervention || s.Anchored != tc.anchored {
				t.Errorf("intervention %q anchored %q, want %q %q", s.Intervention, s.Anchored, tc.intervention, tc.anchored)
			}
		})
	}
}

// TestCoherenceScalesOf: the paper's form is read from the roles' factors,
// the step form from the adapter's step factor on the "*" rows, and each
// run is counted under its own form.
func TestCoherenceScalesOf(t *testing.T) {
	run := func(id, form string) *RunResult {
		coh := map[string]any{"lambda": 0.5}
		if form != "" {
			coh["form"] = form
		}
		r := rungRun(study.Voting, study.IP, "i6", 1, "0.0035", nil, nil)
		r.RunID = id
		r.run.Manifest.Config.(map[string]any)["grpo"].(map[string]any)["coherence"] = coh
		for step := int64(1); step <= 2; step++ {
			r.steps = append(r.steps,
				runlog.StepRow{Step: step, Policy: "generator", Role: "*", CoherenceScale: 0.5, CoherenceCos: math.NaN()},
				runlog.StepRow{Step: step, Policy: "generator", Role: "generator", CoherenceScale: 0.8, CoherenceCos: 0.4})
		}
		return r
	}
	plain := rungRun(study.Voting, study.IP, "", 1, "0.0035", nil, nil)
	cases := []struct {
		name  string
		runs  []*RunResult
		forms []string
		scale []float64
		steps []int
	}{
		{"no I6 run", []*RunResult{plain}, nil, nil, nil},
		{"the paper's form: the roles' factors", []*RunResult{plain, run("a", "")}, []string{""}, []float64{0.8}, []int{2}},
		{"the step form: the step factor", []*RunResult{run("b", "step")}, []string{"step"}, []float64{0.5}, []int{2}},
		{"both forms, each its own", []*RunResult{run("b", "step"), run("a", "")}, []string{"", "step"}, []float64{0.8, 0.5}, []int{2, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CoherenceScalesOf(&Study{Runs: tc.runs})
			if len(got) != len(tc.forms) {
				t.Fatalf("%d forms, want %d: %+v", len(got), len(tc.forms), got)
			}
			for i, c := range got {
				if c.Form != tc.forms[i] || c.Runs != 1 || c.Steps != tc.steps[i] || math.Abs(c.MeanScale-tc.scale[i]) > 1e-12 || math.Abs(c.MeanCos-0.4) > 1e-12 {
					t.Errorf("form %q: %+v, want scale %v over %d steps, cosine 0.4", tc.forms[i], c, tc.scale[i], tc.steps[i])
				}
			}
		})
	}
}
