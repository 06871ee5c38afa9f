package runner

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

// States Status reports besides the manifest's.
const (
	StatePending = "pending" // no run folder yet
	StateStale   = "stale"   // the folder holds another config
	StateCrashed = "crashed" // the manifest says running but no process holds the run
	StateCorrupt = "corrupt" // the manifest cannot be read
	StateRunning = "running" // a process holds the run
	// StateUnrecorded: the manifest says running, no process holds the
	// run, and its lock file notes that the run ended but could not record
	// its status (say, the disk was full).
	StateUnrecorded = "unrecorded"
)

// RunStatus is the state of one planned run.
type RunStatus struct {
	ID         string
	Condition  string
	Dir        string
	State      string // pending, running, done, failed, interrupted, crashed, unrecorded, damaged, stale or corrupt
	LastStep   int64  // last committed step (-1 when none)
	TotalSteps int64  // planned training steps
	Updated    string // manifest's last update (RFC 3339), "" when none
	Error      string // the run's recorded error, or why the folder is stale or corrupt
	// Slurm is the state of the run's Slurm array task (pending, running,
	// requeued, ...) when a caller filled it in; "" when not queued.
	Slurm string
}

// Status returns the state of every selected run of s under runsDir, in
// plan order. It reads manifests, compares the files of every run that no
// process holds with its manifest's inventory by size (damaged when they
// differ), and changes nothing. A runs path that exists but is not a folder is an error.
func Status(s *spec.Spec, runsDir, only string) ([]RunStatus, error) {
	planned, err := spec.Plan(s)
	if err != nil {
		return nil, err
	}
	runs, err := Select(planned, only)
	if err != nil {
		return nil, err
	}
	if err := statRunsDir(runsDir); err != nil {
		return nil, err
	}
	out := make([]RunStatus, 0, len(runs))
	for _, r := range runs {
		dir := RunDir(runsDir, s.Experiment, r.ID)
		st := RunStatus{ID: r.ID, Condition: r.Condition, Dir: dir, LastStep: -1}
		if r.Config.Train {
			st.TotalSteps = int64(r.Config.GRPO.Steps)
		}
		m, err := runlog.ReadManifest(dir)
		switch {
		case errors.Is(err, runlog.ErrMissingManifest):
			st.State = StatePending
		case err != nil:
			st.State, st.Error = StateCorrupt, err.Error()
		case damagedManifest(m) != nil:
			st.State, st.Error = StateDamaged, damagedManifest(m).Error()
			st.LastStep, st.Updated = m.LastStep, m.Updated
		case m.ConfigHash != r.ConfigHash:
			st.State = StateStale
			st.LastStep, st.Updated = m.LastStep, m.Updated
			diff, derr := runlog.ConfigDiff(m.Config, r.Config)
			if derr != nil {
				st.Error = derr.Error()
			} else {
				st.Error = fmt.Sprintf("config differs in %d %s (marlow run --redo discards it)", len(diff), plural(len(diff), "key", "keys"))
				if len(diff) > 0 {
					st.Error += ", first " + diff[0]
				}
			}
		default:
			st.State, st.LastStep, st.Updated, st.Error = m.Status, m.LastStep, m.Updated, m.Error
			if m.Status == runlog.StatusRunning {
				st.State = StateCrashed
				if locked(dir) {
					st.State = StateRunning
				} else if note := unrecordedStatus(dir); note != "" {
					st.State, st.Error = StateUnrecorded, note
				}
			}
			if st.State != StateRunning {
				if probs := runlog.VerifyRun(dir, verifyOptions(false)); len(probs) > 0 {
					st.State = StateDamaged
					st.Error = fmt.Sprintf("%d %s, first %s", len(probs), plural(len(probs), "problem", "problems"), probs[0])
					if k, why := rollBackStep(dir, m, probs); why == "" && m.Status != runlog.StatusDone {
						st.Error += fmt.Sprintf("; resume rolls back to the checkpoint of step %d", k)
					}
				}
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// WriteStatus prints statuses as a table followed by counts per state.
func WriteStatus(w io.Writer, sts []RunStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	withSlurm := slices.ContainsFunc(sts, func(s RunStatus) bool { return s.Slurm != "" })
	if withSlurm {
		fmt.Fprintln(tw, "RUN\tCONDITION\tSTATE\tSLURM\tSTEP\tUPDATED\tNOTE")
	} else {
		fmt.Fprintln(tw, "RUN\tCONDITION\tSTATE\tSTEP\tUPDATED\tNOTE")
	}
	counts := map[string]int{}
	var order []string
	for _, s := range sts {
		step := "-"
		if s.LastStep >= 0 {
			step = fmt.Sprintf("%d/%d", s.LastStep, s.TotalSteps)
		}
		upd := s.Updated
		if upd == "" {
			upd = "-"
		}
		if withSlurm {
			sl := s.Slurm
			if sl == "" {
				sl = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Condition, s.State, sl, step, upd, oneLine(s.Error))
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Condition, s.State, step, upd, oneLine(s.Error))
		}
		if counts[s.State] == 0 {
			order = append(order, s.State)
		}
		counts[s.State]++
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("status: write table: %w", err)
	}
	fmt.Fprintf(w, "\n%d runs:", len(sts))
	for i, st := range order {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(w, "%s %s %d", sep, st, counts[st])
	}
	_, err := fmt.Fprintln(w)
	return err
}

// oneLine shortens an error to its first line, at most 100 characters.
func oneLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			s = s[:i] + " ..."
			break
		}
	}
	if r := []rune(s); len(r) > 100 {
		s = string(r[:97]) + "..."
	}
	return s
}
