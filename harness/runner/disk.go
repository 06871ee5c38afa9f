package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

// ErrNoSpace is returned (wrapped) when the runs folder's filesystem has
// less free space than the selected runs are estimated to write.
var ErrNoSpace = errors.New("not enough free disk space")

// freeBytes is the space available to this user on the filesystem holding
// dir (or its nearest existing parent); tests replace it.
var freeBytes = func(dir string) (int64, error) {
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(dir, &st)
		if err == nil {
			return int64(st.Bavail) * int64(st.Bsize), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return 0, err
		}
		dir = parent
	}
}

// checkDisk compares the free space of the runs folder with the footprint
// estimate (EstimateFootprint, which errs on the large side) of the runs
// that are not done yet; a run folder already there counts as written.
func checkDisk(runsDir, experiment string, runs []spec.Run) error {
	if runsDir == "" {
		runsDir = DefaultRunsDir
	}
	var need int64
	n := 0
	for _, r := range runs {
		if m, err := runlog.ReadManifest(RunDir(runsDir, experiment, r.ID)); err == nil && (m.Status == runlog.StatusDone || m.LastStep >= 0) {
			continue // done, or partly written: its bytes are mostly there
		}
		need += EstimateFootprint(r).Bytes()
		n++
	}
	if need == 0 {
		return nil
	}
	free, err := freeBytes(runsDir)
	if err != nil {
		return nil // a filesystem that cannot say is not refused
	}
	if free < need {
		return fmt.Errorf("runs folder %s: %w: %s free, the %d %s to write are estimated at %s (marlow plan lists the estimate per run); "+
			"free some space, choose a runs folder with room (--runs DIR), or run a subset first (--only GLOB)",
			runsDir, ErrNoSpace, HumanBytes(free), n, plural(n, "run", "runs"), HumanBytes(need))
	}
	return nil
}

// PreflightIn is Preflight that also checks the free space of runsDir
// against the estimated footprint of the runs not done there yet.
func PreflightIn(ctx context.Context, s *spec.Spec, only, runsDir string, reg *engine.Registry) error {
	if err := Preflight(ctx, s, only, reg); err != nil {
		return err
	}
	planned, err := spec.Plan(s)
	if err != nil {
		return err
	}
	runs, err := Select(planned, only)
	if err != nil {
		return err
	}
	return checkDisk(runsDir, s.Experiment, runs)
}
