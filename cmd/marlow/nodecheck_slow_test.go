//go:build slow

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/engine/torch/torchtest"
	"github.com/marlowlab/marlow/harness/runner"
)

// TestBenchNodeCPU is make gpu-check's command on the CPU: marlow bench
// node on a spec whose scale is a committed tiny checkpoint on the torch
// engine (cpu), every step end to end (preflight, compile smoke through
// Inductor's C++ backend, engine-check in bfloat16, generation with both
// backends, training), the file written with what it measured, and
// marlow plan pricing the spec's runs from that file.
func TestBenchNodeCPU(t *testing.T) {
	py := torchtest.Python(t, "torch", "transformers", "peft", "safetensors", "tokenizers", "numpy", "jinja2")
	models, err := filepath.Glob(filepath.Join("..", "..", "seeds", "models", "s-*"))
	if err != nil || len(models) == 0 {
		t.Fatalf("no committed tiny model s-* under seeds/models: %v", err)
	}
	ckpt, err := filepath.Abs(models[0])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	specPath := filepath.Join(dir, "node.yaml")
	specText := fmt.Sprintf(`experiment: node-cpu
master_seed: 1
seeds: [1]
matrix:
  workflows: [voting]
  tasks: [synth-math]
  scales: [s]
  conditions: [base, sp]
models:
  s:
    engine: torch
    checkpoint: %s
    device: cpu
    dtype: float32
    python: %s
tasks:
  synth-math:
    val_size: 4
grpo:
  rollouts: 2
  problems_per_step: 2
  steps: 2
  warmup_steps: 0
  max_new_tokens: {default: 32}
  lora: {rank: 4, alpha: 8}
`, ckpt, py)
	if err := os.WriteFile(specPath, []byte(specText), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(dir, "runs")
	stdout, stderr, code := runCLI(t, nil, "bench", "node", "--spec", specPath, "--runs", runs, "--device", "cpu")
	if code != 0 {
		t.Fatalf("bench node: exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Log(stdout)
	check, err := runner.ReadNodeCheck(filepath.Join(runs, runner.NodeCheckFile))
	if err != nil || check == nil {
		t.Fatalf("the file: %v", err)
	}
	var names []string
	for _, s := range check.Steps {
		names = append(names, s.Name)
		if !s.OK {
			t.Errorf("step %s failed: %s", s.Name, s.Detail)
		}
	}
	want := "preflight, compile smoke, engine-check in bfloat16, generate, slots backend, train, generate, reference backend"
	if got := strings.Join(names, ", "); got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
	for _, b := range []string{"reference", "slots"} {
		if r := check.Generate[b]; !(r.TokS > 0) || r.Tokens == 0 || r.Workload == "" {
			t.Errorf("generation, %s backend: %+v", b, r)
		}
	}
	if !(check.Train.TokS > 0) || !strings.HasPrefix(check.GPU, "CPU ") || check.Device != "cpu" || check.Commit == "" || check.Checkpoint != ckpt ||
		!(check.Params > 0) || check.ServerPeakRSSBytes == 0 {
		t.Errorf("the file: %+v", check)
	}
	stdout, stderr, code = runCLI(t, nil, "plan", specPath, "--runs", runs)
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, stderr)
	}
	if w := "throughput measured on " + check.GPU + ", " + check.Date; !strings.Contains(stdout, w) {
		t.Errorf("plan does not price from the file (%q):\n%s", w, stdout)
	}
}
