package runner

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/fake"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/workflow/workflowtest"
)

// fakeSpec is a one-cell experiment of the voting workflow with all four
// conditions; the fake engine and the test-add task stand in for the model
// and the data, so it runs in milliseconds.
const fakeSpec = `experiment: fk
master_seed: 7
seeds: [1]
matrix:
  workflows: [voting]
  tasks: [synth-math]
  scales: [s]
  conditions: [base, sa-rl, sp, ip]
models:
  s:
    engine: native
    tiny: {hidden: 16, layers: 1, heads: 2, kv_heads: 1, head_dim: 8, intermediate: 32, rope_theta: 10000, max_positions: 512}
tasks:
  synth-math: {val_size: 8}
grpo:
  rollouts: 4
  problems_per_step: 2
  steps: 4
  lr: %s
  warmup_steps: 0
  schedule: constant
  max_new_tokens: {default: 48, aggregator: 16}
  samples_per_step: 3
eval: {every: 2, val_size: 6}
checkpoint: {every: 2}
`

// writeSpec writes a spec file with the given learning rate into a new
// temporary folder and loads it.
func writeSpec(t *testing.T, lr string) *spec.Spec {
	t.Helper()
	return writeSpecIn(t, t.TempDir(), lr)
}

func writeSpecIn(t *testing.T, dir, lr string) *spec.Spec {
	t.Helper()
	p := filepath.Join(dir, "fk.yaml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(fakeSpec, lr)), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var agents = workflowtest.Agents{Bias: -0.3, Malformed: 0.05, TooMany: 0.1}

// fakeOptions runs on the fake engine and the test-add task.
func fakeOptions(runs string) Options {
	return Options{
		RunsDir: runs, Jobs: 2, AllowDirty: true,
		BaseModel: func(context.Context, spec.ModelConfig) (string, error) { return "", nil },
		Engines:   fakeEngines(),
		Task:      func(spec.DataConfig, TaskOptions) (datasets.Task, error) { return workflowtest.Task{ValSize: 8}, nil },
	}
}

// fakeEngines registers the fake engine under the name the specs select
// (native).
func fakeEngines() *engine.Registry {
	reg := &engine.Registry{}
	err := reg.Register(engine.Driver{Name: "native", Version: "fake",
		Open: func(context.Context, string, engine.Options) (engine.Engine, error) {
			return fake.New(agents.Respond), nil
		}})
	if err != nil {
		panic(err)
	}
	return reg
}

// nativeEngines registers the native engine.
func nativeEngines() *engine.Registry {
	reg := &engine.Registry{}
	if err := reg.Register(native.Driver()); err != nil {
		panic(err)
	}
	return reg
}

// rowsText renders a run's committed steps, evals and samples so that NaN
// compares equal to NaN.
func rowsText(t *testing.T, dir string) string {
	t.Helper()
	r, err := runlog.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%+v\n%+v\n%+v\nlast=%d", r.Steps, r.Evals, r.Samples, r.Manifest.LastStep)
}

// states renders a summary as "id=state" lines.
func states(sum *Summary) string {
	var b strings.Builder
	for _, o := range sum.Outcomes {
		fmt.Fprintf(&b, "%s=%s\n", o.ID, o.State)
	}
	return b.String()
}

func isNaN(x float64) bool { return math.IsNaN(x) }

// stepHook is a Reporter that calls fn on every progress report.
type stepHook struct {
	nopReporter
	fn func(id string, step int)
}

func (h stepHook) Step(id string, p grpo.Progress) { h.fn(id, p.Step) }
