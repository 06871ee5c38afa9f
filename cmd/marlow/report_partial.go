package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/spec"
)

// incompleteRuns lists the runs of a report's experiment that are not done,
// as "run-id: state (detail)": with a spec argument, every planned run
// whose id matches only, by its status (pending runs have no folder yet);
// with a runs folder or an archive, every run read whose manifest does not
// say done.
func incompleteRuns(arg, runsDir, only string, st *analysis.Study) ([]string, error) {
	var out []string
	if runner.IsSpec(arg) {
		s, err := spec.Load(arg)
		if err != nil {
			return nil, err
		}
		sts, err := runner.Status(s, runsDir, only)
		if err != nil {
			return nil, err
		}
		for _, r := range sts {
			if r.State == runlog.StatusDone {
				continue
			}
			line := r.ID + ": " + r.State
			if r.State == runner.StatePending {
				line += " (missing: no run folder)"
			} else if r.LastStep >= 0 {
				line += fmt.Sprintf(" (step %d of %d)", r.LastStep, r.TotalSteps)
			}
			if r.Error != "" {
				line += ": " + firstLine(r.Error)
			}
			out = append(out, line)
		}
		return out, nil
	}
	seen := map[string]bool{}
	for _, r := range st.Runs {
		if seen[r.RunID] || r.Status == runlog.StatusDone {
			continue
		}
		seen[r.RunID] = true
		out = append(out, r.RunID+": "+r.Status)
	}
	sort.Strings(out)
	return out, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// incompleteRunsOf lists the runs that are not done for the sources of a
// report: those of incompleteRuns for one source; for several, the runs of
// the merged study that are not done and, for each spec among them, its
// planned runs not done in any source, each run once, sorted.
func incompleteRunsOf(args []string, runsDir, only string, st *analysis.Study) ([]string, error) {
	if len(args) == 1 {
		return incompleteRuns(args[0], runsDir, only, st)
	}
	done := map[string]bool{}
	for _, r := range st.Runs {
		if r.Status == runlog.StatusDone {
			done[r.RunID] = true
		}
	}
	byID := map[string]string{}
	add := func(lines []string) {
		for _, l := range lines {
			id, _, _ := strings.Cut(l, ": ")
			if _, ok := byID[id]; !ok && !done[id] {
				byID[id] = l
			}
		}
	}
	for _, a := range args {
		if runner.IsSpec(a) {
			lines, err := incompleteRuns(a, runsDir, only, st)
			if err != nil {
				return nil, err
			}
			add(lines)
		}
	}
	lines, err := incompleteRuns("", runsDir, only, st)
	if err != nil {
		return nil, err
	}
	add(lines)
	out := make([]string, 0, len(byID))
	for _, l := range byID {
		out = append(out, l)
	}
	sort.Strings(out)
	return out, nil
}
