package enginecheck

import (
	"context"
	"math"
	"strings"
	"testing"
)

// passedReport is the report of a float32 check that passed every stage.
func passedReport() Report {
	r := newReport("ck", Options{})
	r.DType = "float32"
	r.FreshTensors = 4
	r.LogProbBase, r.LogProbAdapter, r.AfterStepAbove = 1e-6, 1e-6, 1e-6
	r.Components, r.UpdateAbove = 100, 1e-4
	r.NativeToTorch, r.TorchToNative = 1e-6, 1e-6
	r.AgentCos, r.AgentCosN = 1e-8, 2
	r.GradNormRel["*"] = 1e-6
	r.CoherenceRoles, r.CoherenceMinScale = 16, 0.5
	r.History = History{Roles: 4, StepFactor: 0.5, StepFactorDiff: 1e-9, StepResidual: 1e-5}
	r.Routing = passedRouting()
	r.Rollout = Rollout{Seqs: 16, Tokens: 768, Max: 1e-6}
	return r
}

// TestSkippedStages: a skipped stage's figures are not judged, however
// bad (or absent) they are; the stages that ran are judged as ever; and
// the report names what it skipped.
func TestSkippedStages(t *testing.T) {
	cases := []struct {
		name string
		skip []Stage
		edit func(*Report)
		want []string // substrings of the failures, in order; nil: none
	}{
		{"nothing skipped, passed", nil, func(*Report) {}, nil},
		{"update skipped, its figures absent", []Stage{StageUpdate}, func(r *Report) { r.Components, r.AfterStepAbove = 0, 1 }, nil},
		{"update run, its figures absent", nil, func(r *Report) { r.Components = 0 }, []string{"optimizer step"}},
		{"rollout skipped, nothing sampled", []Stage{StageRollout}, func(r *Report) { r.Rollout = Rollout{} }, nil},
		{"rollout run, nothing sampled", nil, func(r *Report) { r.Rollout = Rollout{} }, []string{"rollout agreement"}},
		{"routing skipped, not checked", []Stage{StageRouting}, func(r *Report) { r.Routing = Routing{} }, nil},
		{"routing run, not checked", nil, func(r *Report) { r.Routing = Routing{} }, []string{"routing: not checked"}},
		{"history skipped: no scale below 1 asked of the own steps", []Stage{StageHistory}, func(r *Report) {
			r.History, r.CoherenceMinScale = History{}, math.Inf(1)
		}, nil},
		{"history run, not scaled", nil, func(r *Report) { r.CoherenceMinScale = 1 }, []string{"scaled no gradient"}},
		{"both coherence stages skipped, figures apart", []Stage{StageCoherence, StageHistory}, func(r *Report) {
			r.CoherenceRoles, r.CoherenceScale, r.CoherenceGradRel, r.History = 0, 0.1, 0.1, History{}
		}, nil},
		{"own steps only, scales apart", []Stage{StageHistory}, func(r *Report) { r.CoherenceScale = 0.01 }, []string{"coherence regularizer: max |Δ cosine"}},
		{"history only, factors apart", []Stage{StageUpdate, StageCoherence, StageRouting, StageRollout}, func(r *Report) {
			r.History.StepFactorDiff, r.CoherenceScale = 0.01, 0.01
			r.Components, r.Routing, r.Rollout = 0, Routing{}, Rollout{}
		}, []string{"|Δ step factor| 0.01", "coherence regularizer: max |Δ cosine"}},
		{"log-probs are always judged", Stages, func(r *Report) { r.LogProbBase = 1 }, []string{"no adapter: max |Δ log-prob| 1"}},
		{"the train step is always judged", Stages, func(r *Report) { r.GradNormRel["*"] = 0.1 }, []string{"grad norm of role *"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := passedReport()
			var err error
			if r.Skipped, err = skipped(c.skip); err != nil {
				t.Fatal(err)
			}
			c.edit(&r)
			got := r.Failures()
			if len(got) != len(c.want) {
				t.Fatalf("failures %q, want %d: %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("failure %q lacks %q", got[i], w)
				}
			}
			var b strings.Builder
			r.Print(&b)
			for _, s := range Stages {
				listed := strings.Contains(b.String(), "skipped (not judged): ") && strings.Contains(b.String()[strings.Index(b.String(), "skipped (not judged): "):], string(s))
				if listed == r.Ran(s) {
					t.Errorf("stage %s ran %v, but the printed report lists it as skipped: %v\n%s", s, r.Ran(s), listed, b.String())
				}
			}
		})
	}
}

// TestSkipOrderAndRefusal: the skipped stages are reported in the order
// they run, and a stage that cannot be skipped is refused before anything
// starts.
func TestSkipOrderAndRefusal(t *testing.T) {
	got, err := skipped([]Stage{StageRollout, StageUpdate, StageRollout})
	if err != nil || len(got) != 2 || got[0] != StageUpdate || got[1] != StageRollout {
		t.Errorf("skipped = %v, %v; want [update rollout]", got, err)
	}
	for _, s := range []Stage{"log-probs", "step", "rollouts"} {
		if _, err := Run(context.Background(), "/nonexistent", Options{Skip: []Stage{s}}); err == nil || !strings.Contains(err.Error(), "cannot be skipped") {
			t.Errorf("skip %q: error %v, want one saying it cannot be skipped", s, err)
		}
	}
}
