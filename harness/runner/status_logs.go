package runner

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/marlowlab/marlow/harness/runlog"
)

// MatchRun reports whether a run id matches the --only glob (path.Match
// syntax; "" matches every run).
func MatchRun(only, id string) (bool, error) {
	if only == "" {
		return true, nil
	}
	ok, err := path.Match(only, id)
	if err != nil {
		return false, fmt.Errorf("--only %q: %w", only, err)
	}
	return ok, nil
}

// StatusOfLogs returns the state of every run found under src (a runs
// tree, an experiment folder, one run folder or a .tar.zst archive) whose
// id matches only, in path order, from their manifests and file sizes
// (see statusOfManifest): there is no plan, so no run is pending or
// stale. No matching run is an error.
func StatusOfLogs(src, only string) ([]RunStatus, error) {
	found, err := runlog.Manifests(src)
	if err != nil {
		return nil, err
	}
	var out []RunStatus
	for _, f := range found {
		id := filepath.Base(f.Dir)
		if f.Err == nil {
			id = f.Manifest.RunID
		}
		ok, err := MatchRun(only, id)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		out = append(out, statusOfManifest(f))
	}
	if len(out) == 0 {
		if only != "" {
			return nil, fmt.Errorf("status %s: no run matches --only %q (%d runs there)", src, only, len(found))
		}
		return nil, fmt.Errorf("status %s: %w", src, runlog.ErrNoRuns)
	}
	return out, nil
}

// statusOfManifest is the state of one run found in the logs, judged as
// Status judges a planned run: a manifest whose config does not hash to its
// config_hash is damaged; one that says running is running while a process
// holds the run, else unrecorded (its lock notes that it ended) or crashed;
// and a run folder no process holds whose files differ in size from its
// manifest's inventory is damaged. A run in an archive keeps the state its
// manifest records (the archive was checked when it was written).
func statusOfManifest(f runlog.FoundRun) RunStatus {
	st := RunStatus{ID: filepath.Base(f.Dir), Dir: f.Dir, LastStep: -1}
	if f.Err != nil {
		st.State, st.Error = StateCorrupt, f.Err.Error()
		return st
	}
	m := f.Manifest
	st.ID, st.Condition, st.State = m.RunID, m.Condition, m.Status
	st.LastStep, st.TotalSteps, st.Updated, st.Error = m.LastStep, m.TotalSteps, m.Updated, m.Error
	if err := damagedManifest(m); err != nil {
		st.State, st.Error = StateDamaged, err.Error()
		return st
	}
	if f.InArchive {
		return st
	}
	if m.Status == runlog.StatusRunning {
		st.State = StateCrashed
		if locked(f.Dir) {
			st.State = StateRunning
		} else if note := unrecordedStatus(f.Dir); note != "" {
			st.State, st.Error = StateUnrecorded, note
		}
	}
	if st.State != StateRunning {
		if probs := runlog.VerifyRun(f.Dir, verifyOptions(false)); len(probs) > 0 {
			st.State = StateDamaged
			st.Error = fmt.Sprintf("%d %s, first %s", len(probs), plural(len(probs), "problem", "problems"), probs[0])
		}
	}
	return st
}

// statusJSON is one run of `marlow status --json`.
type statusJSON struct {
	ID         string `json:"id"`
	Condition  string `json:"condition"`
	Dir        string `json:"dir"`
	State      string `json:"state"`
	LastStep   int64  `json:"last_step"` // -1 when nothing is committed
	TotalSteps int64  `json:"total_steps"`
	Updated    string `json:"updated"`
	Error      string `json:"error"`
	Slurm      string `json:"slurm,omitempty"` // Slurm array task state, when queued
}

// WriteStatusJSON prints statuses as JSON: the runs, then the count of
// runs in each state.
func WriteStatusJSON(w io.Writer, sts []RunStatus) error {
	out := struct {
		Runs   []statusJSON   `json:"runs"`
		Counts map[string]int `json:"counts"`
	}{Runs: []statusJSON{}, Counts: map[string]int{}}
	for _, s := range sts {
		out.Runs = append(out.Runs, statusJSON{s.ID, s.Condition, s.Dir, s.State, s.LastStep, s.TotalSteps, s.Updated, s.Error, s.Slurm})
		out.Counts[s.State]++
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("status: write json: %w", err)
	}
	return nil
}

// Experiment is the state of one experiment folder of a runs root.
type Experiment struct {
	Name    string
	Dir     string
	Runs    int
	Counts  map[string]int // runs per state (done, running, crashed, failed, ...)
	Updated string         // the latest manifest update (RFC 3339), "" when none
}

// Experiments lists the experiment folders of a runs root (every folder
// directly under it that holds a run), in name order, with the count of
// runs in each state read from their manifests. A missing root is an error
// wrapping fs.ErrNotExist.
func Experiments(runsDir string) ([]Experiment, error) {
	if runsDir == "" {
		runsDir = DefaultRunsDir
	}
	ents, err := os.ReadDir(runsDir)
	if err != nil {
		return nil, fmt.Errorf("runs folder: %w", err)
	}
	var out []Experiment
	for _, e := range ents {
		if !e.IsDir() || e.Name()[0] == '.' {
			continue
		}
		dir := filepath.Join(runsDir, e.Name())
		found, err := runlog.Manifests(dir)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			continue
		}
		x := Experiment{Name: e.Name(), Dir: dir, Runs: len(found), Counts: map[string]int{}}
		for _, f := range found {
			st := statusOfManifest(f)
			x.Counts[st.State]++
			if st.Updated > x.Updated {
				x.Updated = st.Updated
			}
		}
		out = append(out, x)
	}
	return out, nil
}

// stateOrder is the order states are listed in.
var stateOrder = []string{StateDone, StateRunning, StateHeld, StateCrashed, StateUnrecorded, runlog.StatusInterrupted,
	runlog.StatusFailed, StateDamaged, StateStale, StateCorrupt, StatePending}

// CountsText renders per-state counts as "done 3, failed 1", known states
// first in a fixed order, then any other in name order.
func CountsText(counts map[string]int) string {
	var keys []string
	seen := map[string]bool{}
	for _, k := range stateOrder {
		if counts[k] > 0 && !seen[k] {
			keys = append(keys, k)
			seen[k] = true
		}
	}
	var rest []string
	for k, n := range counts {
		if n > 0 && !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	keys = append(keys, rest...)
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %d", k, counts[k])
	}
	return s
}
