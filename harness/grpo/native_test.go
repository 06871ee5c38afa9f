package grpo

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthmath"
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

// TestNativeEngineLoop runs the loop end to end on the real pure-Go engine
// (a tiny random model) and synth-math prompts with a parity reward: the contracts fit, two runs
// write the same rows, and a cancelled run resumes to the same rows.
func TestNativeEngineLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("native engine loop in -short mode")
	}
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
	cfg := recipeConfig()
	cfg.RunID, cfg.Seed, cfg.Condition, cfg.Workflow = "native-voting-sp", 5, study.SP, study.Voting
	cfg.NVotes = 2
	cfg.Rollouts, cfg.ProblemsPerStep, cfg.Steps = 2, 1, 3
	cfg.LR = 1e-3
	cfg.Schedule.Total = 3
	cfg.DefaultMaxNewTokens = 12
	cfg.EvalEvery, cfg.SaveEvery, cfg.ValSize, cfg.SamplesPerStep = 2, 2, 2, 3
	cfg.Adapter.Rank, cfg.Adapter.Alpha = 2, 4

	open := func(dir string) (*Trainer, *runlog.Writer, int64) {
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
	full := func(dir string) {
		tr, w, last := open(dir)
		if err := tr.Run(context.Background(), last); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	full(a)
	full(b)
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

	tr, w, last := open(c)
	ctx, cancel := context.WithCancel(context.Background())
	tr.Progress = func(p Progress) {
		if p.Step == 1 {
			cancel()
		}
	}
	if err := tr.Run(ctx, last); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	w.Close()
	full(c)
	if rowsText(t, c) != want {
		t.Error("a resumed native run wrote different rows from an uninterrupted one")
	}
}
