package runner

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/marlowlab/marlow/datasets/sandbox"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

// ErrConfigMismatch is returned (wrapped) when a run folder holds a run of
// another config.
var ErrConfigMismatch = errors.New("run folder holds another config")

// ErrCodeIsolation is returned (wrapped) when a code task would run
// programs without network isolation and UnsafeCodeExec is not set.
var ErrCodeIsolation = errors.New("code execution without network isolation")

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
	run     spec.Run
	dir     string
	skip    bool
	last    int64 // last committed step in the manifest, -1 when none
	redo    bool  // discard the folder and run from the start
	damaged error // the folder does not match its manifest: not run
}

// checkIsolation refuses code-executing tasks on a machine without network
// isolation, unless unsafe execution is allowed.
func checkIsolation(runs []spec.Run, unsafe bool) error {
	for _, r := range runs {
		if !ExecutesCode(r.Config.Data) || unsafe {
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
// same config hash is skipped when its files match the manifest's
// inventory (sizes; SHA-256 with verify) and marked damaged otherwise, as is
// a manifest whose config does not hash to its config_hash; one with
// another hash refuses the whole invocation with the differing keys. Runs
// to redo are not read. Unreadable manifests are left to the run itself,
// which fails with runlog's named error.
func preflight(s *spec.Spec, runs []spec.Run, runsDir string, redo map[string]bool, verify bool) ([]job, error) {
	var jobs []job
	var mismatches, mismatchIDs []string
	for _, r := range runs {
		dir := RunDir(runsDir, s.Experiment, r.ID)
		j := job{run: r, dir: dir, last: -1, redo: redo[r.ID]}
		if j.redo {
			jobs = append(jobs, j)
			continue
		}
		m, err := runlog.ReadManifest(dir)
		if err == nil {
			if derr := damagedManifest(m); derr != nil {
				j.damaged = fmt.Errorf("run %s: %s: %w: %w (rerun it with --redo, or move the folder away)", r.ID, filepath.Join(dir, runlog.ManifestFile), ErrDamaged, derr)
			} else if m.ConfigHash != r.ConfigHash {
				diff, derr := runlog.ConfigDiff(m.Config, r.Config)
				if derr != nil {
					diff = []string{derr.Error()}
				}
				mismatches = append(mismatches, mismatchMessage(r.ID, dir, m.ConfigHash, r.ConfigHash, diff))
				mismatchIDs = append(mismatchIDs, r.ID)
			} else if m.Status == runlog.StatusDone {
				if verr := verifyRun(dir, verify); verr != nil {
					j.damaged = fmt.Errorf("run %s: %w", r.ID, verr)
				} else {
					j.skip = true
				}
			}
			j.last = m.LastStep
		}
		jobs = append(jobs, j)
	}
	if len(mismatches) > 0 {
		return nil, fmt.Errorf("%w; nothing was run. To run the new config, discard the old runs with --redo GLOB (e.g. --redo '%s'), move or delete those folders, or rename the experiment:\n  %s",
			ErrConfigMismatch, mismatchIDs[0], strings.Join(mismatches, "\n  "))
	}
	return jobs, nil
}
