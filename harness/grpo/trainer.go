package grpo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/workflow"
)

// Log is where the loop writes its rows; *runlog.Writer implements it.
// Rows added after the last Commit are dropped by a crash and regenerated
// on resume.
type Log interface {
	AddSteps(rows ...runlog.StepRow) error
	AddEvals(rows ...runlog.EvalRow) error
	AddSamples(rows ...runlog.SampleRow) error
	AddTiming(rows ...runlog.TimingRow) error
	Commit(step int64) error
}

var _ Log = (*runlog.Writer)(nil)

// Progress is what the loop reports after validation at step 0 and after
// every training step.
type Progress struct {
	Step, Steps int
	Reward      float64 // mean outcome reward of the step's rollouts (NaN at step 0)
	ValAcc      float64 // last validation accuracy of the first eval workflow (NaN before any)
}

// ErrInterrupted is returned (wrapped, with the context's cause) when the
// context is cancelled: the loop finished and committed the step it was in.
var ErrInterrupted = errors.New("grpo: training interrupted")

// Trainer runs the GRPO loop of one run.
type Trainer struct {
	Config  Config
	Engine  engine.Engine
	Task    datasets.Task
	Log     Log
	CkptDir string // checkpoint folder (the run's ckpt/)
	// Progress, when set, is called after step 0's validation and after
	// every training step.
	Progress func(Progress)
	// Now is the clock of the timing table (time.Now when nil). Timing is
	// the one output that is not deterministic.
	Now func() time.Time

	val      []datasets.Problem
	valFirst []datasets.Problem // the first validation's, when Config.FirstValSize is set
	adapters []string
	route    func(string) string
	st       State
}

// Run trains from the run log's last committed step: lastStep is what
// runlog.Open returned (-1 for a new run). A new run validates at step 0
// (when EvalBeforeTraining, always for base) and commits step 0; a resumed
// run loads the checkpoint of lastStep and continues after it. Steps are
// 1-based: step k trains on problems (k-1)*ProblemsPerStep + j of the train
// stream. Validation runs at step 0, every EvalEvery steps and at the last
// step; checkpoints every SaveEvery steps and at the last step.
//
// Run creates the condition's adapters (seeded from the run seed and the
// adapter name), so it needs an engine without them.
//
// When ctx is cancelled the loop stops after the step in progress (engine
// calls are not cancelled mid-step), checkpoints and commits it, and returns
// an error wrapping ErrInterrupted.
func (t *Trainer) Run(ctx context.Context, lastStep int64) error {
	cfg := t.Config
	if err := cfg.Validate(); err != nil {
		return err
	}
	if t.Engine == nil || t.Task == nil || t.Log == nil || t.CkptDir == "" {
		return fmt.Errorf("grpo: run %s: trainer needs an engine, a task, a log and a checkpoint folder", cfg.RunID)
	}
	// Engine calls are never cancelled: a step in progress always finishes.
	ectx := context.WithoutCancel(ctx)
	route, _ := Router(cfg.Condition, cfg.Routing)
	t.route = route
	var err error
	t.adapters, err = Adapters(cfg.Condition, cfg.Routing, append([]string{cfg.Workflow}, cfg.evalWorkflows()...)...)
	if err != nil {
		return fmt.Errorf("grpo: run %s: %w", cfg.RunID, err)
	}
	for _, a := range t.adapters {
		ac := cfg.Adapter
		ac.Seed = workflow.SeedKey{RunSeed: cfg.Seed, Purpose: "adapter", Agent: a}.Seed()
		if err := t.Engine.NewAdapter(ectx, a, ac); err != nil {
			return fmt.Errorf("grpo: run %s: create adapter %s: %w", cfg.RunID, a, err)
		}
	}
	val, err := t.Task.Validation()
	if err != nil {
		return fmt.Errorf("grpo: run %s: validation set of %s: %w", cfg.RunID, t.Task.Name(), err)
	}
	if cfg.FirstValSize > 0 {
		if cfg.ValSize == 0 || cfg.FirstValSize > len(val) {
			return fmt.Errorf("grpo: run %s: first_val_size %d needs val_size below it and at most the %d validation problems of %s", cfg.RunID, cfg.FirstValSize, len(val), t.Task.Name())
		}
		t.valFirst = val[:cfg.FirstValSize]
	}
	if cfg.ValSize > 0 {
		if cfg.ValSize > len(val) {
			return fmt.Errorf("grpo: run %s: val_size %d exceeds the %d validation problems of %s", cfg.RunID, cfg.ValSize, len(val), t.Task.Name())
		}
		val = val[:cfg.ValSize]
	}
	t.val = val
	steps := cfg.steps()
	committed := lastStep
	if lastStep < 0 {
		t.st = State{Version: stateVersion, ConfigHash: cfg.Hash(), Adapters: t.adapters}
		if cfg.EvalBeforeTraining || steps == 0 {
			if err := t.evaluate(ectx, 0); err != nil {
				return err
			}
		}
		t.report(0, math.NaN())
		if err := t.checkpoint(ectx, 0); err != nil {
			return err
		}
		committed = 0
	} else {
		st, err := t.restore(ectx, lastStep)
		if err != nil {
			return fmt.Errorf("grpo: run %s: resume at step %d: %w", cfg.RunID, lastStep, err)
		}
		t.st = st
	}
	for step := committed + 1; step <= int64(steps); step++ {
		if ctx.Err() != nil {
			if committed < step-1 {
				if err := t.checkpoint(ectx, step-1); err != nil {
					return err
				}
			}
			return fmt.Errorf("grpo: run %s: %w after step %d: %w", cfg.RunID, ErrInterrupted, step-1, context.Cause(ctx))
		}
		if err := t.step(ectx, step, steps); err != nil {
			return err
		}
		if step == int64(steps) || (cfg.SaveEvery > 0 && step%int64(cfg.SaveEvery) == 0) {
			if err := t.checkpoint(ectx, step); err != nil {
				return err
			}
			committed = step
		}
	}
	return nil
}

