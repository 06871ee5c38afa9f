//go:build slow

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/engine/torch/torchtest"
	"github.com/marlowlab/marlow/harness/runlog"
)

// routingSpec is the smoke recipe's voting cell on synth-math with three
// declared routings: the aggregator frozen (the main matrix, beside base),
// the generators frozen (arm frozen_gen) and per-adapter rates and KL (arm
// rates). %s is the model's engine settings.
const routingSpec = `experiment: routing
master_seed: 20260101
seeds: [1]
matrix:
  workflows: [voting]
  tasks: [synth-math]
  scales: [s]
  conditions: [base, ip_frozen_agg]
models:
  s:
%s    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192, rope_theta: 10000, max_positions: 2048}
tasks:
  synth-math:
    val_size: 4
grpo:
  rollouts: 4
  problems_per_step: 2
  steps: 3
  lr: 1.0e-3
  warmup_steps: 0
  schedule: constant
  max_new_tokens: {default: 96}
  lora: {rank: 4, alpha: 8}
  samples_per_step: 2
eval:
  every: 1
  before_training: true
  val_size: 4
checkpoint:
  every: 1
routings:
  ip_frozen_agg:
    from: ip
    roles: {aggregator: base}
  ip_frozen_gen:
    from: ip
    roles: {generator: base}
  rates:
    from: sp
    adapters:
      shared: {lr_mult: 0.5, kl_coef: 0.05}
arms:
  frozen_gen:
    matrix: {conditions: [ip_frozen_gen]}
  rates:
    matrix: {conditions: [rates]}
`

// TestRoutingBothEngines runs routingSpec on the native engine and on the
// torch engine (cpu, fp32): a frozen role has no adapter and no step rows,
// every one of its turns sampled the base model, and where its inputs do
// not depend on a trained role (the frozen generators) its outputs at the
// last validation are byte-identical to the base run's (the cell's runs
// share their validation draws); the rates routing trains its adapter at
// half the rate, and the manifests hold the routing.
func TestRoutingBothEngines(t *testing.T) {
	py := torchtest.Python(t, "torch", "transformers", "peft", "safetensors", "tokenizers", "numpy", "jinja2")
	for _, eng := range []struct{ name, settings string }{
		{"native", "    engine: native\n"},
		{"torch", fmt.Sprintf("    engine: torch\n    device: cpu\n    python: %s\n", py)},
	} {
		t.Run(eng.name, func(t *testing.T) {
			dir := t.TempDir()
			specPath := filepath.Join(dir, "routing.yaml")
			if err := os.WriteFile(specPath, []byte(fmt.Sprintf(routingSpec, eng.settings)), 0o644); err != nil {
				t.Fatal(err)
			}
			runs := filepath.Join(dir, "runs")
			if out, stderr, code := runCLI(t, nil, "run", specPath, "--runs", runs, "--jobs", "2", "--allow-dirty", "--progress", "none"); code != 0 {
				t.Fatalf("run: exit %d\n%s%s", code, out, stderr)
			}
			read := func(id string) *runlog.Run {
				t.Helper()
				r, err := runlog.ReadRun(filepath.Join(runs, "routing", id))
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			base := read("voting-base-s-synth-math-seed1")
			frozenAgg := read("voting-ip_frozen_agg-s-synth-math-seed1")
			frozenGen := read("voting-ip_frozen_gen-s-synth-math-frozen_gen-seed1")
			rates := read("voting-rates-s-synth-math-rates-seed1")

			frozen := func(r *runlog.Run, role, trained string) {
				t.Helper()
				id := r.Manifest.RunID
				ck, _ := filepath.Glob(filepath.Join(runs, "routing", id, "ckpt", "step-*", "engine", "*"))
				var adapters []string
				for _, p := range ck {
					if fi, err := os.Stat(p); err == nil && fi.IsDir() && !slices.Contains(adapters, filepath.Base(p)) {
						adapters = append(adapters, filepath.Base(p))
					}
				}
				if !slices.Equal(adapters, []string{trained}) {
					t.Errorf("%s: checkpointed adapters %v, want only %s", id, adapters, trained)
				}
				for _, s := range r.Steps {
					if s.Role == role || s.Policy != trained {
						t.Fatalf("%s: a step row of policy %q role %q", id, s.Policy, s.Role)
					}
				}
				if len(r.Steps) == 0 {
					t.Errorf("%s: no step rows: nothing trained", id)
				}
				n := 0
				for _, s := range r.Samples {
					if s.Role == role {
						n++
						if s.Policy != "" {
							t.Fatalf("%s: a %s turn of policy %q, want the base model", id, role, s.Policy)
						}
					}
				}
				if n == 0 {
					t.Errorf("%s: no %s turns", id, role)
				}
				if b, _ := json.Marshal(r.Manifest.Config); !strings.Contains(string(b), `"routing":{`) {
					t.Errorf("%s: the manifest's config names no routing", id)
				}
			}
			frozen(frozenAgg, "aggregator", "generator")
			frozen(frozenGen, "generator", "aggregator")

			// The frozen generators at the last validation against the base
			// run's (step 0, the same draws): byte-identical.
			last := frozenGen.Manifest.LastStep
			outputs := func(r *runlog.Run, step int64) []string {
				var out []string
				for _, s := range r.Samples {
					if s.Split == "val" && s.Step == step && s.Role == "generator" {
						out = append(out, fmt.Sprintf("%s/%d/%s: %q %d %s", s.ProblemID, s.Rollout, s.Agent, s.Completion, s.Tokens, s.Finish))
					}
				}
				return out
			}
			got, want := outputs(frozenGen, last), outputs(base, 0)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("frozen generators at step %d: %d outputs, base %d; identical %v", last, len(got), len(want), slices.Equal(got, want))
			}
			aggChanged := false
			for _, s := range frozenGen.Steps {
				aggChanged = aggChanged || (s.Role == "aggregator" && s.Seqs > 0)
			}
			if !aggChanged {
				t.Error("the frozen_gen run trained no aggregator turn: the check shows nothing")
			}

			for _, s := range rates.Steps {
				if s.Policy != "shared" || s.LR != 0.5e-3 {
					t.Errorf("rates: step %d policy %s role %s lr %v, want shared at 5e-4", s.Step, s.Policy, s.Role, s.LR)
				}
			}
			t.Logf("%s: frozen aggregator, frozen generators (%d outputs identical to base at step %d) and rates checked", eng.name, len(got), last)
		})
	}
}
