package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets/dapo"
	"github.com/marlowlab/marlow/datasets/datasetstest"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/spec"
)

// A data file whose validation split is smaller than eval.val_size is
// refused by SplitProblems and the preflight, naming the task, before
// anything runs; a large enough eval.val_size passes.
func TestSplitProblemsSmallDataSet(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "dapo.parquet")
	var rows []datasetstest.MathRow
	for i := range 30 {
		rows = append(rows, datasetstest.MathRow{Prompt: dapo.WrapperPrefix + fmt.Sprintf("Compute %d+1.", i) + dapo.WrapperSuffix, Truth: fmt.Sprint(i + 1)})
	}
	datasetstest.WriteDAPO(t, file, rows)
	text := `experiment: small
seeds: [1]
matrix:
  workflows: [single]
  tasks: [dapo-math]
  scales: [s]
  conditions: [base]
models:
  s:
    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}
tasks:
  dapo-math:
    path: %s
eval:
  val_size: %d
`
	reg := noEngineRegistry(t)
	cases := []struct {
		valSize int
		want    string // "" when the split is large enough
	}{
		{8, "task dapo-math (source dapo-math, " + file + "): the validation split has 4 problems, fewer than eval.val_size (8): lower eval.val_size to at most 4, or use a larger data set or a larger tasks.dapo-math.val_frac"},
		{4, ""},
		{0, ""},
	}
	for _, tc := range cases {
		got, perr := checkSplits(t, filepath.Join(dir, fmt.Sprintf("small-%d.yaml", tc.valSize)), fmt.Sprintf(text, file, tc.valSize), reg)
		if tc.want == "" {
			if got != "" || perr != nil {
				t.Errorf("eval.val_size %d: split problems %q, preflight %v", tc.valSize, got, perr)
			}
			continue
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("eval.val_size %d: split problems %q, want %q", tc.valSize, got, tc.want)
		}
		if perr == nil || !strings.Contains(perr.Error(), tc.want) {
			t.Errorf("eval.val_size %d: preflight %v, want %q", tc.valSize, perr, tc.want)
		}
	}
}

// A file task's sizes are checked at plan and preflight like a published
// data set's: eval.val_size against its validation split, train_size
// against its train split, and a training run against an empty train split.
func TestSplitProblemsFileTask(t *testing.T) {
	dir := t.TempDir()
	sample, err := filepath.Abs(filepath.Join("..", "..", "datasets", "filetask", "testdata", "gsm8k.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	one := filepath.Join(dir, "one.jsonl")
	if err := os.WriteFile(one, []byte(`{"question": "What is 2+2?", "answer": "#### 4"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"question": "What is 2+2?", "answer": "#### 4"}`+"\n"+`{"question": "What is 3+3?", "answr": "#### 6"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	accent := filepath.Join(dir, "accent.jsonl")
	rows, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(accent, append(rows, `{"question": "Renée has 3 apples. How many?", "answer": "#### 3"}`+"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	text := `experiment: small
seeds: [1]
matrix:
  workflows: [single]
  tasks: [gsm8k]
  scales: [s]
  conditions: [%s]
models:
  s:
    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}
tasks:
  gsm8k:
    source: file
    path: %s
    val_frac: %g
    train_size: %d
    file: {verifier: answer, problem: question, answer: answer, answer_after: "####"}
eval:
  val_size: %d
`
	reg := noEngineRegistry(t)
	cases := []struct {
		name      string
		cond      string
		path      string
		valFrac   float64
		trainSize int
		valSize   int
		want      string // "" when the sizes fit
	}{
		{"fits", "sa-rl", sample, 0.25, 0, 1, ""},
		{"train pool fits", "sa-rl", sample, 0.25, 5, 1, ""},
		{"eval.val_size too large", "base", sample, 0.25, 0, 12, "the validation split has 1 problems, fewer than eval.val_size (12): lower eval.val_size to at most 1"},
		{"train_size too large", "sa-rl", sample, 0.25, 50, 1, "train_size 50 exceeds the 11 train problems of " + sample},
		{"empty train split", "sa-rl", one, 0.99, 0, 1, "the train split is empty, but run "},
		{"empty train split, no training", "base", one, 0.99, 0, 1, ""},
		{"character outside the tiny alphabet", "base, sa-rl", accent, 0.25, 0, 1, `problem 13 has the character 'é' (U+00E9), and a tiny scale's tokenizer (printable ASCII and newlines) cannot encode it`},
		{"unreadable row, once for all runs", "base, sa-rl", bad, 0.25, 0, 1, `row 2 (line 2): field "answer" (answer): missing; the row has fields "answr", "question"`},
	}
	for _, tc := range cases {
		got, perr := checkSplits(t, filepath.Join(dir, "file.yaml"), fmt.Sprintf(text, tc.cond, tc.path, tc.valFrac, tc.trainSize, tc.valSize), reg)
		if tc.want == "" {
			if got != "" || perr != nil {
				t.Errorf("%s: split problems %q, preflight %v", tc.name, got, perr)
			}
			continue
		}
		if !strings.Contains(got, tc.want) || !strings.HasPrefix(got, "task gsm8k") || !strings.Contains(got, tc.path) || strings.Count(got, "\n") > 0 {
			t.Errorf("%s: split problems %q, want %q", tc.name, got, tc.want)
		}
		if perr == nil || !strings.Contains(perr.Error(), tc.want) {
			t.Errorf("%s: preflight %v, want %q", tc.name, perr, tc.want)
		}
	}
}

// checkSplits writes the spec text to path and returns what SplitProblems
// says of its runs (one line each, joined) and the preflight's error.
func checkSplits(t *testing.T, path, text string, reg *engine.Registry) (string, error) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := spec.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(SplitProblems(runs, nil), "\n"), Preflight(context.Background(), s, "", reg)
}

// noEngineRegistry is a registry whose native engine fails the test when
// opened: a preflight's size checks must not start an engine.
func noEngineRegistry(t *testing.T) *engine.Registry {
	t.Helper()
	reg := &engine.Registry{}
	if err := reg.Register(engine.Driver{Name: "native", Version: "test",
		Open: func(context.Context, string, engine.Options) (engine.Engine, error) {
			t.Error("preflight opened an engine")
			return nil, fmt.Errorf("unreachable")
		}}); err != nil {
		t.Fatal(err)
	}
	return reg
}
