package grpo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/fake"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow/workflowtest"
)

func testConfig(cond, wf string) Config {
	c := recipeConfig()
	c.RunID = "test-" + wf + "-" + cond
	c.Seed = 42
	c.Condition = cond
	c.Workflow = wf
	c.Rollouts = 4
	c.ProblemsPerStep = 2
	c.Steps = 3
	c.LR = 0.5
	c.Schedule.Kind = "constant"
	c.DefaultMaxNewTokens = 48
	c.MaxNewTokens = map[string]int{study.Aggregator: 16}
	c.EvalEvery = 2
	c.SaveEvery = 2
	c.ValSize = 6
	c.SamplesPerStep = 5
	return c
}

var agents = workflowtest.Agents{Bias: -0.3, Malformed: 0.05, TooMany: 0.1}

// setup opens (or reopens) a run in dir and returns a trainer over a fresh
// fake engine, with the last committed step.
func setup(t *testing.T, dir string, cfg Config) (*Trainer, *runlog.Writer, *fake.Engine, int64) {
	t.Helper()
	w, last, err := runlog.Open(dir, runlog.Manifest{RunID: cfg.RunID, ConfigHash: cfg.Hash(), Condition: cfg.Condition, Workflow: cfg.Workflow})
	if err != nil {
		t.Fatal(err)
	}
	eng := fake.New(agents.Respond)
	tr := &Trainer{Config: cfg, Engine: eng, Task: workflowtest.Task{ValSize: 8}, Log: w, CkptDir: filepath.Join(dir, "ckpt")}
	return tr, w, eng, last
}

// rowsText renders a run's committed steps, evals and samples (timing is
// wall-clock and excluded) so that NaN compares equal to NaN.
func rowsText(t *testing.T, dir string) string {
	t.Helper()
	r, err := runlog.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%+v\n%+v\n%+v\nlast=%d", r.Steps, r.Evals, r.Samples, r.Manifest.LastStep)
}