func (t *Trainer) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func (t *Trainer) report(step int64, reward float64) {
	if t.Progress == nil {
		return
	}
	acc := math.NaN()
	if t.st.LastValAcc != nil {
		acc = *t.st.LastValAcc
	}
	t.Progress(Progress{Step: int(step), Steps: t.Config.steps(), Reward: reward, ValAcc: acc})
}

// evaluate validates in every eval workflow and adds evals and samples rows.
// Before training (step 0) with Config.FirstValSize it runs the larger
// first set: its samples rows cover every problem of it and its evals rows
// the first ValSize, as any other validation's (each job's random numbers
// depend on its problem's index, not on the set, so those problems' rows
// are the ones a validation of ValSize problems writes).
func (t *Trainer) evaluate(ctx context.Context, step int64) error {
	cfg := t.Config
	k := max(cfg.ValSamples, 1)
	val := t.val
	if step == 0 && t.valFirst != nil {
		val = t.valFirst
	}
	jobs := make([]workflow.Job, 0, len(val)*k)
	for i, p := range val {
		for g := 0; g < k; g++ {
			jobs = append(jobs, workflow.Job{Problem: p, Index: int64(i), Rollout: g})
		}
	}
	for i, wf := range cfg.evalWorkflows() {
		r := &workflow.Runner{Engine: t.Engine, Task: t.Task, Config: cfg.workflowConfig(wf), Route: t.route}
		// Step 0 in every evaluation's seed key: each validation draws the
		// same random numbers (common random numbers across steps as well
		// as across the cell's runs), so a change in accuracy between two
		// evaluations comes from the policy, not from a new draw.
		eps, err := r.Run(ctx, workflow.Batch{RunSeed: cfg.valSeed(), Purpose: "val", Step: 0}, jobs)
		if err != nil {
			return fmt.Errorf("grpo: run %s: validate %s at step %d: %w", cfg.RunID, wf, step, err)
		}
		rows := EvalRows(cfg.RunID, step, wf, eps[:len(t.val)*k])
		if i == 0 {
			acc := rows[len(rows)-1].Accuracy
			t.st.LastValAcc = &acc
		}
		if err := t.Log.AddEvals(rows...); err != nil {
			return fmt.Errorf("grpo: run %s: step %d: %w", cfg.RunID, step, err)
		}
		if err := t.Log.AddSamples(ValSampleRows(cfg.RunID, step, eps)...); err != nil {
			return fmt.Errorf("grpo: run %s: step %d: %w", cfg.RunID, step, err)
		}
	}
	return nil
}

