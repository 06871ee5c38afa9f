package grpo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthmath"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// parityTask is synth-math with a reward a random model can earn: an output
// of even length is "correct", so GRPO groups have variance and the native
// engine's train step, optimizer state and checkpoints are exercised.
type parityTask struct{ *synthmath.Task }

func (parityTask) Verify(_ context.Context, _ datasets.Problem, output string) datasets.Verdict {
	s := strings.TrimSpace(output)
	if s == "" {
		return datasets.Verdict{Reason: "empty"}
	}
	return datasets.Verdict{Correct: len(s)%2 == 0, Answer: s, Reason: "parity"}
}

// nativeLoop returns a function that opens a run of cfg in a folder on the
// real pure-Go engine (a tiny random model) with synth-math prompts and
// the parity reward: its trainer, log writer and last committed step.
func nativeLoop(t *testing.T, cfg Config) func(dir string) (*Trainer, *runlog.Writer, int64) {
	t.Helper()
	tok, err := model.NewCharTokenizer(model.DefaultAlphabet())
	if err != nil {
		t.Fatal(err)
	}
	mcfg := model.Config{
		Architectures: []string{"Qwen3ForCausalLM"}, ModelType: "qwen3",
		HiddenSize: 32, IntermediateSize: 64, NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1,
		HeadDim: 16, RMSNormEps: 1e-6, RopeTheta: 1e4, VocabSize: tok.VocabSize(), MaxPositionEmbeddings: 1024,
		TieWordEmbeddings: true,
	}
	sm, err := synthmath.New(synthmath.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	task := parityTask{sm}
	return func(dir string) (*Trainer, *runlog.Writer, int64) {
		t.Helper()
		eng, err := native.New(mcfg, tok, native.InitWeights(mcfg, 3), native.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		w, last, err := runlog.Open(dir, runlog.Manifest{RunID: cfg.RunID, ConfigHash: cfg.Hash()})
		if err != nil {
			t.Fatal(err)
		}
		return &Trainer{Config: cfg, Engine: eng, Task: task, Log: w, CkptDir: filepath.Join(dir, "ckpt")}, w, last
	}
}

// nativeVotingConfig is a voting run on the native loop's tiny model: two
// votes, one problem of two rollouts a step, validated on two problems
// every second step.
func nativeVotingConfig(id, cond string, steps, samplesPerStep int) Config {
	cfg := recipeConfig()
	cfg.RunID, cfg.Seed, cfg.Condition, cfg.Workflow = id, 5, cond, study.Voting
	cfg.NVotes = 2
	cfg.Rollouts, cfg.ProblemsPerStep, cfg.Steps = 2, 1, steps
	cfg.LR = 1e-3
	cfg.Schedule.Total = steps
	cfg.DefaultMaxNewTokens = 12
	cfg.EvalEvery, cfg.SaveEvery, cfg.ValSize, cfg.SamplesPerStep = 2, 2, 2, samplesPerStep
	cfg.Adapter.Rank, cfg.Adapter.Alpha = 2, 4
	return cfg
}

// runNative runs a run of open to its end in dir.
func runNative(t *testing.T, open func(string) (*Trainer, *runlog.Writer, int64), dir string) {
	t.Helper()
	tr, w, last := open(dir)
	if err := tr.Run(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	w.Close()
}

// runNativeCancelled runs a run of open in dir until step stop has
// started, so that it commits that step and stops (ErrInterrupted).
func runNativeCancelled(t *testing.T, open func(string) (*Trainer, *runlog.Writer, int64), dir string, stop int) {
	t.Helper()
	tr, w, last := open(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr.Progress = func(p Progress) {
		if p.Step == stop {
			cancel()
		}
	}
	if err := tr.Run(ctx, last); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	w.Close()
}

// TestNativeEngineLoop runs the loop end to end on the real pure-Go engine
// (a tiny random model) and synth-math prompts with a parity reward: the contracts fit, two runs
// write the same rows, and a cancelled run resumes to the same rows.
func TestNativeEngineLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("native engine loop in -short mode")
	}
	cfg := nativeVotingConfig("native-voting-sp", study.SP, 3, 3)
	open := nativeLoop(t, cfg)

	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	runNative(t, open, a)
	runNative(t, open, b)
	want := rowsText(t, a)
	if rowsText(t, b) != want {
		t.Fatal("two native runs wrote different rows")
	}
	r, err := runlog.ReadRun(a)
	if err != nil {
		t.Fatal(err)
	}
	trained := 0
	for _, s := range r.Steps {
		if s.Role == "*" && s.Seqs > 0 && !math.IsNaN(s.Loss) && s.GradNorm > 0 {
			trained++
		}
	}
	if trained == 0 {
		t.Error("no step trained the adapter: the parity reward gave no signal")
	}
	if len(r.Steps) != 3*3 || r.Manifest.LastStep != 3 {
		t.Errorf("native run: %d steps rows (want 9), last step %d", len(r.Steps), r.Manifest.LastStep)
	}

	runNativeCancelled(t, open, c, 1)
	runNative(t, open, c)
	if rowsText(t, c) != want {
		t.Error("a resumed native run wrote different rows from an uninterrupted one")
	}
}

// TestNativeEngineResumeKeepsGradientEMA: a run without the coherence
// regularizer still logs each role's cosine to its gradient EMA (scale 1),
// and a run stopped after step 2 and resumed from its checkpoint writes the
// rows of an uninterrupted one, cosines included, for roles whose EMA
// started before the stop (so it was restored from the checkpoint).
func TestNativeEngineResumeKeepsGradientEMA(t *testing.T) {
	if testing.Short() {
		t.Skip("native engine loop in -short mode")
	}
	const stop = 2
	cfg := recipeConfig()
	cfg.RunID, cfg.Seed, cfg.Condition, cfg.Workflow = "native-voting-ip", 7, study.IP, study.Voting
	cfg.NVotes = 2
	cfg.Rollouts, cfg.ProblemsPerStep, cfg.Steps = 4, 2, 4
	cfg.LR = 1e-3
	cfg.Schedule.Total = 4
	cfg.DefaultMaxNewTokens = 12
	cfg.EvalEvery, cfg.SaveEvery, cfg.ValSize, cfg.SamplesPerStep = 0, 1, 2, 2
	cfg.Adapter.Rank, cfg.Adapter.Alpha = 2, 4
	open := nativeLoop(t, cfg)

	a, c := t.TempDir(), t.TempDir()
	runNative(t, open, a)
	r, err := runlog.ReadRun(a)
	if err != nil {
		t.Fatal(err)
	}
	trainedBefore := map[string]bool{}
	restored := 0
	for _, s := range r.Steps {
		if s.Role == "*" || math.IsNaN(s.GradNorm) {
			continue
		}
		if s.CoherenceScale != 1 {
			t.Errorf("step %d role %s: coherence scale %v without the regularizer, want 1", s.Step, s.Role, s.CoherenceScale)
		}
		if s.Step <= stop {
			trainedBefore[s.Role] = true
		} else if trainedBefore[s.Role] && !math.IsNaN(s.CoherenceCos) {
			restored++
		}
	}
	if restored == 0 {
		t.Fatalf("no role with an EMA from before step %d logged a cosine after it; the test shows nothing", stop)
	}
	runNativeCancelled(t, open, c, stop)
	runNative(t, open, c)
	if rowsText(t, c) != rowsText(t, a) {
		t.Error("a resumed native run wrote different rows from an uninterrupted one")
	}
}

// TestNativeStepFormLogsStepFactor: with I6's step form the `*` row of
// each trained step and policy carries the step factor the optimizer's
// step was multiplied by, the policy's role factors weighted by their
// gradient shares (engine.CoherenceStepFactor); in the paper's form it is
// null.
func TestNativeStepFormLogsStepFactor(t *testing.T) {
	if testing.Short() {
		t.Skip("native engine loop in -short mode")
	}
	for _, form := range []string{"", engine.CoherenceStep} {
		cfg := recipeConfig()
		cfg.RunID, cfg.Seed, cfg.Condition, cfg.Workflow = "native-voting-sp-"+form, 7, study.SP, study.Voting
		cfg.NVotes = 2
		cfg.Rollouts, cfg.ProblemsPerStep, cfg.Steps = 4, 2, 3
		cfg.LR = 1e-3
		cfg.Schedule.Total = 3
		cfg.DefaultMaxNewTokens = 12
		cfg.EvalEvery, cfg.SaveEvery, cfg.ValSize, cfg.SamplesPerStep = 0, 0, 2, 0
		cfg.Adapter.Rank, cfg.Adapter.Alpha = 2, 4
		cfg.Coherence = &engine.Coherence{Lambda: 0.5, EMADecay: 0.5, Form: form}
		dir := t.TempDir()
		runNative(t, nativeLoop(t, cfg), dir)
		r, err := runlog.ReadRun(dir)
		if err != nil {
			t.Fatal(err)
		}
		type key struct {
			step   int64
			policy string
		}
		want := map[key]float64{}
		for _, s := range r.Steps {
			if s.Role != "*" && !math.IsNaN(s.GradShare) {
				want[key{s.Step, s.Policy}] += s.GradShare * s.CoherenceScale
			}
		}
		checked := 0
		for _, s := range r.Steps {
			w, ok := want[key{s.Step, s.Policy}]
			if s.Role != "*" || !ok {
				continue
			}
			checked++
			if form == "" && !math.IsNaN(s.CoherenceScale) {
				t.Errorf("paper's form, step %d: the * row's coherence_scale is %v, want null", s.Step, s.CoherenceScale)
			}
			if form == engine.CoherenceStep && !(math.Abs(s.CoherenceScale-w) < 1e-12) {
				t.Errorf("step form, step %d policy %s: the * row's coherence_scale is %v, want the share-weighted role factors %v", s.Step, s.Policy, s.CoherenceScale, w)
			}
		}
		if checked == 0 {
			t.Fatalf("form %q: no trained * row; the test shows nothing", form)
		}
	}
}

// TestNativeFirstValSize: a run whose first validation uses more problems
// (Config.FirstValSize) writes the steps and evals rows of one without
// (the evals rows of every validation over the first ValSize problems),
// and its samples at step 0 are those of the other run plus the extra
// problems' (each job's random numbers depend on its problem's index, so
// a larger batch changes nothing for the problems both validate).
func TestNativeFirstValSize(t *testing.T) {
	if testing.Short() {
		t.Skip("native engine loop in -short mode")
	}
	cfg := nativeVotingConfig("native-voting-ip", study.IP, 2, 0)
	first := cfg
	first.FirstValSize = 5
	if first.Hash() == cfg.Hash() {
		t.Fatal("first_val_size does not enter the config hash")
	}
	a, b := t.TempDir(), t.TempDir()
	runNative(t, nativeLoop(t, cfg), a)
	runNative(t, nativeLoop(t, first), b)
	ra, err := runlog.ReadRun(a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := runlog.ReadRun(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", ra.Steps) != fmt.Sprintf("%+v", rb.Steps) {
		t.Error("the steps rows differ")
	}
	strip := func(es []runlog.EvalRow) string {
		for i := range es {
			es[i].RunID = ""
		}
		return fmt.Sprintf("%+v", es)
	}
	if strip(ra.Evals) != strip(rb.Evals) {
		t.Errorf("the evals rows differ:\n%s\n%s", strip(ra.Evals), strip(rb.Evals))
	}
	samples := func(r *runlog.Run, step int64) (rows []string, problems map[string]bool) {
		problems = map[string]bool{}
		for _, s := range r.Samples {
			if s.Split == "val" && s.Step == step {
				rows = append(rows, fmt.Sprintf("%s|%s|%d|%s", s.ProblemID, s.Agent, s.Rollout, s.Completion))
				problems[s.ProblemID] = true
			}
		}
		return rows, problems
	}
	sa, pa := samples(ra, 0)
	sb, pb := samples(rb, 0)
	if len(pa) != cfg.ValSize || len(pb) != first.FirstValSize {
		t.Fatalf("step 0 sampled %d and %d problems, want %d and %d", len(pa), len(pb), cfg.ValSize, first.FirstValSize)
	}
	var common []string
	for _, s := range sb {
		if pa[strings.SplitN(s, "|", 2)[0]] {
			common = append(common, s)
		}
	}
	if !slices.Equal(common, sa) {
		t.Errorf("step 0's samples of the shared problems differ:\n%v\n%v", common, sa)
	}
	for _, step := range []int64{2} {
		la, _ := samples(ra, step)
		lb, _ := samples(rb, step)
		if !slices.Equal(la, lb) {
			t.Errorf("step %d's samples differ", step)
		}
	}
}
