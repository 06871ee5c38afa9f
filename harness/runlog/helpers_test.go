package runlog

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The generators below make deterministic rows for a test run: every value
// is a function of (run, step, index), drawn from a local PCG stream.

var testRoles = []string{"generator", "evaluator", "aggregator", "synthesizer"}

func rng(step int64, salt uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(step)+1, salt))
}

func genSteps(run string, step int64) []StepRow {
	r := rng(step, 1)
	var out []StepRow
	for _, policy := range []string{"shared"} {
		for i, role := range append([]string{"*"}, testRoles...) {
			row := StepRow{
				RunID: run, Step: step, Policy: policy, Role: role,
				Loss: r.NormFloat64(), GradNorm: r.ExpFloat64(), GradShare: r.Float64(),
				AgentCosMean: r.Float64()*2 - 1, AgentCosMin: r.Float64()*2 - 1,
				Tokens: int64(r.IntN(5000)), Seqs: int64(r.IntN(64)), MeanLen: r.Float64() * 300,
				Entropy: r.Float64(), Perplexity: 1 + r.Float64(), RatioMean: 1, RatioMax: 1 + r.Float64()/3,
				ClipFrac: r.Float64() / 10, KL: r.Float64() / 100, RewardMean: r.Float64(), RewardStd: r.Float64() / 2,
				ZeroVarFrac: r.Float64(), LR: 1e-5 * float64(step+1),
			}
			switch i {
			case 0: // the total row: no cosines
				row.AgentCosMean, row.AgentCosMin = math.NaN(), math.NaN()
			case 1: // a role with one agent: undefined same-role cosine
				row.AgentCosMin = math.NaN()
				row.RoleCos = map[string]float64{}
			default:
				row.RoleCos = map[string]float64{}
				for _, other := range testRoles {
					if other != role {
						row.RoleCos[other] = r.Float64()*2 - 1
					}
				}
				if i == 3 {
					row.RoleCos["evaluator"] = math.NaN()
				}
			}
			out = append(out, row)
		}
	}
	return out
}

func genEvals(run string, step int64) []EvalRow {
	r := rng(step, 2)
	var out []EvalRow
	for _, wf := range []string{"voting", "single"} {
		for _, role := range append([]string{"*"}, testRoles[:2]...) {
			sel := math.NaN()
			if role == "aggregator" || role == "*" {
				sel = r.Float64()
			}
			out = append(out, EvalRow{
				RunID: run, Step: step, Workflow: wf, Split: "val", Role: role,
				Accuracy: r.Float64(), AnyCorrect: r.Float64(), SelectionAcc: sel, FormatRate: r.Float64(),
				MeanLen: r.Float64() * 200, Problems: 64, Turns: int64(64 + r.IntN(128)),
			})
		}
	}
	return out
}

func genSamples(run string, step int64, n int) []SampleRow {
	r := rng(step, 3)
	out := make([]SampleRow, n)
	for i := range out {
		adv := r.NormFloat64()
		if i%5 == 4 {
			adv = math.NaN()
		}
		out[i] = SampleRow{
			RunID: run, Step: step, Workflow: "voting", Split: "train",
			ProblemID: fmt.Sprintf("p%04d", r.IntN(1000)), Rollout: int64(i % 8),
			Agent: fmt.Sprintf("generator%d", i%3), Role: "generator", Policy: "shared",
			Prompt:     fmt.Sprintf("Problem %d: compute %d * %d + %d. Think step by step — «ünïcödé».", i, r.IntN(100), r.IntN(100), r.IntN(100)),
			Completion: fmt.Sprintf("We multiply first, then add.\nAnswer: %d", r.IntN(10000)),
			Parsed:     fmt.Sprint(r.IntN(10000)), Compliant: r.IntN(4) != 0, Correct: r.IntN(2) == 0,
			Reward: float64(r.IntN(2)), Advantage: adv, Tokens: int64(20 + r.IntN(200)), Finish: "stop",
		}
	}
	return out
}

