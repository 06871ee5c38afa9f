// Package runner executes the runs of an experiment on this machine: a pool
// of concurrent runs (one per core by default, each with its own engine and
// thread count), run folders runs/<experiment>/<run-id>/, skipping of runs
// already done with the same config, resume of partial runs from their last
// checkpoint, refusal of run folders written by another config (naming the
// keys that differ), progress display, graceful interruption, and the
// status of an experiment's runs.
//
// A run is one spec.Run: the runner maps its resolved config onto the GRPO
// loop (TrainerConfig), builds its task (OpenTask) and base engine, opens
// its run log with a manifest carrying provenance, and records the outcome
// in the manifest's status: done, failed (with the error) or interrupted.
// sa-rl runs are trained once per cell and validated in every workflow of
// the matrix (their EvalWorkflows); base runs only validate.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/sandbox"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/pin"
	"github.com/marlowlab/marlow/harness/pretrain"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

// Final states of a run in a Summary.
const (
	StateDone        = runlog.StatusDone
	StateFailed      = runlog.StatusFailed
	StateInterrupted = runlog.StatusInterrupted
	StateSkipped     = "skipped"     // already done with the same config
	StateNotStarted  = "not-started" // the pool was interrupted before it began
)

// DefaultRunsDir is the root of run folders.
const DefaultRunsDir = "runs"

// BaseModelFunc returns the folder of the base checkpoint (Hugging Face
// layout) of a run's model, building it when needed.
type BaseModelFunc func(ctx context.Context, m spec.ModelConfig) (string, error)

// Options configure Run.
type Options struct {
	// RunsDir is the root of run folders (DefaultRunsDir when empty); a run
	// lives in RunsDir/<experiment>/<run-id>.
	RunsDir string
	// Jobs is the number of runs executed at once (runtime.NumCPU() when 0).
	Jobs int
	// Threads is each run's engine thread count (1 when 0). Results do not
	// depend on it.
	Threads int
	// Only keeps the runs whose id matches this path.Match glob.
	Only string
	// AllowDirty accepts a dirty work tree (recorded in the manifests).
	AllowDirty bool
	// UnsafeCodeExec lets code tasks run programs without network
	// isolation.
	UnsafeCodeExec bool
	// BaseModel resolves base checkpoints. When nil, a model must name a
	// checkpoint folder; tiny models need a BaseModel (the CLI passes the
	// pretrain package's).
	BaseModel BaseModelFunc
	// Engines opens the engines runs name (engine.Default when nil). Every
	// engine the selected runs name must be registered there with its
	// prerequisites met, or Run refuses before any run folder exists.
	Engines *engine.Registry
	// Task builds task sources (OpenTask when nil).
	Task func(d spec.DataConfig, opt TaskOptions) (datasets.Task, error)
	// Reporter shows progress (nothing is shown when nil).
	Reporter Reporter
}

// Outcome is what happened to one run.
type Outcome struct {
	ID       string
	Dir      string
	State    string // StateDone, StateSkipped, StateFailed, StateInterrupted or StateNotStarted
	LastStep int64  // last committed step (-1 when nothing was committed)
	Err      error
}

// Summary is the result of Run, one outcome per selected run in plan order.
type Summary struct {
	Outcomes []Outcome
}

// Count returns the number of outcomes in state.
func (s *Summary) Count(state string) int {
	n := 0
	for _, o := range s.Outcomes {
		if o.State == state {
			n++
		}
	}
	return n
}

// Failed returns the outcomes of failed runs.
func (s *Summary) Failed() []Outcome {
	var out []Outcome
	for _, o := range s.Outcomes {
		if o.State == StateFailed {
			out = append(out, o)
		}
	}
	return out
}

// ErrConfigMismatch is returned (wrapped) when a run folder holds a run of
// another config.
var ErrConfigMismatch = errors.New("run folder holds another config")

// ErrCodeIsolation is returned (wrapped) when a code task would run
// programs without network isolation and UnsafeCodeExec is not set.
var ErrCodeIsolation = errors.New("code execution without network isolation")

