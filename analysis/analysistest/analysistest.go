// Package analysistest synthesizes run logs in memory for the tests of the
// analysis and analysis/report packages: validation curves, per-role training
// statistics and validation samples with known shapes.
package analysistest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/marlowlab/marlow/harness/pin"
	"github.com/marlowlab/marlow/harness/runlog"
)

// nullConfigHash is the config hash of the fixture's runs, which store no
// config (null): the SHA-256 of its canonical JSON, as spec.StoredConfigHash
// computes it, so that `marlow check` finds the manifests intact.
var nullConfigHash = func() string {
	sum := sha256.Sum256([]byte("null"))
	return hex.EncodeToString(sum[:])
}()

// Manifest returns a finished run's manifest with fixed provenance.
func Manifest(id, workflow, cond, task, scale string, seedIndex int) runlog.Manifest {
	return runlog.Manifest{
		SchemaVersion: 1, RunID: id, Experiment: "fixture", Workflow: workflow, Task: task, Scale: scale,
		Condition: cond, Seed: uint64(1000 + seedIndex), MasterSeed: 7, SeedIndex: seedIndex,
		ConfigHash: nullConfigHash,
		Provenance: pin.Provenance{Commit: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.0",
			Files: map[string]string{"data/synth-math.jsonl": "aa11", "ckpt/tiny-s/model.safetensors": "bb22"}},
		Engine: "native", EngineVersion: "0.1.0", Status: runlog.StatusDone, Created: "2026-01-01T00:00:00Z",
		Updated: "2026-01-01T00:00:00Z",
	}
}

// Steps returns steps 0, every, 2*every, ... for n validations.
func Steps(n int, every int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i) * every
	}
	return out
}

// Evals returns the workflow-level ("*") validation rows of a curve.
func Evals(id, workflow string, steps []int64, acc []float64) []runlog.EvalRow {
	out := make([]runlog.EvalRow, len(steps))
	for i, s := range steps {
		out[i] = runlog.EvalRow{RunID: id, Step: s, Workflow: workflow, Split: "val", Role: "*", Accuracy: acc[i],
			AnyCorrect: acc[i], SelectionAcc: math.NaN(), FormatRate: 1, MeanLen: 50, Problems: 20, Turns: 20}
	}
	return out
}

// RoleEvals returns per-role validation rows with the given format rate
// and mean length at each step.
func RoleEvals(id, workflow, role string, steps []int64, format, length func(i int) float64) []runlog.EvalRow {
	out := make([]runlog.EvalRow, len(steps))
	for i, s := range steps {
		out[i] = runlog.EvalRow{RunID: id, Step: s, Workflow: workflow, Split: "val", Role: role, Accuracy: 0.5,
			AnyCorrect: 0.5, SelectionAcc: math.NaN(), FormatRate: format(i), MeanLen: length(i), Problems: 20, Turns: 20}
	}
	return out
}

// FinalSamples returns "final" validation samples of n problems with one
// rollout each, problem j correct at step i iff j < round(acc[i]*n), so
// per-problem accuracy matches the curve.
func FinalSamples(id, workflow string, steps []int64, acc []float64, n int) []runlog.SampleRow {
	var out []runlog.SampleRow
	for i, s := range steps {
		k := int(math.Round(acc[i] * float64(n)))
		for j := 0; j < n; j++ {
			// rotate which problems are right so the resampling has variety
			correct := (j+i)%n < k
			out = append(out, runlog.SampleRow{RunID: id, Step: s, Workflow: workflow, Split: "val",
				ProblemID: fmt.Sprintf("p%03d", j), Agent: "final", Role: "final", Parsed: "1", Compliant: true, Correct: correct})
		}
	}
	return out
}

// RoleSamples returns validation samples of one role at one step: n
// problems, completions from text(j).
func RoleSamples(id, workflow, role, policy string, step int64, n int, text func(j int) string) []runlog.SampleRow {
	out := make([]runlog.SampleRow, n)
	for j := range out {
		out[j] = runlog.SampleRow{RunID: id, Step: step, Workflow: workflow, Split: "val", ProblemID: fmt.Sprintf("p%03d", j),
			Agent: role, Role: role, Policy: policy, Completion: text(j), Compliant: true}
	}
	return out
}

// RoleSteps returns step rows of one role of a policy for training steps
// 1..n with the given gradient norm, same-role cosine and gradient share,
// without the coherence regularizer (coherence_cos and _scale undefined).
func RoleSteps(id, policy, role string, n int, norm, cos, share func(step int) float64) []runlog.StepRow {
	out := make([]runlog.StepRow, n)
	for i := range out {
		s := i + 1
		out[i] = runlog.StepRow{RunID: id, Step: int64(s), Policy: policy, Role: role, GradNorm: norm(s),
			AgentCosMean: cos(s), AgentCosMin: cos(s), GradShare: share(s), Tokens: 100, Seqs: 8, LR: 1e-4,
			CoherenceCos: math.NaN(), CoherenceScale: math.NaN()}
	}
	return out
}