// step runs training step (1-based) and, when due, validation.
func (t *Trainer) step(ctx context.Context, step int64, steps int) error {
	cfg := t.Config
	t0 := t.now()
	eps, err := t.rollouts(ctx, step)
	if err != nil {
		return err
	}
	t1 := t.now()
	adv, groups := Advantages(eps, cfg.AdvEps)
	stepRows, err := t.train(ctx, step, eps, adv, groups)
	if err != nil {
		return err
	}
	t2 := t.now()
	if err := t.Log.AddSteps(stepRows...); err != nil {
		return fmt.Errorf("grpo: run %s: step %d: %w", cfg.RunID, step, err)
	}
	if cfg.SamplesPerStep > 0 {
		if err := t.Log.AddSamples(trainSampleRows(cfg.RunID, cfg.Seed, step, eps, adv, cfg.SamplesPerStep)...); err != nil {
			return fmt.Errorf("grpo: run %s: step %d: %w", cfg.RunID, step, err)
		}
	}
	if step == int64(steps) || (cfg.EvalEvery > 0 && step%int64(cfg.EvalEvery) == 0) {
		if err := t.evaluate(ctx, step); err != nil {
			return err
		}
	}
	rewards := make([]float64, len(eps))
	for i, ep := range eps {
		rewards[i] = ep.Reward()
	}
	reward, _ := meanStd(rewards)
	t.st.LastReward = &reward
	t3 := t.now()
	if err := t.Log.AddTiming(runlog.TimingRow{RunID: cfg.RunID, Step: step,
		RolloutSec: t1.Sub(t0).Seconds(), TrainSec: t2.Sub(t1).Seconds(), TotalSec: t3.Sub(t0).Seconds()}); err != nil {
		return fmt.Errorf("grpo: run %s: step %d: %w", cfg.RunID, step, err)
	}
	t.st.Step = step
	t.report(step, reward)
	return nil
}

// rollouts samples the step's episodes: Rollouts of the workflow for each
// of the step's ProblemsPerStep train problems, and advances the cursor.
func (t *Trainer) rollouts(ctx context.Context, step int64) ([]*workflow.Episode, error) {
	cfg := t.Config
	var jobs []workflow.Job
	for j := 0; j < cfg.ProblemsPerStep; j++ {
		cursor := (step-1)*int64(cfg.ProblemsPerStep) + int64(j)
		p, err := t.Task.Train(cursor)
		if err != nil {
			return nil, fmt.Errorf("grpo: run %s: step %d: train problem %d of %s: %w", cfg.RunID, step, cursor, t.Task.Name(), err)
		}
		for g := 0; g < cfg.Rollouts; g++ {
			jobs = append(jobs, workflow.Job{Problem: p, Index: cursor, Rollout: g})
		}
	}
	t.st.NextCursor = step * int64(cfg.ProblemsPerStep)
	r := &workflow.Runner{Engine: t.Engine, Task: t.Task, Config: cfg.workflowConfig(cfg.Workflow), Route: t.route}
	eps, err := r.Run(ctx, workflow.Batch{RunSeed: cfg.Seed, Purpose: "train", Step: step}, jobs)
	if err != nil {
		return nil, fmt.Errorf("grpo: run %s: step %d: rollouts: %w", cfg.RunID, step, err)
	}
	return eps, nil
}

