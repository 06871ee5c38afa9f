package runner

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/pretrain"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
)

func planOf(t *testing.T, file string) (*spec.Spec, []spec.Run) {
	t.Helper()
	s, err := spec.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := spec.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	return s, runs
}

// The demo's base model is committed; a tiny shape nobody built must be
// pretrained; paper.yaml's models are checkpoint folders.
func TestBaseModels(t *testing.T) {
	t.Setenv(pretrain.CacheEnv, t.TempDir())
	t.Setenv("MARLOW_MODELS", t.TempDir())
	t.Setenv("MARLOW_DATA", t.TempDir())
	seeds := filepath.Join("..", "..", "seeds")
	cases := []struct {
		file  string
		where string
	}{
		{filepath.Join(seeds, "demo.yaml"), BaseCommitted},
		{writeSpec(t, "0.5").File, BasePretrain},
		{filepath.Join(seeds, "paper.yaml"), BaseMissing},
	}
	for _, tc := range cases {
		s, runs := planOf(t, tc.file)
		bases, err := BaseModels(s, runs)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if len(bases) == 0 {
			t.Fatalf("%s: no base models", tc.file)
		}
		for _, b := range bases {
			if b.Where != tc.where {
				t.Errorf("%s scale %s: where %s (%s), want %s", tc.file, b.Scale, b.Where, b.Dir, tc.where)
			}
			if tc.where == BaseCommitted && !strings.Contains(filepath.ToSlash(b.Dir), "seeds/models/") {
				t.Errorf("committed model at %s", b.Dir)
			}
			if tc.where == BasePretrain && (b.Dir != "" || b.PretrainSteps <= 0) {
				t.Errorf("model to pretrain: dir %q, steps %d", b.Dir, b.PretrainSteps)
			}
		}
	}
}

func TestEvaluations(t *testing.T) {
	cases := []struct {
		steps int
		eval  spec.Eval
		want  int
	}{
		{0, spec.Eval{Every: 10}, 1},
		{60, spec.Eval{Every: 10, BeforeTraining: true}, 7},
		{60, spec.Eval{Every: 10}, 6},
		{25, spec.Eval{Every: 10, BeforeTraining: true}, 4},
		{25, spec.Eval{Every: 0, BeforeTraining: true}, 2},
	}
	for _, tc := range cases {
		if got := evaluations(tc.steps, tc.eval); got != tc.want {
			t.Errorf("evaluations(%d, %+v) = %d, want %d", tc.steps, tc.eval, got, tc.want)
		}
	}
}

// Token counts scale with the budget, and a role's turns never exceed its
// max_new_tokens.
func TestRunTokens(t *testing.T) {
	ls := map[string]pretrain.Lengths{
		study.Generator:  {Prompt: 100, Completion: 50, N: 1},
		study.Aggregator: {Prompt: 300, Completion: 500, N: 1},
	}
	c := spec.RunConfig{Workflow: study.Voting, EvalWorkflows: []string{study.Voting}, Train: true,
		GRPO:        spec.GRPO{Steps: 10, ProblemsPerStep: 2, Rollouts: 4, MaxNewTokens: map[string]int{"default": 64, "aggregator": 8}},
		WorkflowSet: spec.WorkflowSettings{NVotes: 3}, Eval: spec.Eval{Every: 5, BeforeTraining: true, ValSize: 10, Samples: 1}}
	gen, train := runTokens(c, ls)
	// a rollout: 3 generator turns of 50 and an aggregator turn cut to 8
	perRollout := 3*50.0 + 8
	if want := 80*perRollout + 3*10*perRollout; gen != want {
		t.Errorf("generated %v, want %v", gen, want)
	}
	if want := 80 * (3*150.0 + 308); train != want {
		t.Errorf("trained %v, want %v", train, want)
	}
	c.GRPO.Steps = 20
	gen2, train2 := runTokens(c, ls)
	if train2 != 2*train || gen2 <= gen {
		t.Errorf("doubling steps: trained %v -> %v, generated %v -> %v", train, train2, gen, gen2)
	}
	c.Train = false
	if _, tr := runTokens(c, ls); tr != 0 {
		t.Errorf("an untrained run trains %v tokens", tr)
	}
}

// The estimate of the demo calibrates its one scale and grows with the
// plan.
func TestEstimatePlan(t *testing.T) {
	s, runs := planOf(t, filepath.Join("..", "..", "seeds", "demo.yaml"))
	bases, err := BaseModels(s, runs)
	if err != nil {
		t.Fatal(err)
	}
	est, err := EstimatePlan(context.Background(), nativeEngines(), runs, bases, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(est.Speeds) != 1 || !(est.MinSeconds > 0) || !(est.MinSeconds < est.Seconds) || est.Parallel != 2 || est.PretrainSeconds != 0 || len(est.Unestimated) != 0 {
		t.Fatalf("estimate %+v", est)
	}
	one, err := EstimatePlan(context.Background(), nativeEngines(), runs[:1], bases, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !(one.GenTokens < est.GenTokens) || !(one.TrainTokens < est.TrainTokens) {
		t.Errorf("one run: %v/%v tokens, four runs %v/%v", one.GenTokens, one.TrainTokens, est.GenTokens, est.TrainTokens)
	}
	// a tiny shape nobody built is pretrained first, and that is counted
	t.Setenv(pretrain.CacheEnv, t.TempDir())
	fs, fruns := planOf(t, writeSpec(t, "0.5").File)
	fbases, err := BaseModels(fs, fruns)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := EstimatePlan(context.Background(), nativeEngines(), fruns, fbases, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !(pre.PretrainSeconds > 0) || !(pre.MinSeconds >= pre.PretrainSeconds) {
		t.Errorf("estimate with a model to pretrain: %+v", pre)
	}
	for sec, want := range map[float64]string{30: "30 s", 600: "10 min", 9000: "2.5 h"} {
		if got := Duration(sec); got != want {
			t.Errorf("Duration(%v) = %q, want %q", sec, got, want)
		}
	}
}