// Const returns a constant function.
func Const(v float64) func(int) float64 { return func(int) float64 { return v } }

// Generator is a generator-like completion; Aggregator an aggregator-like one.
func Generator(j int) string {
	return fmt.Sprintf("Let us add the numbers step by step: %d + %d = %d. Then multiply by 2 to get %d.\nAnswer: %d", j, j+3, 2*j+3, 4*j+6, 4*j+6)
}

// Aggregator is a short, compliant aggregator selection.
func Aggregator(j int) string { return fmt.Sprintf("Selected: %d", j%3+1) }

// Fixture returns the small fixed log set of the report tests: task
// synth-math, workflow voting at scales s and m, conditions base, sa-rl
// (evaluated in single and voting), sp and ip with two seeds each. The
// sp runs at scale s show role capture of the aggregator; ip seed 2 at
// scale m has gradient amplification before a terminal cliff.
func Fixture() []*runlog.Run {
	var runs []*runlog.Run
	st := Steps(11, 10) // validations at 0..100
	curve := func(base, peak float64, peakAt int, end float64) []float64 {
		out := make([]float64, len(st))
		for i := range out {
			switch {
			case i <= peakAt:
				out[i] = base + (peak-base)*float64(i)/float64(peakAt)
			default:
				out[i] = peak + (end-peak)*float64(i-peakAt)/float64(len(st)-1-peakAt)
			}
			out[i] = math.Round(out[i]*20) / 20
		}
		return out
	}
	for si, scale := range []string{"s", "m"} {
		b := 0.30 + 0.1*float64(si)
		id := "voting-base-" + scale + "-math-seed1"
		base := &runlog.Run{Dir: "runs/fixture/" + id, Manifest: Manifest(id, "voting", "base", "synth-math", scale, 1)}
		base.Evals = Evals(id, "voting", []int64{0}, []float64{b})
		base.Samples = FinalSamples(id, "voting", []int64{0}, []float64{b}, 20)
		runs = append(runs, base)

		id = "single-sa-rl-" + scale + "-math-seed1"
		sa := &runlog.Run{Dir: "runs/fixture/" + id, Manifest: Manifest(id, "single", "sa-rl", "synth-math", scale, 1)}
		sa.Manifest.EvalWorkflows = []string{"single", "voting"}
		sa.Manifest.TotalSteps = 100
		for _, wf := range []string{"single", "voting"} {
			c := curve(b-0.05, b+0.15, 6, b+0.1)
			sa.Evals = append(sa.Evals, Evals(id, wf, st, c)...)
			sa.Samples = append(sa.Samples, FinalSamples(id, wf, st, c, 20)...)
		}
		sa.Steps = RoleSteps(id, "generator", "generator", 100, Const(1), func(int) float64 { return math.NaN() }, Const(1))
		runs = append(runs, sa)

		for seed := 1; seed <= 2; seed++ {
			id = fmt.Sprintf("voting-sp-%s-math-seed%d", scale, seed)
			sp := &runlog.Run{Dir: "runs/fixture/" + id, Manifest: Manifest(id, "voting", "sp", "synth-math", scale, seed)}
			sp.Manifest.TotalSteps = 100
			c := curve(b, b+0.2+0.05*float64(seed), 5, b+0.05)
			sp.Evals = append(Evals(id, "voting", st, c),
				RoleEvals(id, "voting", "aggregator", st, func(i int) float64 { return 0.95 - 0.06*float64(i) }, func(i int) float64 { return 8 + 6*float64(i) })...)
			sp.Evals = append(sp.Evals, RoleEvals(id, "voting", "generator", st, Const(0.9), Const(60))...)
			sp.Steps = append(RoleSteps(id, "shared", "generator", 100, func(s int) float64 { return 2 + 0.01*float64(s) }, Const(0.3), Const(0.8)),
				RoleSteps(id, "shared", "aggregator", 100, Const(0.5), func(int) float64 { return math.NaN() }, Const(0.2))...)
			sp.Samples = FinalSamples(id, "voting", st, c, 20)
			sp.Samples = append(sp.Samples, RoleSamples(id, "voting", "generator", "shared", 0, 6, Generator)...)
			sp.Samples = append(sp.Samples, RoleSamples(id, "voting", "generator", "shared", 100, 6, Generator)...)
			sp.Samples = append(sp.Samples, RoleSamples(id, "voting", "aggregator", "shared", 0, 6, Aggregator)...)
			sp.Samples = append(sp.Samples, RoleSamples(id, "voting", "aggregator", "shared", 100, 6, func(j int) string {
				return strings.Replace(Generator(j+1), "Answer:", "Selected answer:", 1)
			})...)
			runs = append(runs, sp)

			id = fmt.Sprintf("voting-ip-%s-math-seed%d", scale, seed)
			ip := &runlog.Run{Dir: "runs/fixture/" + id, Manifest: Manifest(id, "voting", "ip", "synth-math", scale, seed)}
			ip.Manifest.TotalSteps = 100
			cliff := si == 1 && seed == 2
			if cliff {
				c = []float64{b, b + 0.1, b + 0.2, b + 0.25, b + 0.3, b + 0.35, b + 0.35, b + 0.3, b + 0.05, b - 0.05, b - 0.1}
			} else {
				c = curve(b, b+0.3, 8, b+0.25)
			}
			ip.Evals = append(Evals(id, "voting", st, c),
				RoleEvals(id, "voting", "aggregator", st, Const(0.95), Const(8))...)
			ip.Evals = append(ip.Evals, RoleEvals(id, "voting", "generator", st, Const(0.9), Const(60))...)
			norm := func(s int) float64 { return 1 + 0.002*float64(s) }
			if cliff {
				norm = func(s int) float64 {
					if s >= 70 {
						return 1 + 0.5*float64(s-69)
					}
					return 1
				}
			}
			ip.Steps = append(RoleSteps(id, "generator", "generator", 100, norm, Const(0.8), Const(1)),
				RoleSteps(id, "aggregator", "aggregator", 100, Const(0.4), func(int) float64 { return math.NaN() }, Const(1))...)
			ip.Samples = FinalSamples(id, "voting", st, c, 20)
			runs = append(runs, ip)
		}
	}
	return runs
}