func genTiming(run string, step int64) []TimingRow {
	return []TimingRow{{RunID: run, Step: step, RolloutSec: 1.5 + float64(step), TrainSec: 0.25, TotalSec: 2 + float64(step)}}
}

func testManifest(run string) Manifest {
	return Manifest{
		RunID: run, Experiment: "unit", Workflow: "voting", EvalWorkflows: []string{"voting", "single"},
		Task: "synth-math", Scale: "s", Condition: "sp", Seed: 42, MasterSeed: 7, SeedIndex: 1,
		ConfigHash: "cfg-1", Config: map[string]any{"lr": 1e-5, "group": 8},
		Analysis: map[string]float64{"cliff_abs": 0.1}, Engine: "native", EngineVersion: "test",
		TotalSteps: 10,
	}
}

// same reports whether two row slices are equal, NaN equal to NaN and a nil
// map distinct from an empty one.
func same[R any](a, b []R) bool {
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
}

func mustSame[R any](t *testing.T, what string, got, want []R) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !same(got[i:i+1], want[i:i+1]) {
			t.Fatalf("%s row %d:\n got %#v\nwant %#v", what, i, got[i], want[i])
		}
	}
}

// treeFiles returns the relative path and content of every file under dir.
func treeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// scenarioRows returns the rows the test scenario adds at step.
func scenarioRows(run string, step int64) ([]StepRow, []EvalRow, []SampleRow, []TimingRow) {
	var evals []EvalRow
	if step%3 == 0 {
		evals = genEvals(run, step)
	}
	return genSteps(run, step), evals, genSamples(run, step, 6), genTiming(run, step)
}

// scenarioCommits reports whether the scenario commits after step.
func scenarioCommits(step, total int64) bool { return step%2 == 1 || step == total-1 }

// writeScenario writes the test run in dir through step total-1, resuming
// it when dir already holds part of it. Rows of a step are added in one
// go; commits happen at odd steps and at the last step.
func writeScenario(dir, run string, total int64) error {
	w, last, err := Open(dir, testManifest(run))
	if err != nil {
		return err
	}
	defer w.Close()
	for step := last + 1; step < total; step++ {
		s, e, sm, tm := scenarioRows(run, step)
		if err := w.AddSteps(s...); err != nil {
			return err
		}
		if err := w.AddEvals(e...); err != nil {
			return err
		}
		if err := w.AddSamples(sm...); err != nil {
			return err
		}
		if err := w.AddTiming(tm...); err != nil {
			return err
		}
		if scenarioCommits(step, total) {
			if err := w.Commit(step); err != nil {
				return err
			}
		}
	}
	return w.SetStatus(StatusDone, "")
}

// scenarioRun returns the rows a reader must see when the scenario's last
// committed step is last, in reader order.
func scenarioRun(run string, last int64) *Run {
	r := &Run{}
	for step := int64(0); step <= last; step++ {
		s, e, sm, tm := scenarioRows(run, step)
		r.Steps = append(r.Steps, s...)
		r.Evals = append(r.Evals, e...)
		r.Samples = append(r.Samples, sm...)
		r.Timing = append(r.Timing, tm...)
	}
	sortRows(stepsDef, r.Steps)
	sortRows(evalsDef, r.Evals)
	sortRows(samplesDef, r.Samples)
	sortRows(timingDef, r.Timing)
	return r
}

func sortRows[R any](t *tableDef[R], rows []R) {
	slices.SortStableFunc(rows, func(a, b R) int { return t.order(&a, &b) })
}

func mustSameRun(t *testing.T, got, want *Run) {
	t.Helper()
	mustSame(t, "steps", got.Steps, want.Steps)
	mustSame(t, "evals", got.Evals, want.Evals)
	mustSame(t, "samples", got.Samples, want.Samples)
	mustSame(t, "timing", got.Timing, want.Timing)
}
