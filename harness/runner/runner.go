// Package runner executes the runs of an experiment on this machine: a pool
// of concurrent runs (one per core by default, each with its own engine and
// thread count; runs on GPUs one per GPU, each engine pinned to its own
// device, see Place), run folders runs/<experiment>/<run-id>/, skipping of runs
// already done with the same config once their files match their
// manifests, resume of partial runs from their last checkpoint after
// verifying it, redo of selected runs, refusal of run folders written by
// another config (naming the keys that differ), locks that name their
// holder, progress display, graceful interruption, the status of an
// experiment's runs, and an estimate of the files and bytes a run writes.
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

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
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

// Options configure Run.
type Options struct {
	// RunsDir is the root of run folders (DefaultRunsDir when empty); a run
	// lives in RunsDir/<experiment>/<run-id>.
	RunsDir string
	// Jobs is the number of runs executed at once (0: runtime.NumCPU(), or
	// for runs on GPUs as many as the GPUs hold; see Place).
	Jobs int
	// GPUsPerRun gives each run on GPUs this many of them (0 = 1);
	// RunsPerGPU puts this many runs on each GPU (0 = 1). See Placement.
	GPUsPerRun, RunsPerGPU int
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
	// Engines opens the engines runs name (nil is an empty registry). Every
	// engine the selected runs name must be registered there with its
	// prerequisites met, or Run refuses before any run folder exists.
	Engines *engine.Registry
	// Task builds task sources (OpenTask when nil).
	Task func(d spec.DataConfig, opt TaskOptions) (datasets.Task, error)
	// Reporter shows progress (nothing is shown when nil).
	Reporter Reporter
	// Verify compares the SHA-256 of every file of a done run with its
	// manifest before skipping it (sizes are always compared).
	Verify bool
	// Redo discards the selected runs whose id matches this path.Match glob
	// and runs them again from the start.
	Redo string
}

// Outcome is what happened to one run.
type Outcome struct {
	ID       string
	Dir      string
	State    string // StateDone, StateSkipped, StateFailed, StateDamaged, StateHeld, StateInterrupted or StateNotStarted
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

// Failed returns the outcomes of failed and damaged runs.
func (s *Summary) Failed() []Outcome {
	var out []Outcome
	for _, o := range s.Outcomes {
		if o.State == StateFailed || o.State == StateDamaged {
			out = append(out, o)
		}
	}
	return out
}

// Run executes the selected runs of s. It returns an error, before any run
// starts, when the plan cannot be made, an engine the selected runs name is
// not registered or lacks a prerequisite (engine.ErrUnavailable, listing
// every problem), the tree is dirty without AllowDirty, a code task lacks
// isolation, the Redo glob is malformed or matches nothing, the runs folder
// is not a writable folder (ErrRunsDir), or a run folder holds another
// config (ErrConfigMismatch, listing the differing keys of every such
// run). Otherwise every run ends in the summary: a failing run is marked
// failed in its manifest and the others continue; a done run whose files
// do not match its manifest ends damaged (not skipped, not rerun); a run
// another process holds ends held. Runs on GPUs are placed as Place says:
// one run per GPU by default, each engine pinned to its device, and
// opt.Jobs above that is an error (ErrTooManyJobs) before any run starts.
// When ctx is cancelled,
// runs in progress finish their current step, commit it and are marked
// interrupted, and runs not yet begun are not started. The experiment
// folder gets a .gitignore of everything (see IgnoreRuns) before the tree
// is checked, so run folders never make the repository dirty.
func Run(ctx context.Context, s *spec.Spec, opt Options) (*Summary, error) {
	jobs, prov, err := prepare(ctx, s, opt, true)
	if err != nil {
		return nil, err
	}
	runs := make([]spec.Run, len(jobs))
	for i, j := range jobs {
		runs[i] = j.run
	}
	place, err := place(ctx, opt, runs)
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
		if j.damaged != nil {
			sum.Outcomes[i].State, sum.Outcomes[i].Err = StateDamaged, j.damaged
			rep.Finished(j.run.ID, StateDamaged, j.damaged)
			continue
		}
		pending = append(pending, i)
	}
	runPool(ctx, x, jobs, pending, place, sum)
	return sum, nil
}
