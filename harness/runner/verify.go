package runner

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

// More final states of a run in a Summary.
const (
	// StateDamaged: a done run whose files or manifest no longer match its
	// manifest; it is not skipped, not rerun, and counts as a failure.
	// `marlow run --redo ID` discards and reruns it.
	StateDamaged = "damaged"
	// StateHeld: another process holds the run's lock; the run is left to
	// it. Not a failure.
	StateHeld = "held"
)

// ErrDamaged is returned (wrapped, with runlog's named error of the first
// problem) for a run whose files do not match its manifest.
var ErrDamaged = errors.New("run folder is damaged")

// ErrRunsDir is returned (wrapped) when the runs folder is not a writable
// folder; nothing is run.
var ErrRunsDir = errors.New("runs folder is not a writable folder")

// verifyOptions are the checks of a run folder: its config against its
// hash, and its files against the manifest's inventory (sizes, and SHA-256
// when hashes is set).
func verifyOptions(hashes bool) runlog.VerifyOptions {
	return runlog.VerifyOptions{Hashes: hashes, ConfigHash: spec.StoredConfigHash}
}

// verifyRun checks a run folder and returns nil or an error listing every
// problem, wrapping ErrDamaged and the first problem's named error.
func verifyRun(dir string, hashes bool) error {
	return problemsError(ErrDamaged, "rerun it with --redo, or move the folder away", runlog.VerifyRun(dir, verifyOptions(hashes)))
}

// problemsError lists problems under kind, or returns nil when there are
// none.
func problemsError(kind error, advice string, probs []runlog.Problem) error {
	if len(probs) == 0 {
		return nil
	}
	lines := make([]string, len(probs))
	for i, p := range probs {
		lines[i] = p.String()
	}
	return fmt.Errorf("%w: %w (%d %s; %s):\n    %s", kind, probs[0].Err, len(probs), plural(len(probs), "problem", "problems"), advice, strings.Join(lines, "\n    "))
}

// damagedManifest reports whether a manifest's stored config does not hash
// to its own config_hash, with the error that says so.
func damagedManifest(m runlog.Manifest) error {
	got, err := spec.StoredConfigHash(m.Config)
	if err != nil {
		return fmt.Errorf("%w: its config cannot be hashed: %w", runlog.ErrDamagedManifest, err)
	}
	if got != m.ConfigHash {
		return fmt.Errorf("%w: its config hashes to %.12s, but its config_hash says %.12s", runlog.ErrDamagedManifest, got, m.ConfigHash)
	}
	return nil
}

// checkRunsDir makes sure the experiment's folder under runsDir exists, is
// a writable folder and holds marlow's .gitignore (IgnoreRuns), before any
// run starts.
func checkRunsDir(runsDir, experiment string) error {
	if runsDir == "" {
		runsDir = DefaultRunsDir
	}
	dir := filepath.Join(runsDir, experiment)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: %w; nothing was run", ErrRunsDir, err)
	}
	if err := IgnoreRuns(runsDir, experiment); err != nil {
		return fmt.Errorf("%w: %w; nothing was run", ErrRunsDir, err)
	}
	f, err := os.CreateTemp(dir, ".marlow-write-test-")
	if err != nil {
		return fmt.Errorf("%w: %w; nothing was run", ErrRunsDir, err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("%w: %w; nothing was run", ErrRunsDir, err)
	}
	return nil
}

// selectRedo returns the ids of the selected runs matching the --redo glob
// (none when it is empty); a malformed glob or one matching none of the
// selected runs is an error.
func selectRedo(runs []spec.Run, glob string) (map[string]bool, error) {
	if glob == "" {
		return nil, nil
	}
	if _, err := path.Match(glob, ""); err != nil {
		return nil, fmt.Errorf("--redo %q: %w", glob, err)
	}
	out := map[string]bool{}
	for _, r := range runs {
		if ok, _ := path.Match(glob, r.ID); ok {
			out[r.ID] = true
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--redo %q matches none of the %d selected runs", glob, len(runs))
	}
	return out, nil
}

// discard removes a run folder to be redone (its lock is held).
func discard(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("discard %s for --redo: %w", dir, err)
	}
	return nil
}

// recheck runs once the run's lock is held: a run to redo is discarded;
// a run that another process finished since the preflight (it held the
// lock then) is verified and skipped, not reopened. done reports that the
// outcome is final.
func (x *executor) recheck(j job, lock *runLock) (Outcome, bool) {
	out := Outcome{ID: j.run.ID, Dir: j.dir, LastStep: j.last}
	if j.redo {
		if err := discard(j.dir); err != nil {
			out.State, out.Err = StateFailed, fmt.Errorf("run %s: %w", j.run.ID, err)
			x.rep.Finished(j.run.ID, out.State, out.Err)
			return out, true
		}
		x.rep.Note("%s: discarded for --redo", j.run.ID)
		return out, false
	}
	m, err := runlog.ReadManifest(j.dir)
	if err != nil || m.Status != runlog.StatusDone || m.ConfigHash != j.run.ConfigHash {
		return out, false
	}
	out.LastStep = m.LastStep
	if err := verifyRun(j.dir, x.opt.Verify); err != nil {
		out.State, out.Err = StateDamaged, fmt.Errorf("run %s: %w", j.run.ID, err)
		x.rep.Finished(j.run.ID, out.State, out.Err)
		return out, true
	}
	out.State = StateSkipped
	x.rep.Note("%s: finished by another process meanwhile; skipped", j.run.ID)
	return out, true
}

// unrecorded is the error of a run whose final status could not be written
// to its manifest (say, the disk is full): the run's own error, if any, and
// the write's. The lock file, which status reads, gets a note of it when it
// can be written.
func unrecorded(lock *runLock, status string, runErr, writeErr error) error {
	err := fmt.Errorf("could not record status %s in the manifest: %w", status, writeErr)
	if runErr != nil {
		err = fmt.Errorf("%w; and it %w", runErr, err)
	}
	lock.note(fmt.Sprintf("%s %s: %v", unrecordedNote, status, err))
	return err
}

// statRunsDir refuses a runs path that exists but is not a folder (a
// missing one simply has no runs yet).
func statRunsDir(runsDir string) error {
	if runsDir == "" {
		runsDir = DefaultRunsDir
	}
	st, err := os.Stat(runsDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("runs folder %s: %w", runsDir, err)
	case !st.IsDir():
		return fmt.Errorf("runs folder %s: not a folder", runsDir)
	}
	return nil
}
