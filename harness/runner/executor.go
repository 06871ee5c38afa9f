package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/marlowlab/marlow/datasets/sandbox"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/pin"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

// executor runs jobs; its caches are shared by the pool's goroutines.
type executor struct {
	s    *spec.Spec
	opt  Options
	rep  Reporter
	prov pin.Provenance

	mu     sync.Mutex
	bases  map[string]*baseModel // by scale
	hashes map[string]string     // file hashes by path
}

// execute runs one job to its end, its engine pinned to devs (none: the
// CPU, or every device the process sees), and records the outcome. Failures
// after the run log is open (the base model, the engine, the task, the
// loop) are recorded in the manifest as failed.
func (x *executor) execute(ctx context.Context, j job, devs []engine.Device) Outcome {
	r, rc := j.run, j.run.Config
	out := Outcome{ID: r.ID, Dir: j.dir, LastStep: -1}
	fail := func(err error) Outcome {
		out.State, out.Err = StateFailed, err
		x.rep.Finished(r.ID, out.State, err)
		return out
	}
	lock, err := lockRun(j.dir)
	if errors.Is(err, ErrLocked) {
		out.State, out.Err, out.LastStep = StateHeld, err, j.last
		x.rep.Finished(r.ID, out.State, err)
		return out
	}
	if err != nil {
		return fail(err)
	}
	defer lock.release()
	if o, done := x.recheck(j, lock); done {
		return o
	}
	note, err := checkLog(j.dir)
	if err != nil {
		return fail(fmt.Errorf("run %s: %w", r.ID, err))
	}
	if note != "" {
		x.rep.Note("run %s: %s", r.ID, note)
	}

	// Resolve what the manifest records before opening the log; a failure
	// here is recorded in the log below.
	var (
		eng     engine.Engine
		version string
		prov    = x.prov
	)
	base, setupErr := x.baseDir(ctx, rc.Model)
	if setupErr == nil {
		prov, setupErr = x.provenance(base, rc.Data.Path, rc.Data.TestPath)
	}
	if setupErr == nil {
		eo := engineOptions(rc.Model, x.opt.Threads)
		eo.Devices = devs
		eng, version, setupErr = x.opt.Engines.Open(ctx, rc.Model.Engine, base, eo)
	}
	if eng != nil {
		defer eng.Close()
	}
	m := runlog.Manifest{
		RunID: r.ID, Experiment: x.s.Experiment, Workflow: r.Workflow,
		EvalWorkflows: append([]string(nil), r.EvalWorkflows...), Task: r.Task, Scale: r.Scale,
		Condition: r.Condition, Arm: r.Arm, Seed: r.Seed, MasterSeed: x.s.MasterSeed, SeedIndex: r.SeedIndex,
		ConfigHash: r.ConfigHash, Config: rc, Analysis: AnalysisParams(rc.Analysis),
		Provenance: prov, Engine: rc.Model.Engine, EngineVersion: version, Devices: devicesText(devs),
	}
	if ExecutesCode(rc.Data) {
		m.Sandbox = sandbox.Probe().Level
		if x.opt.UnsafeCodeExec {
			m.Sandbox += " unsafe"
		}
	}
	steps := 0
	if rc.Train {
		steps = rc.GRPO.Steps
		m.TotalSteps = int64(steps)
	}
	w, last, err := runlog.Open(j.dir, m)
	if err != nil {
		return fail(fmt.Errorf("run %s: %w", r.ID, err))
	}
	ckptDir := filepath.Join(j.dir, "ckpt")
	w.TrackCheckpoints(func(step int64) string { return grpo.CheckpointPath(ckptDir, step) })
	out.LastStep = last
	x.rep.Started(r.ID, steps, last)
	if setupErr == nil {
		err = x.train(ctx, j, eng, w, last)
		if errors.Is(err, engine.ErrOutOfMemory) {
			err = fmt.Errorf("%w\n%s", err, oomHint(rc.Model.Scale, w.Manifest().LastStep))
		}
	}
	if setupErr != nil {
		err = fmt.Errorf("run %s: %w", r.ID, setupErr)
	}
	status, text := runlog.StatusDone, ""
	switch {
	case errors.Is(err, grpo.ErrInterrupted), err != nil && setupErr != nil && ctx.Err() != nil:
		// A signal during set-up (say, pretraining the base model) stops
		// the run as surely as one during a step.
		status, text = runlog.StatusInterrupted, err.Error()
	case err != nil:
		status, text = runlog.StatusFailed, err.Error()
	}
	if serr := w.SetStatus(status, text); serr != nil {
		err = unrecorded(lock, status, err, serr)
		status = runlog.StatusFailed
	}
	out.LastStep = w.Manifest().LastStep
	if cerr := w.Close(); cerr != nil && err == nil {
		status, err = runlog.StatusFailed, cerr
	}
	out.State, out.Err = status, err
	x.rep.Finished(r.ID, out.State, err)
	return out
}

// oomHint tells what to do after a run of scale ran out of memory with
// step last committed: the memory budgets are machine settings outside the
// config hash, so lowering one keeps the run folder and resumes it.
func oomHint(scale string, last int64) string {
	from := "from the start (no step was committed)"
	if last >= 0 {
		from = fmt.Sprintf("from its last checkpoint (step %d committed)", last)
	}
	return fmt.Sprintf("lower the budget named above in models.%s of the spec (gen_tokens, train_tokens or kv_cache_fraction: memory settings outside the config hash) and run the same command again: the run resumes %s", scale, from)
}