// checkEngines verifies, before anything is written, that every engine the
// runs name is registered and has its prerequisites; the error lists every
// problem of every engine at once.
func checkEngines(ctx context.Context, reg *engine.Registry, runs []spec.Run) error {
	var names []string
	for _, r := range runs {
		names = append(names, r.Config.Model.Engine)
	}
	if err := reg.Check(ctx, names...); err != nil {
		return fmt.Errorf("nothing was run: %w", err)
	}
	return nil
}

// Select returns the planned runs whose id matches the glob only (all when
// only is empty). A malformed glob, or one matching nothing, is an error.
func Select(runs []spec.Run, only string) ([]spec.Run, error) {
	if only == "" {
		return runs, nil
	}
	if _, err := path.Match(only, ""); err != nil {
		return nil, fmt.Errorf("--only %q: %w", only, err)
	}
	var kept []spec.Run
	for _, r := range runs {
		if ok, _ := path.Match(only, r.ID); ok {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		ids := make([]string, 0, len(runs))
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		return nil, fmt.Errorf("--only %q matches none of the %d planned runs (%s)", only, len(runs), strings.Join(ids, ", "))
	}
	return kept, nil
}

// RunDir is the folder of a run.
func RunDir(runsDir, experiment, id string) string {
	if runsDir == "" {
		runsDir = DefaultRunsDir
	}
	return filepath.Join(runsDir, experiment, id)
}

// job is one selected run and what the preflight found.
type job struct {
	run  spec.Run
	dir  string
	skip bool
	last int64 // last committed step in the manifest, -1 when none
}

// Run executes the selected runs of s. It returns an error, before any run
// starts, when the plan cannot be made, an engine the selected runs name is
// not registered or lacks a prerequisite (engine.ErrUnavailable, listing
// every problem), the tree is dirty without AllowDirty, a code task lacks isolation, or a run folder holds another
// config (ErrConfigMismatch, listing the differing keys of every such
// run). Otherwise every run ends in the summary: a failing run is marked
// failed in its manifest and the others continue. When ctx is cancelled,
// runs in progress finish their current step, commit it and are marked
// interrupted, and runs not yet begun are not started.
func Run(ctx context.Context, s *spec.Spec, opt Options) (*Summary, error) {
	planned, err := spec.Plan(s)
	if err != nil {
		return nil, err
	}
	runs, err := Select(planned, opt.Only)
	if err != nil {
		return nil, err
	}
	if opt.Engines == nil {
		opt.Engines = engine.Default
	}
	if err := checkEngines(ctx, opt.Engines, runs); err != nil {
		return nil, err
	}
	prov, err := pin.Resolve(s.File, opt.AllowDirty, nil)
	if err != nil {
		return nil, err
	}
	if err := checkIsolation(runs, opt.UnsafeCodeExec); err != nil {
		return nil, err
	}
	jobs, err := preflight(s, runs, opt.RunsDir)
	if err != nil {
		return nil, err
	}
	rep := opt.Reporter
	if rep == nil {
		rep = nopReporter{}
	}
	if opt.Task == nil {
		opt.Task = OpenTask
	}
	x := &executor{s: s, opt: opt, rep: rep, prov: prov, bases: map[string]*baseModel{}, hashes: map[string]string{}}
	sum := &Summary{Outcomes: make([]Outcome, len(jobs))}
	var pending []int
	for i, j := range jobs {
		sum.Outcomes[i] = Outcome{ID: j.run.ID, Dir: j.dir, State: StateNotStarted, LastStep: j.last}
		if j.skip {
			sum.Outcomes[i].State = StateSkipped
			rep.Note("%s: done with the same config; skipped", j.run.ID)
			continue
		}
		pending = append(pending, i)
	}
	workers := opt.Jobs
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	workers = min(workers, max(len(pending), 1))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ctx.Err() != nil {
					continue // stays not-started
				}
				sum.Outcomes[i] = x.execute(ctx, jobs[i])
			}
		}()
	}
feed:
	for _, i := range pending {
		if ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
			break feed
		case next <- i:
		}
	}
	close(next)
	wg.Wait()
	return sum, nil
}

