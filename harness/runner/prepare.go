package runner

import (
	"context"

	"github.com/marlowlab/marlow/harness/pin"
	"github.com/marlowlab/marlow/harness/spec"
)

// Prepared is one selected run of an experiment as the preflight found it.
type Prepared struct {
	Run      spec.Run
	Dir      string // the run folder
	Done     bool   // done with the same config: Run would skip it
	LastStep int64  // last committed step in the manifest, -1 when none
	Redo     bool   // selected by opt.Redo: Run would start it over
	Damaged  error  // the folder does not match its manifest: Run would not run it
}

// Prepare resolves what Run would execute, without running anything or
// writing anything, by the same steps as Run: the plan, the --only
// selection, the engine and prerequisite checks, the provenance (refusing a
// dirty tree unless opt.AllowDirty), the code-isolation check, the --redo
// selection and the preflight of every run folder (a folder holding another
// config refuses the whole set with ErrConfigMismatch). Only the check that
// the runs folder is writable is left to the caller, which creates it. A
// batch system submits the runs it returns.
func Prepare(ctx context.Context, s *spec.Spec, opt Options) ([]Prepared, pin.Provenance, error) {
	jobs, prov, err := prepare(ctx, s, opt, false)
	if err != nil {
		return nil, pin.Provenance{}, err
	}
	out := make([]Prepared, len(jobs))
	for i, j := range jobs {
		out[i] = Prepared{Run: j.run, Dir: j.dir, Done: j.skip, LastStep: j.last, Redo: j.redo, Damaged: j.damaged}
	}
	return out, prov, nil
}

// prepare is what Run does before it runs anything; checkDir also makes
// sure the experiment's runs folder exists, is writable and holds its
// .gitignore, before the tree is checked for changes.
func prepare(ctx context.Context, s *spec.Spec, opt Options, checkDir bool) ([]job, pin.Provenance, error) {
	planned, err := spec.Plan(s)
	if err != nil {
		return nil, pin.Provenance{}, err
	}
	runs, err := Select(planned, opt.Only)
	if err != nil {
		return nil, pin.Provenance{}, err
	}
	if err := checkNeeds(ctx, opt.Engines, runs, opt.Task); err != nil {
		return nil, pin.Provenance{}, err
	}
	// the runs folder first: it gets its .gitignore (IgnoreRuns) before
	// the tree is checked for changes
	if checkDir {
		if err := checkRunsDir(opt.RunsDir, s.Experiment); err != nil {
			return nil, pin.Provenance{}, err
		}
		if err := checkDisk(opt.RunsDir, s.Experiment, runs); err != nil {
			return nil, pin.Provenance{}, err
		}
	}
	prov, err := pin.Resolve(s.File, opt.AllowDirty, nil)
	if err != nil {
		return nil, pin.Provenance{}, err
	}
	if err := checkIsolation(runs, opt.UnsafeCodeExec); err != nil {
		return nil, pin.Provenance{}, err
	}
	redo, err := selectRedo(runs, opt.Redo)
	if err != nil {
		return nil, pin.Provenance{}, err
	}
	jobs, err := preflight(s, runs, opt.RunsDir, redo, opt.Verify)
	if err != nil {
		return nil, pin.Provenance{}, err
	}
	return jobs, prov, nil
}