func runFull(t *testing.T, dir string, cfg Config) *runlog.Run {
	t.Helper()
	tr, w, _, last := setup(t, dir, cfg)
	if err := tr.Run(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := runlog.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLoopRows(t *testing.T) {
	for _, c := range []struct {
		cond, wf string
		eval     []string
		policies map[string][]string // policy -> roles with rows (plus "*")
	}{
		{study.SP, study.Voting, nil, map[string][]string{"shared": {"aggregator", "generator", "*"}}},
		{study.IP, study.OrchWorkers, nil, map[string][]string{"orchestrator": {"orchestrator", "*"}, "synthesizer": {"synthesizer", "*"}, "worker": {"worker", "*"}}},
		{study.IP, study.EvalOpt, nil, map[string][]string{"evaluator": {"evaluator", "*"}, "generator": {"generator", "*"}}},
		{study.SARL, study.Single, []string{study.Single, study.Voting}, map[string][]string{"policy": {"generator", "*"}}},
	} {
		t.Run(c.wf+"-"+c.cond, func(t *testing.T) {
			cfg := testConfig(c.cond, c.wf)
			cfg.EvalWorkflows = c.eval
			dir := t.TempDir()
			var progress []Progress
			tr, w, eng, last := setup(t, dir, cfg)
			tr.Progress = func(p Progress) { progress = append(progress, p) }
			if err := tr.Run(context.Background(), last); err != nil {
				t.Fatal(err)
			}
			w.Close()
			r, err := runlog.ReadRun(dir)
			if err != nil {
				t.Fatal(err)
			}
			if r.Manifest.LastStep != 3 {
				t.Errorf("last committed step %d, want 3", r.Manifest.LastStep)
			}
			// steps: every (policy, role) and "*" at every step, engine stats
			// filled for roles that trained.
			got := map[string]int{}
			for _, s := range r.Steps {
				got[fmt.Sprintf("%d/%s/%s", s.Step, s.Policy, s.Role)]++
				if s.LR != cfg.LR {
					t.Errorf("step %d lr %v, want %v", s.Step, s.LR, cfg.LR)
				}
				if math.IsNaN(s.RewardMean) || s.RewardMean < 0 || s.RewardMean > 1 || math.IsNaN(s.ZeroVarFrac) {
					t.Errorf("step %d %s/%s reward %v zero-var %v", s.Step, s.Policy, s.Role, s.RewardMean, s.ZeroVarFrac)
				}
				if s.Seqs > 0 && (math.IsNaN(s.Loss) || math.IsNaN(s.Entropy) || s.Tokens == 0) {
					t.Errorf("step %d %s/%s has turns but no engine stats: %+v", s.Step, s.Policy, s.Role, s)
				}
			}
			want := 0
			for step := 1; step <= 3; step++ {
				for p, roles := range c.policies {
					for _, role := range roles {
						want++
						if got[fmt.Sprintf("%d/%s/%s", step, p, role)] != 1 {
							t.Errorf("no single steps row for step %d policy %s role %s (rows %v)", step, p, role, got)
						}
					}
				}
			}
			if len(r.Steps) != want {
				t.Errorf("%d steps rows, want %d", len(r.Steps), want)
			}
			// engine: one train step per policy per step, sorted by name.
			if len(eng.Trained) != 3*len(c.policies) {
				t.Errorf("engine trained %d times, want %d", len(eng.Trained), 3*len(c.policies))
			}
			for i := 1; i < len(eng.Trained); i++ {
				if i%len(c.policies) != 0 && eng.Trained[i-1].Adapter >= eng.Trained[i].Adapter {
					t.Errorf("adapters not trained in name order: %v", eng.Trained)
				}
			}
			// evals at steps 0, 2, 3 for every eval workflow, with a "*" row.
			evalWfs := cfg.evalWorkflows()
			stars := map[string]bool{}
			for _, e := range r.Evals {
				if e.Role == "*" {
					stars[fmt.Sprintf("%d/%s", e.Step, e.Workflow)] = true
					if e.Problems != 6 {
						t.Errorf("eval at step %d covers %d problems, want 6", e.Step, e.Problems)
					}
				}
			}
			for _, step := range []int{0, 2, 3} {
				for _, wf := range evalWfs {
					if !stars[fmt.Sprintf("%d/%s", step, wf)] {
						t.Errorf("no eval of %s at step %d (have %v)", wf, step, stars)
					}
				}
			}
			if len(stars) != 3*len(evalWfs) {
				t.Errorf("evals at %v, want steps 0, 2, 3 only", stars)
			}
			// samples: 5 train turns per step; every val turn plus one final
			// row per episode, whose correctness matches the eval accuracy.
			train, finals := map[int64]int{}, map[string][2]int{}
			for _, s := range r.Samples {
				if s.Split == "train" {
					train[s.Step]++
					lo := (s.Step - 1) * int64(cfg.ProblemsPerStep)
					if s.ProblemID != fmt.Sprintf("train-%d", lo) && s.ProblemID != fmt.Sprintf("train-%d", lo+1) {
						t.Errorf("step %d trained on %s, want train-%d or train-%d", s.Step, s.ProblemID, lo, lo+1)
					}
					continue
				}
				if s.Agent == FinalAgent {
					k := fmt.Sprintf("%d/%s", s.Step, s.Workflow)
					f := finals[k]
					f[0]++
					if s.Correct {
						f[1]++
					}
					finals[k] = f
				}
			}
			for step := int64(1); step <= 3; step++ {
				if train[step] != 5 {
					t.Errorf("step %d has %d train samples, want 5", step, train[step])
				}
			}
			for _, e := range r.Evals {
				if e.Role != "*" {
					continue
				}
				f := finals[fmt.Sprintf("%d/%s", e.Step, e.Workflow)]
				if f[0] != 6 || float64(f[1])/6 != e.Accuracy {
					t.Errorf("step %d %s: final rows %v disagree with accuracy %v", e.Step, e.Workflow, f, e.Accuracy)
				}
			}
			if len(r.Timing) != 3 {
				t.Errorf("%d timing rows, want 3", len(r.Timing))
			}
			if len(progress) != 4 || progress[0].Step != 0 || progress[3].Step != 3 || progress[3].Steps != 3 || math.IsNaN(progress[3].ValAcc) {
				t.Errorf("progress %+v", progress)
			}
			// the last two checkpoints are kept.
			ents, _ := os.ReadDir(filepath.Join(dir, "ckpt"))
			if len(ents) != 2 || ents[0].Name() != "step-00000002" || ents[1].Name() != "step-00000003" {
				t.Errorf("checkpoint folder holds %v", ents)
			}
		})
	}
}

func TestLoopDeterministic(t *testing.T) {
	cfg := testConfig(study.IP, study.Voting)
	a, b := t.TempDir(), t.TempDir()
	runFull(t, a, cfg)
	runFull(t, b, cfg)
	if rowsText(t, a) != rowsText(t, b) {
		t.Fatal("two identical runs wrote different rows")
	}
	for _, table := range []string{runlog.TableSteps, runlog.TableEvals, runlog.TableSamples} {
		ents, err := os.ReadDir(filepath.Join(a, table))
		if err != nil || len(ents) == 0 {
			t.Fatalf("%s: %v %v", table, ents, err)
		}
		for _, e := range ents {
			x, _ := os.ReadFile(filepath.Join(a, table, e.Name()))
			y, err := os.ReadFile(filepath.Join(b, table, e.Name()))
			if err != nil || string(x) != string(y) {
				t.Errorf("%s/%s differs between identical runs", table, e.Name())
			}
		}
	}
	cfg.Seed++
	c := t.TempDir()
	runFull(t, c, cfg)
	if rowsText(t, a) == rowsText(t, c) {
		t.Error("another seed wrote the same rows")
	}
}

func TestLoopLearnsWithFakeEngine(t *testing.T) {
	cfg := testConfig(study.SP, study.Single)
	cfg.Steps = 6
	cfg.EvalEvery = 6
	cfg.LR = 2
	r := runFull(t, t.TempDir(), cfg)
	var first, last float64
	for _, e := range r.Evals {
		if e.Role == "*" && e.Step == 0 {
			first = e.Accuracy
		}
		if e.Role == "*" && e.Step == 6 {
			last = e.Accuracy
		}
	}
	if !(last > first) {
		t.Errorf("validation accuracy %v -> %v: the loop did not push the policy toward rewarded turns", first, last)
	}
}

// failingLog commits through to a runlog.Writer until step failAt, where it
// fails like a crash between the checkpoint rename and the log commit.
type failingLog struct {
	*runlog.Writer
	failAt int64
}

var errCrash = errors.New("simulated crash")

func (f failingLog) Commit(step int64) error {
	if step == f.failAt {
		return errCrash
	}
	return f.Writer.Commit(step)
}

func TestResume(t *testing.T) {
	cfg := testConfig(study.IP, study.EvalOpt)
	cfg.Steps = 5
	cfg.SaveEvery = 2
	ref := t.TempDir()
	runFull(t, ref, cfg)
	want := rowsText(t, ref)

	t.Run("after cancellation", func(t *testing.T) {
		dir := t.TempDir()
		tr, w, _, last := setup(t, dir, cfg)
		ctx, cancel := context.WithCancel(context.Background())
		tr.Progress = func(p Progress) {
			if p.Step == 3 {
				cancel()
			}
		}
		err := tr.Run(ctx, last)
		if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want ErrInterrupted wrapping context.Canceled", err)
		}
		w.Close()
		m, _ := runlog.ReadManifest(dir)
		if m.LastStep != 3 {
			t.Fatalf("interrupted run committed step %d, want 3 (the step in progress)", m.LastStep)
		}
		runFull(t, dir, cfg)
		if got := rowsText(t, dir); got != want {
			t.Errorf("resumed rows differ from an uninterrupted run:\n%s\n---\n%s", got, want)
		}
	})
	t.Run("after a crash between checkpoint and commit", func(t *testing.T) {
		dir := t.TempDir()
		tr, w, _, last := setup(t, dir, cfg)
		tr.Log = failingLog{w, 4}
		if err := tr.Run(context.Background(), last); !errors.Is(err, errCrash) {
			t.Fatalf("err = %v, want the simulated crash", err)
		}
		w.Close()
		if _, err := os.Stat(CheckpointPath(filepath.Join(dir, "ckpt"), 4)); err != nil {
			t.Fatalf("the uncommitted checkpoint should exist: %v", err)
		}
		runFull(t, dir, cfg)
		if got := rowsText(t, dir); got != want {
			t.Errorf("resumed rows differ from an uninterrupted run")
		}
	})
	t.Run("finished run does nothing", func(t *testing.T) {
		tr, w, eng, last := setup(t, ref, cfg)
		if last != 5 {
			t.Fatalf("last = %d", last)
		}
		if err := tr.Run(context.Background(), last); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if len(eng.Batches) != 0 {
			t.Errorf("a finished run generated %v", eng.Batches)
		}
	})
}

func TestResumeRefusesBrokenCheckpoints(t *testing.T) {
	cfg := testConfig(study.SP, study.Voting)
	cases := []struct {
		name   string
		damage func(ckpt string)
		want   error
		text   string
	}{
		{"missing folder", func(ckpt string) { os.RemoveAll(ckpt) }, ErrCheckpointMissing, "does not exist"},
		{"garbled state", func(ckpt string) { os.WriteFile(filepath.Join(ckpt, "state.json"), []byte("{"), 0o644) }, ErrCheckpointCorrupt, "state.json"},
		{"state of another step", func(ckpt string) {
			os.WriteFile(filepath.Join(ckpt, "state.json"), []byte(`{"version":1,"step":1}`), 0o644)
		}, ErrCheckpointCorrupt, "holds step 1"},
		{"engine files gone", func(ckpt string) { os.Remove(filepath.Join(ckpt, "engine", fake.StateFile)) }, ErrCheckpointCorrupt, "load engine"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := cfg
			cfg.Steps = 4
			tr, w, _, last := setup(t, dir, cfg)
			tr.Log = failingLog{w, 4}
			if err := tr.Run(context.Background(), last); !errors.Is(err, errCrash) {
				t.Fatal(err)
			}
			w.Close()
			c.damage(CheckpointPath(filepath.Join(dir, "ckpt"), 2))
			tr, w, _, last = setup(t, dir, cfg)
			defer w.Close()
			err := tr.Run(context.Background(), last)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
				t.Errorf("err = %v, want %v mentioning %q", err, c.want, c.text)
			}
		})
	}
	t.Run("config changed", func(t *testing.T) {
		dir := t.TempDir()
		tr, w, _, last := setup(t, dir, cfg)
		tr.Log = failingLog{w, 2}
		if err := tr.Run(context.Background(), last); !errors.Is(err, errCrash) {
			t.Fatal(err)
		}
		w.Close()
		tr, w, _, last = setup(t, dir, cfg)
		defer w.Close()
		tr.Config.LR *= 2 // the run log's hash is unchanged; the checkpoint notices
		if err := tr.Run(context.Background(), last); !errors.Is(err, ErrCheckpointCorrupt) || !strings.Contains(err.Error(), "config") {
			t.Errorf("err = %v, want a config mismatch", err)
		}
	})
}