// checkIsolation refuses code-executing tasks on a machine without network
// isolation, unless unsafe execution is allowed.
func checkIsolation(runs []spec.Run, unsafe bool) error {
	for _, r := range runs {
		if !ExecutesCode(r.Config.Data.Source) || unsafe {
			continue
		}
		iso := sandbox.Probe()
		if !iso.Network {
			return fmt.Errorf("run %s: task %s executes generated code, but this machine gives %s (%s): %w; pass --unsafe-code-exec to run it anyway",
				r.ID, r.Task, iso.Level, iso.Detail, ErrCodeIsolation)
		}
		return nil
	}
	return nil
}

// preflight reads the manifest of every selected run: a run done with the
// same config hash is skipped; one with another hash refuses the whole
// invocation with the differing keys. Unreadable manifests are left to the
// run itself, which fails with runlog's named error.
func preflight(s *spec.Spec, runs []spec.Run, runsDir string) ([]job, error) {
	var jobs []job
	var mismatches []string
	for _, r := range runs {
		dir := RunDir(runsDir, s.Experiment, r.ID)
		j := job{run: r, dir: dir, last: -1}
		m, err := runlog.ReadManifest(dir)
		if err == nil {
			if m.ConfigHash != r.ConfigHash {
				diff, derr := ConfigDiff(m.Config, r.Config)
				if derr != nil {
					diff = []string{derr.Error()}
				}
				mismatches = append(mismatches, mismatchMessage(r.ID, dir, m.ConfigHash, r.ConfigHash, diff))
			} else if m.Status == runlog.StatusDone {
				j.skip = true
			}
			j.last = m.LastStep
		}
		jobs = append(jobs, j)
	}
	if len(mismatches) > 0 {
		return nil, fmt.Errorf("%w; nothing was run. Move or delete those folders, or rename the experiment, to run the new config:\n  %s",
			ErrConfigMismatch, strings.Join(mismatches, "\n  "))
	}
	return jobs, nil
}

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

// baseModel resolves one scale's base checkpoint once.
type baseModel struct {
	once sync.Once
	dir  string
	err  error
}

func (x *executor) baseDir(ctx context.Context, m spec.ModelConfig) (string, error) {
	x.mu.Lock()
	b := x.bases[m.Scale]
	if b == nil {
		b = &baseModel{}
		x.bases[m.Scale] = b
	}
	x.mu.Unlock()
	b.once.Do(func() {
		switch {
		case x.opt.BaseModel != nil:
			b.dir, b.err = x.opt.BaseModel(ctx, m)
		case m.Checkpoint != "":
			b.dir = m.Checkpoint
		default:
			b.err = fmt.Errorf("scale %s is a tiny model without a checkpoint folder, and no pretraining is configured", m.Scale)
		}
		if b.err != nil {
			b.err = fmt.Errorf("base model of scale %s: %w", m.Scale, b.err)
		}
	})
	return b.dir, b.err
}

// hashFile hashes a file or folder once per executor.
func (x *executor) hashFile(p string) (string, error) {
	x.mu.Lock()
	h, ok := x.hashes[p]
	x.mu.Unlock()
	if ok {
		return h, nil
	}
	h, err := pin.HashFile(p)
	if err != nil {
		return "", err
	}
	x.mu.Lock()
	x.hashes[p] = h
	x.mu.Unlock()
	return h, nil
}

// provenance is the spec's provenance plus the hashes of the run's base
// checkpoint and data files, keyed by path relative to the repository.
func (x *executor) provenance(files ...string) (pin.Provenance, error) {
	p := x.prov
	p.Files = map[string]string{}
	for k, v := range x.prov.Files {
		p.Files[k] = v
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		h, err := x.hashFile(f)
		if err != nil {
			return pin.Provenance{}, err
		}
		p.Files[relTo(p.Repo, f)] = h
	}
	return p, nil
}

// relTo names path relative to repo when it lies inside it, else absolute.
func relTo(repo, p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if repo != "" {
		if rel, err := filepath.Rel(repo, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return filepath.ToSlash(rel)
		}
	}
	return abs
}