// policyTurns groups the trained turns of the episodes by adapter, each
// with its advantage.
func policyTurns(eps []*workflow.Episode, adv [][]float64) map[string][]engine.Turn {
	turns := map[string][]engine.Turn{}
	for i, ep := range eps {
		for k, tr := range ep.Turns {
			if tr.Adapter == "" {
				continue
			}
			turns[tr.Adapter] = append(turns[tr.Adapter], engine.Turn{
				Adapter: tr.Adapter, Role: tr.Role, Agent: tr.Agent,
				PromptIDs: tr.Completion.PromptIDs, CompletionIDs: tr.Completion.IDs,
				OldLogProbs: tr.Completion.LogProbs, Advantage: adv[i][k],
			})
		}
	}
	return turns
}

// train takes one optimizer step per policy of the workflow (in policy
// order) and returns the step rows: one per role routed to the policy and
// its total. Roles routed to the frozen base model are not trained and
// have no rows.
func (t *Trainer) train(ctx context.Context, step int64, eps []*workflow.Episode, adv [][]float64, groups []GroupStats) ([]runlog.StepRow, error) {
	cfg := t.Config
	turns := policyTurns(eps, adv)
	roles, err := workflow.Roles(cfg.Workflow)
	if err != nil {
		return nil, err
	}
	byPolicy := map[string][]string{} // policy -> roles routed to it, sorted
	for _, role := range roles {
		a := t.route(role)
		byPolicy[a] = append(byPolicy[a], role)
	}
	var stepRows []runlog.StepRow
	for _, a := range slices.Sorted(maps.Keys(byPolicy)) {
		if a == "" {
			continue
		}
		opt := cfg.trainOptions(int(step), a, byPolicy[a])
		stats := engine.StepStats{Adapter: a, Total: engine.UndefinedStats("*")}
		if len(turns[a]) > 0 {
			stats, err = t.Engine.TrainStep(ctx, a, turns[a], opt)
			if err != nil {
				return nil, fmt.Errorf("grpo: run %s: step %d: train adapter %s on %d turns: %w", cfg.RunID, step, a, len(turns[a]), err)
			}
		}
		stepRows = append(stepRows, policyRows(cfg.RunID, step, a, byPolicy[a], stats, eps, groups, opt.LR)...)
	}
	return stepRows, nil
}

// policyRows are the step rows of one policy: each of its roles (engine
// statistics, the rewards of the role's turns, the zero-variance fraction
// of its groups) and then its total row (role "*").
func policyRows(runID string, step int64, a string, roles []string, stats engine.StepStats, eps []*workflow.Episode, groups []GroupStats, lr float64) []runlog.StepRow {
	engineRoles := map[string]engine.RoleStats{}
	for _, rs := range stats.Roles {
		engineRoles[rs.Role] = rs
	}
	var rows []runlog.StepRow
	var pg GroupStats
	for _, role := range roles {
		rs, ok := engineRoles[role]
		if !ok {
			rs = engine.UndefinedStats(role)
		}
		var rewards []float64
		for _, ep := range eps {
			for _, tr := range ep.Turns {
				if tr.Role == role && tr.Adapter == a {
					rewards = append(rewards, ep.Reward())
				}
			}
		}
		g := GroupStats{Role: role}
		for _, gs := range groups {
			if gs.Role == role {
				g = gs
			}
		}
		pg.Groups += g.Groups
		pg.ZeroVar += g.ZeroVar
		rows = append(rows, stepRow(runID, step, a, rs, rewards, g.ZeroVarFrac(), lr))
	}
	var policyRewards []float64
	for _, ep := range eps {
		for _, tr := range ep.Turns {
			if tr.Adapter == a {
				policyRewards = append(policyRewards, ep.Reward())
				break
			}
		}
	}
	total := stats.Total
	total.Role = "*"
	return append(rows, stepRow(runID, step, a, total, policyRewards, pg.ZeroVarFrac(), lr))
}