func TestBaseEvaluatesOnly(t *testing.T) {
	cfg := testConfig(study.Base, study.OrchWorkers)
	dir := t.TempDir()
	tr, w, eng, last := setup(t, dir, cfg)
	if err := tr.Run(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, _ := runlog.ReadRun(dir)
	if len(r.Steps) != 0 || len(eng.Trained) != 0 || r.Manifest.LastStep != 0 {
		t.Errorf("base run trained: %d steps rows, %d train steps, last %d", len(r.Steps), len(eng.Trained), r.Manifest.LastStep)
	}
	for _, s := range r.Samples {
		if s.Policy != "" {
			t.Errorf("base sample used policy %q", s.Policy)
		}
	}
	if len(r.Evals) == 0 {
		t.Error("base run wrote no evals")
	}
}

// TestValidationSharesDraws checks that every evaluation of a run draws the
// same random numbers: with a learning rate too small to move the fake
// policy, the validation completions at steps 0, 2 and 3 are identical, so
// a change between evaluations can only come from training.
func TestValidationSharesDraws(t *testing.T) {
	cfg := testConfig(study.SP, study.Voting)
	cfg.LR = 1e-12
	r := runFull(t, t.TempDir(), cfg)
	byStep := map[int64][]string{}
	for _, s := range r.Samples {
		if s.Split == "val" {
			byStep[s.Step] = append(byStep[s.Step], s.ProblemID+"|"+s.Agent+"|"+s.Completion)
		}
	}
	if len(byStep) != 3 {
		t.Fatalf("validation at %d steps, want 3 (0, 2, 3)", len(byStep))
	}
	for _, step := range []int64{2, 3} {
		if !slices.Equal(byStep[step], byStep[0]) {
			t.Errorf("validation at step %d drew other completions than at step 0", step)
		}
	}
}

// TestValidationSamples checks avg@k validation: k rollouts of every
// validation problem, each logged with its rollout index, and accuracies
// over all of them.
func TestValidationSamples(t *testing.T) {
	for _, k := range []int{0, 1, 3} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			cfg := testConfig(study.Base, study.Voting)
			cfg.ValSamples = k
			r := runFull(t, t.TempDir(), cfg)
			want := int64(cfg.ValSize * max(k, 1))
			var final runlog.EvalRow
			for _, e := range r.Evals {
				if e.Role == "*" {
					final = e
				}
			}
			if final.Problems != want {
				t.Errorf("evals cover %d episodes, want %d", final.Problems, want)
			}
			rollouts := map[string]map[int64]bool{}
			var correct int
			for _, s := range r.Samples {
				if s.Split != "val" || s.Agent != FinalAgent {
					continue
				}
				if rollouts[s.ProblemID] == nil {
					rollouts[s.ProblemID] = map[int64]bool{}
				}
				rollouts[s.ProblemID][s.Rollout] = true
				if s.Correct {
					correct++
				}
			}
			if len(rollouts) != cfg.ValSize {
				t.Errorf("%d validation problems sampled, want %d", len(rollouts), cfg.ValSize)
			}
			for id, rs := range rollouts {
				if len(rs) != max(k, 1) {
					t.Errorf("problem %s: rollouts %v, want %d", id, rs, max(k, 1))
				}
			}
			if got := float64(correct) / float64(want); math.Abs(got-final.Accuracy) > 1e-12 {
				t.Errorf("accuracy %v, but %d of %d final answers are correct", final.Accuracy, correct, want)
			}
		})
	}
}

// recipeConfig is the fixture the loop tests start from: the reference
// recipe at test scale (the settings themselves and their defaults are the
// spec's; the runner maps them onto Config).
func recipeConfig() Config {
	return Config{
		Settings: study.Settings{NVotes: 3, MaxIterations: 3, MaxSubtasks: 3},
		Rollouts: 8, ProblemsPerStep: 4,
		LR:       1e-4,
		Schedule: engine.Schedule{Kind: "cosine", MinRatio: 0.1},
		ClipLow:  0.2, ClipHigh: 0.28,
		LossAgg:     engine.SeqMeanTokenMean,
		Temperature: 0.7,
		Beta1:       0.9, Beta2: 0.999, AdamEps: 1e-8, WeightDecay: 0.01, GradClip: 1,
		AdvEps:             AdvEps,
		Adapter:            engine.AdapterConfig{Rank: 8, Alpha: 16},
		EvalBeforeTraining: true,
		SamplesPerStep:     8,
	}
}