// WriteRuns stores runs with the run-log writer under dir/<run-id>, each
// committed at step 100 and marked done, as a finished study would leave
// them on disk.
func WriteRuns(dir string, runs []*runlog.Run) error {
	for _, r := range runs {
		if err := writeRun(filepath.Join(dir, r.Manifest.RunID), r); err != nil {
			return fmt.Errorf("analysistest: write run %s: %w", r.Manifest.RunID, err)
		}
	}
	return nil
}

func writeRun(dir string, r *runlog.Run) (err error) {
	w, _, err := runlog.Open(dir, r.Manifest)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}()
	if err := w.AddSteps(r.Steps...); err != nil {
		return err
	}
	if err := w.AddEvals(r.Evals...); err != nil {
		return err
	}
	if err := w.AddSamples(r.Samples...); err != nil {
		return err
	}
	if err := w.Commit(100); err != nil {
		return err
	}
	return w.SetStatus(runlog.StatusDone, "")
}

// Capture selects the role rows of a synthetic SP run (see Arm).
type Capture int

const (
	// NoRoleRows: no per-role validation rows or samples.
	NoRoleRows Capture = iota
	// Captured: the second role's format compliance falls from 0.95 to
	// 0.35 and its output length from 8 to 68, while its outputs turn
	// into the first role's (role capture).
	Captured
	// NotCaptured: the second role keeps its format and its outputs.
	NotCaptured
)

// Arm describes the runs of one condition of one cell of a synthetic
// study (Study): Seeds runs validated at steps 0, 10, ..., 100 with the
// accuracy curve Curve(seed) (11 points) on 40 problems.
type Arm struct {
	Workflow, Cond, Task, Scale string
	Seeds                       int
	Curve                       func(seed int) []float64
	// EvalWorkflows are the workflows an sa-rl run (trained in single) is
	// validated in, each with Curve; empty for other conditions.
	EvalWorkflows []string
	// Amplify makes the many-agent role's gradient norm jump five-fold from step
	// 51 with same-role cosine 0.8 (gradient amplification); otherwise
	// the norm is flat.
	Amplify bool
	// Capture sets the per-role rows and samples of a trained run (see
	// Study for its roles).
	Capture Capture
	// LR is the learning rate at each step of the step rows; nil keeps
	// RoleSteps' constant 1e-4.
	LR func(step int) float64
	// Long makes a trained run 400 steps validated every 20 (Curve then
	// returns 21 points), as the dynamics study's runs are.
	Long bool
}

// CosineLR is a cosine decay from 1e-4 to zero over n steps: its second
// half carries about 18% of the summed rate.
func CosineLR(n int) func(step int) float64 {
	return func(s int) float64 { return 0.5e-4 * (1 + math.Cos(math.Pi*float64(s)/float64(n))) }
}