// ErrCorruptLog is returned (wrapped, together with runlog's named error of
// the first problem) when a run to resume has a damaged run log.
var ErrCorruptLog = errors.New("run log is damaged; refusing to resume")

// checkLog verifies the committed log of a run that has one, so that resume
// never builds on damaged segments. A new run has nothing to check. When
// the damage is only in committed segments (or the files of the latest
// checkpoint) and a kept checkpoint precedes all of it, the log is rolled
// back to that checkpoint (rollBack) and note says so; otherwise the run is
// refused with every problem listed.
func checkLog(dir string) (note string, err error) {
	m, err := runlog.ReadManifest(dir)
	if errors.Is(err, runlog.ErrMissingManifest) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCorruptLog, err)
	}
	if m.LastStep < 0 {
		return "", nil
	}
	probs := runlog.CheckWith(dir, runlog.CheckOptions{ConfigHash: spec.StoredConfigHash})
	if len(probs) == 0 {
		return "", nil
	}
	lines := make([]string, len(probs))
	for i, p := range probs {
		lines[i] = p.String()
	}
	listed := strings.Join(lines, "\n    ")
	k, why := rollBackStep(dir, m, probs)
	if why == "" {
		ckptDir := filepath.Join(dir, "ckpt")
		if err := runlog.RollBack(dir, k, func(step int64) string { return grpo.CheckpointPath(ckptDir, step) }); err != nil {
			why = err.Error()
		} else if again := runlog.CheckWith(dir, runlog.CheckOptions{ConfigHash: spec.StoredConfigHash}); len(again) > 0 {
			why = fmt.Sprintf("after rolling back to step %d the log still has %d %s, the first %v", k, len(again), plural(len(again), "problem", "problems"), again[0])
		} else {
			return fmt.Sprintf("%d damaged %s:\n    %s\nrolled back to the checkpoint of step %d, the newest kept one before the damage; steps %d to %d run again",
				len(probs), plural(len(probs), "file", "files"), listed, k, k+1, m.LastStep), nil
		}
	}
	return "", fmt.Errorf("%w: %w (%d %s; %s; rerun it with --redo, or move the folder away, to start over):\n    %s",
		ErrCorruptLog, probs[0].Err, len(probs), plural(len(probs), "problem", "problems"), why, listed)
}

// rollBackStep is the checkpoint step a damaged run log can be rolled
// back to: the newest kept checkpoint before the earliest damaged step,
// where every problem is a committed segment of the tables (damaged at its
// commit step) or a file of the checkpoint of the last committed step
// (damaged at that step). why says why there is none ("" when there is).
func rollBackStep(dir string, m runlog.Manifest, probs []runlog.Problem) (step int64, why string) {
	first := m.LastStep
	for _, p := range probs {
		rel, err := filepath.Rel(dir, p.Path)
		if err != nil {
			return 0, fmt.Sprintf("no roll-back: %s is outside the run folder", p.Path)
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		latest := filepath.Base(grpo.CheckpointPath("", m.LastStep))
		switch {
		case len(parts) == 2 && slices.Contains(runlog.Tables, parts[0]):
			s, ok := runlog.SegmentStep(parts[1])
			if !ok || s > m.LastStep {
				return 0, fmt.Sprintf("no roll-back: %s is not a committed segment", rel)
			}
			first = min(first, s)
		case len(parts) >= 3 && parts[0] == "ckpt" && parts[1] == latest:
			// the latest checkpoint: roll back before it
		default:
			return 0, fmt.Sprintf("no roll-back: %s is neither a committed segment nor a file of the latest checkpoint", rel)
		}
	}
	steps, err := grpo.CheckpointSteps(filepath.Join(dir, "ckpt"))
	if err != nil {
		return 0, "no roll-back: " + err.Error()
	}
	best := int64(-1)
	for _, s := range steps {
		if s < first && s > best {
			best = s
		}
	}
	if best < 0 {
		return 0, fmt.Sprintf("no roll-back: no kept checkpoint precedes the damage at step %d (kept: %v)", first, steps)
	}
	return best, ""
}

// train builds the task and runs the GRPO loop from step last.
func (x *executor) train(ctx context.Context, j job, eng engine.Engine, w *runlog.Writer, last int64) error {
	rc := j.run.Config
	task, err := x.opt.Task(rc.Data, TaskOptions{UnsafeCodeExec: x.opt.UnsafeCodeExec})
	if err != nil {
		return fmt.Errorf("run %s: %w", j.run.ID, err)
	}
	tr := &grpo.Trainer{
		Config: TrainerConfig(rc), Engine: eng, Task: task, Log: w, CkptDir: filepath.Join(j.dir, "ckpt"),
		Progress: func(p grpo.Progress) { x.rep.Step(j.run.ID, p) },
	}
	return tr.Run(ctx, last)
}

// nopReporter shows nothing.
type nopReporter struct{}

func (nopReporter) Started(string, int, int64)     {}
func (nopReporter) Step(string, grpo.Progress)     {}
func (nopReporter) Finished(string, string, error) {}
func (nopReporter) Note(string, ...any)            {}
func (nopReporter) Close()                         {}
