package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/marlowlab/marlow/harness/bench"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/pretrain"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/workflow"
)

// Where a base model comes from, as `marlow plan` reports it.
const (
	BaseCommitted  = "committed"  // seeds/models of the spec's repository
	BaseCached     = "cached"     // $MARLOW_CACHE/models
	BasePretrain   = "pretrain"   // neither: `marlow run` pretrains it into the cache first
	BaseCheckpoint = "checkpoint" // a checkpoint folder named by the spec
	BaseMissing    = "missing"    // a checkpoint folder that does not exist
)

// BaseModel is where the base model of one scale comes from: what
// PretrainedBase would use, found without building anything.
type BaseModel struct {
	Scale         string
	Where         string // BaseCommitted, BaseCached, BasePretrain, BaseCheckpoint or BaseMissing
	Dir           string // the folder ("" for BasePretrain)
	PretrainSteps int    // tiny models: the pretraining budget
	// KeySettings are the spec's workflow settings that differ from their
	// defaults and enter this tiny model's pretraining key (so its runs
	// start from another base model than at the defaults), as
	// pretrain.KeySettings names them.
	KeySettings []string
	// KeyHint says how to share one base model across such settings ("" if
	// there is no option for them).
	KeyHint string
	// Searched lists the folders looked in for a tiny model's checkpoint
	// (set for BasePretrain), and NoRepository says that neither the spec
	// nor the working directory lies in a repository with seeds/models, so
	// no committed checkpoint could be found.
	Searched     []string
	NoRepository bool

	job *pretrain.Job // tiny models
}

// BaseModels reports, for every scale the runs use (in plan order), where
// its base checkpoint comes from: committed under seeds/models, cached, to
// be pretrained by `marlow run`, or a checkpoint folder.
func BaseModels(s *spec.Spec, runs []spec.Run) ([]BaseModel, error) {
	var out []BaseModel
	seen := map[string]bool{}
	for _, r := range runs {
		sc := r.Scale
		if seen[sc] {
			continue
		}
		seen[sc] = true
		m := r.Config.Model
		if m.Tiny == nil {
			b := BaseModel{Scale: sc, Where: BaseCheckpoint, Dir: m.Checkpoint}
			if st, err := os.Stat(m.Checkpoint); err != nil || !st.IsDir() {
				b.Where = BaseMissing
			}
			out = append(out, b)
			continue
		}
		job, err := pretrain.FromSpec(s, sc, pretrain.ConfigOf(s, sc))
		if err != nil {
			return nil, err
		}
		dir, where, err := pretrain.LocatorOf(s).Find(job)
		if err != nil {
			return nil, err
		}
		b := BaseModel{Scale: sc, Dir: dir, PretrainSteps: job.Steps(), KeySettings: pretrain.KeySettings(s, sc), job: &job}
		if def := spec.DefaultWorkflowSettings(); len(s.PretrainFor(sc).NVotesMix) == 0 && s.Workflow.NVotes != def.NVotes {
			b.KeyHint = fmt.Sprintf("pretrain.n_votes_mix: [%d, %d] in every spec of an n_votes ablation gives them one base model",
				min(def.NVotes, s.Workflow.NVotes), max(def.NVotes, s.Workflow.NVotes))
		}
		switch where {
		case pretrain.FromCommitted:
			b.Where = BaseCommitted
		case pretrain.FromCache:
			b.Where = BaseCached
		default:
			b.Where = BasePretrain
			l := pretrain.LocatorOf(s)
			if b.Searched, err = l.Searched(job); err != nil {
				return nil, err
			}
			b.NoRepository = !slices.ContainsFunc(append([]string{l.RepoRoot}, l.OtherRoots...), func(root string) bool {
				st, err := os.Stat(filepath.Join(root, pretrain.CommittedDir))
				return root != "" && err == nil && st.IsDir()
			})
		}
		out = append(out, b)
	}
	return out, nil
}

// Estimate is a rough time estimate of a plan on this machine.
type Estimate struct {
	// Seconds is the estimated wall time of the plan when every turn is
	// trained: pretraining the missing base models, then the runs,
	// Parallel at a time. GRPO trains only the turns of groups whose
	// rewards differ, so this is the upper end.
	Seconds float64
	// MinSeconds is the same with no turn trained (generation alone), the
	// lower end.
	MinSeconds float64
	// PretrainSeconds is the part spent pretraining base models.
	PretrainSeconds float64
	// Parallel is how many runs execute at once (marlow run's default
	// --jobs, at most the number of runs).
	Parallel int
	// Speeds are the calibrated one-thread speeds, per scale.
	Speeds map[string]bench.Speed
	// GenTokens and TrainTokens are the plan's expected generated tokens
	// and trained sequence tokens.
	GenTokens, TrainTokens float64
	// Unestimated lists the tiny-model scales without an estimate, with
	// why (checkpoint models are priced by EstimateGPU instead).
	Unestimated []string
}

// lengthSample is how many teacher transcripts the turn lengths are
// averaged over.
const lengthSample = 256