// execute runs one job to its end and records the outcome. Failures after
// the run log is open (the base model, the engine, the task, the loop) are
// recorded in the manifest as failed.
func (x *executor) execute(ctx context.Context, j job) Outcome {
	r, rc := j.run, j.run.Config
	out := Outcome{ID: r.ID, Dir: j.dir, LastStep: -1}
	fail := func(err error) Outcome {
		out.State, out.Err = StateFailed, err
		x.rep.Finished(r.ID, out.State, err)
		return out
	}
	lock, err := lockRun(j.dir)
	if err != nil {
		return fail(err)
	}
	defer lock.release()
	if err := checkLog(j.dir); err != nil {
		return fail(fmt.Errorf("run %s: %w", r.ID, err))
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
		prov, setupErr = x.provenance(base, rc.Data.Path)
	}
	if setupErr == nil {
		eng, version, setupErr = x.opt.Engines.Open(ctx, rc.Model.Engine, base, engine.Options{Threads: max(x.opt.Threads, 1)})
	}
	if eng != nil {
		defer eng.Close()
	}
	m := runlog.Manifest{
		RunID: r.ID, Experiment: x.s.Experiment, Workflow: r.Workflow,
		EvalWorkflows: append([]string(nil), r.EvalWorkflows...), Task: r.Task, Scale: r.Scale,
		Condition: r.Condition, Seed: r.Seed, MasterSeed: x.s.MasterSeed, SeedIndex: r.SeedIndex,
		ConfigHash: r.ConfigHash, Config: rc, Analysis: AnalysisParams(rc.Analysis),
		Provenance: prov, Engine: rc.Model.Engine, EngineVersion: version,
	}
	if ExecutesCode(rc.Data.Source) {
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
	out.LastStep = last
	x.rep.Started(r.ID, steps, last)
	if setupErr == nil {
		err = x.train(ctx, j, eng, w, last)
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
	if serr := w.SetStatus(status, text); serr != nil && err == nil {
		status, err = runlog.StatusFailed, serr
	}
	out.LastStep = w.Manifest().LastStep
	if cerr := w.Close(); cerr != nil && err == nil {
		status, err = runlog.StatusFailed, cerr
	}
	out.State, out.Err = status, err
	x.rep.Finished(r.ID, out.State, err)
	return out
}

// ErrCorruptLog is returned (wrapped, together with runlog's named error of
// the first problem) when a run to resume has a damaged run log.
var ErrCorruptLog = errors.New("run log is damaged; refusing to resume")

// checkLog verifies the committed log of a run that has one, so that resume
// never builds on damaged segments. A new run has nothing to check.
func checkLog(dir string) error {
	m, err := runlog.ReadManifest(dir)
	if errors.Is(err, runlog.ErrMissingManifest) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorruptLog, err)
	}
	if m.LastStep < 0 {
		return nil
	}
	probs := runlog.Check(dir)
	if len(probs) == 0 {
		return nil
	}
	lines := make([]string, len(probs))
	for i, p := range probs {
		lines[i] = p.String()
	}
	return fmt.Errorf("%w: %w (%d problems; move the folder away to start over):\n    %s",
		ErrCorruptLog, probs[0].Err, len(probs), strings.Join(lines, "\n    "))
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

// PretrainedBase is the BaseModelFunc of the CLI: a model with a checkpoint
// folder uses it, and a tiny model uses the checkpoint pretrain.Ensure finds
// (committed under seeds/models, else in the cache) or builds into the
// cache, with threads goroutines and progress lines on progress (nil:
// silent).
func PretrainedBase(s *spec.Spec, threads int, progress io.Writer) BaseModelFunc {
	return func(ctx context.Context, m spec.ModelConfig) (string, error) {
		if m.Tiny == nil {
			if m.Checkpoint == "" {
				return "", fmt.Errorf("scale %s has neither a checkpoint folder nor a tiny shape", m.Scale)
			}
			return m.Checkpoint, nil
		}
		return pretrain.Ensure(ctx, s, m.Scale, pretrain.Options{Threads: max(threads, 1), Progress: progress})
	}
}