// Study returns the runs of the arms. Trained runs have 100 steps of step
// rows of the workflow's many-agent role (workers in orch-workers,
// generators elsewhere; policy "shared" under sp, the role's own policy
// otherwise) and, except in single, of a second role (aggregator in
// voting, evaluator in eval-opt, synthesizer in orch-workers); the first
// holds 80% of a shared policy's gradient mass. Every
// manifest sets bootstrap to 200 replicates, to keep tests fast.
func Study(arms ...Arm) []*runlog.Run {
	var runs []*runlog.Run
	st := Steps(11, 10)
	nan := func(int) float64 { return math.NaN() }
	for _, a := range arms {
		for seed := 1; seed <= a.Seeds; seed++ {
			id := fmt.Sprintf("%s-%s-%s-%s-seed%d", a.Workflow, a.Cond, a.Scale, a.Task, seed)
			r := &runlog.Run{Dir: "runs/fixture/" + id, Manifest: Manifest(id, a.Workflow, a.Cond, a.Task, a.Scale, seed)}
			r.Manifest.Analysis = map[string]float64{"bootstrap": 200}
			wfs := []string{a.Workflow}
			if len(a.EvalWorkflows) > 0 {
				r.Manifest.EvalWorkflows = append([]string(nil), a.EvalWorkflows...)
				wfs = a.EvalWorkflows
			}
			c := a.Curve(seed)
			steps, nSteps := st, 100
			if a.Long {
				steps, nSteps = Steps(21, 20), 400
			}
			if a.Cond == "base" {
				steps, c = steps[:1], c[:1]
			}
			for _, wf := range wfs {
				r.Evals = append(r.Evals, Evals(id, wf, steps, c)...)
				r.Samples = append(r.Samples, FinalSamples(id, wf, steps, c, 40)...)
			}
			if a.Cond != "base" {
				r.Manifest.TotalSteps = int64(nSteps)
				norm := Const(1)
				if a.Amplify {
					norm = func(s int) float64 {
						if s > 50 {
							return 5
						}
						return 1
					}
				}
				first, second := firstRole(a.Workflow), secondRole[a.Workflow]
				genPol, secPol := first, second
				if a.Cond == "sp" {
					genPol, secPol = "shared", "shared"
				}
				cos := Const(0.8)
				if a.Workflow == "single" {
					cos = nan
				}
				r.Steps = RoleSteps(id, genPol, first, nSteps, norm, cos, Const(0.8))
				if second != "" {
					r.Steps = append(r.Steps, RoleSteps(id, secPol, second, nSteps, Const(0.5), nan, Const(0.2))...)
				}
				if a.LR != nil {
					for i := range r.Steps {
						r.Steps[i].LR = a.LR(int(r.Steps[i].Step))
					}
				}
				if a.Capture != NoRoleRows && second != "" {
					r.Evals = append(r.Evals, RoleEvals(id, a.Workflow, first, st, Const(0.9), Const(60))...)
					format, length := Const(0.95), Const(8)
					late := Aggregator
					if a.Capture == Captured {
						format = func(i int) float64 { return 0.95 - 0.06*float64(i) }
						length = func(i int) float64 { return 8 + 6*float64(i) }
						late = func(j int) string { return strings.Replace(Generator(j+1), "Answer:", "Selected answer:", 1) }
					}
					r.Evals = append(r.Evals, RoleEvals(id, a.Workflow, second, st, format, length)...)
					for _, s := range []int64{0, 100} {
						r.Samples = append(r.Samples, RoleSamples(id, a.Workflow, first, genPol, s, 6, Generator)...)
					}
					r.Samples = append(r.Samples, RoleSamples(id, a.Workflow, second, secPol, 0, 6, Aggregator)...)
					r.Samples = append(r.Samples, RoleSamples(id, a.Workflow, second, secPol, 100, 6, late)...)
				}
			}
			runs = append(runs, r)
		}
	}
	return runs
}

// firstRole is the role of a workflow with several agents per episode
// (workers in orch-workers, generators elsewhere); secondRole is the role
// beside it in the synthetic rows ("" in single).
func firstRole(workflow string) string {
	if workflow == "orch-workers" {
		return "worker"
	}
	return "generator"
}

var secondRole = map[string]string{"eval-opt": "evaluator", "voting": "aggregator", "orch-workers": "synthesizer"}

// InArm returns copies of the runs whose id starts with prefix as the runs
// of a spec arm: the manifest names the arm, and the id carries it before
// the seed ("...-ARM-seedN"), as planned runs of an arm do. Their logs are
// shared with the originals (read-only).
func InArm(runs []*runlog.Run, prefix, arm string) []*runlog.Run {
	var out []*runlog.Run
	for _, r := range runs {
		if !strings.HasPrefix(r.Manifest.RunID, prefix) {
			continue
		}
		c := *r
		id := r.Manifest.RunID
		if i := strings.LastIndex(id, "-seed"); i >= 0 {
			id = id[:i] + "-" + arm + id[i:]
		}
		c.Manifest.RunID, c.Manifest.Arm = id, arm
		c.Dir = filepath.Join(filepath.Dir(r.Dir), id)
		out = append(out, &c)
	}
	return out
}