// EstimatePlan estimates how long `marlow run` takes for runs on cores
// cores. It is rough by construction: each scale's engine is calibrated on
// its shape with random weights for about a second (bench.Calibrate), a
// turn is assumed as long as the teacher's turns of its role that the tiny
// model was pretrained on (at most the role's max_new_tokens), eval-opt
// always runs all its iterations, pretraining is counted at the LoRA train
// speed, and RL changes output lengths as it trains. Since GRPO trains only
// the turns of groups whose rewards differ, which depends on accuracy, the
// estimate is a range: MinSeconds with no turn trained, Seconds with every
// turn trained. Runs execute min(cores,
// runs) at a time with the cores divided among them, as `marlow run`
// does by default. Only tiny models are estimated here; the runs of a
// checkpoint model (a real Qwen3) are priced in GPU-hours by EstimateGPU.
func EstimatePlan(ctx context.Context, reg *engine.Registry, runs []spec.Run, bases []BaseModel, cores int) (Estimate, error) {
	est := Estimate{Speeds: map[string]bench.Speed{}, Parallel: max(1, min(cores, len(runs)))}
	lengths := map[string]map[string]pretrain.Lengths{}
	for _, b := range bases {
		if b.job == nil {
			continue // a checkpoint model: priced in GPU-hours (EstimateGPU)
		}
		var name string
		for _, r := range runs {
			if r.Scale == b.Scale {
				name = r.Config.Model.Engine
				break
			}
		}
		sp, err := bench.Calibrate(ctx, reg, name, b.job.Model)
		if err != nil {
			est.Unestimated = append(est.Unestimated, fmt.Sprintf("%s (engine %s: %v)", b.Scale, name, err))
			continue
		}
		ls, err := pretrain.RoleLengths(*b.job, lengthSample)
		if err != nil {
			return est, err
		}
		est.Speeds[b.Scale], lengths[b.Scale] = sp, ls
		if b.Where == BasePretrain {
			var mean, n float64
			for _, l := range ls {
				mean += (l.Prompt + l.Completion) * float64(l.N)
				n += float64(l.N)
			}
			tokens := float64(b.PretrainSteps*b.job.Pretrain.BatchSize) * mean / max(n, 1)
			// pretraining runs before the runs of its scale, with the
			// threads of one run
			est.PretrainSeconds += tokens / sp.TrainTokS / float64(max(1, cores/est.Parallel))
			est.TrainTokens += tokens
		}
	}
	var total, longest, totalGen, longestGen float64
	for _, r := range runs {
		sp, ok := est.Speeds[r.Scale]
		if !ok {
			continue
		}
		gen, train := runTokens(r.Config, lengths[r.Scale])
		genSec := gen / sp.GenTokS
		sec := genSec + train/sp.TrainTokS
		est.GenTokens += gen
		est.TrainTokens += train
		total, totalGen = total+sec, totalGen+genSec
		longest, longestGen = max(longest, sec), max(longestGen, genSec)
	}
	threads := float64(max(1, cores/est.Parallel))
	est.Seconds = est.PretrainSeconds + max(total/float64(cores), longest/threads)
	est.MinSeconds = est.PretrainSeconds + max(totalGen/float64(cores), longestGen/threads)
	return est, nil
}

// runTokens is the expected generated tokens and trained sequence tokens
// of one run, from the mean turn lengths of each teacher role.
func runTokens(c spec.RunConfig, ls map[string]pretrain.Lengths) (gen, train float64) {
	turn := func(role, teacherRole string) (prompt, comp float64) {
		maxNew := float64(c.GRPO.MaxNewTokensFor(role))
		l, ok := ls[teacherRole]
		if !ok || l.N == 0 {
			return 0, maxNew
		}
		return l.Prompt, min(l.Completion, maxNew)
	}
	// rollout returns the generated and prompt+completion tokens of one
	// rollout of workflow w.
	rollout := func(w string) (gen, seq float64) {
		for _, t := range workflowTurns(w, c.WorkflowSet) {
			teacher := t.Role
			if t.Revision {
				teacher = pretrain.RoleReviser
			}
			p, comp := turn(t.Role, teacher)
			gen += float64(t.N) * comp
			seq += float64(t.N) * (p + comp)
		}
		return gen, seq
	}
	return runTotals(c, rollout)
}

// runTotals is a run's generated and trained sequence tokens, given what
// one rollout of a workflow generates and trains (rollout): the training
// steps' rollouts of its workflow, and every validation's episodes of each
// workflow it is evaluated in.
func runTotals(c spec.RunConfig, rollout func(workflow string) (gen, seq float64)) (gen, train float64) {
	steps := 0
	if c.Train {
		steps = c.GRPO.Steps
		g, seq := rollout(c.Workflow)
		n := float64(steps * c.GRPO.ProblemsPerStep * c.GRPO.Rollouts)
		gen += n * g
		train += n * seq
	}
	val := c.Eval.ValSize
	if val == 0 {
		val = c.Data.ValSize
	}
	perEval := float64(val * max(1, c.Eval.Samples))
	evals := float64(evaluations(steps, c.Eval))
	if c.Eval.FirstValSize > val && (c.Eval.BeforeTraining || steps == 0) {
		// the first validation's extra problems
		evals += float64(c.Eval.FirstValSize-val) / float64(val)
	}
	for _, w := range c.EvalWorkflows {
		g, _ := rollout(w)
		gen += evals * perEval * g
	}
	return gen, train
}

// evaluations counts a run's validations: before training (always for an
// untrained run), every Eval.Every steps, and at the last step.
func evaluations(steps int, e spec.Eval) int {
	n := 0
	if e.BeforeTraining || steps == 0 {
		n++
	}
	if steps > 0 {
		if e.Every > 0 {
			n += steps / e.Every
		}
		if e.Every == 0 || steps%e.Every != 0 {
			n++
		}
	}
	return n
}

// workflowTurns lists the turns of one rollout of a workflow, at most (as
// its workflow.Definition counts them: eval-opt with every iteration it may
// run).
func workflowTurns(w string, ws spec.WorkflowSettings) []workflow.RoleTurns {
	ts, _ := workflow.MaxTurns(w, workflowConfig(w, ws))
	return ts
}

// workflowConfig is the workflow.Config of workflow w's shape under ws.
func workflowConfig(w string, ws spec.WorkflowSettings) workflow.Config {
	return workflow.Config{Name: w, Settings: ws}
}
