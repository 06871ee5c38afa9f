package analysis

import (
	"math"
	"slices"

	"github.com/marlowlab/marlow/harness/study"
)

// The format-collapse comparison of IP with SP: in the workflows where the
// paper puts IP's failures (voting and orch-workers), how many runs of each
// condition had a role whose format compliance fell by capture_format_drop
// or more from the first validation to the last. A role that stops
// following its format is a workflow-level failure that lenient parsing
// hides from accuracy (roles.go).

// CollapseGroup is the comparison over one task's voting and orch-workers
// cells (Task empty: over every task).
type CollapseGroup struct {
	Task   string
	IP, SP Rate    // runs with a collapsed role, of the runs with two or more validations
	P      float64 // one-sided Fisher exact p-value that IP's rate exceeds SP's
}

// FormatCollapsed reports whether a run view has a role (of any kind) whose
// format compliance fell by drop or more from its first validation to its
// last; judged is false without two validations of a role.
func FormatCollapsed(r *RunResult, drop float64) (judged, collapsed bool) {
	first, last := map[string]float64{}, map[string]float64{}
	seen := map[string]int{}
	for _, e := range r.Evals() {
		if e.Role == "*" || math.IsNaN(e.FormatRate) {
			continue
		}
		if seen[e.Role] == 0 {
			first[e.Role] = e.FormatRate
		}
		last[e.Role] = e.FormatRate
		seen[e.Role]++
	}
	for role, n := range seen {
		if n < 2 {
			continue
		}
		judged = true
		if first[role]-last[role] >= drop-1e-12 {
			collapsed = true
		}
	}
	return judged, collapsed
}

// CompareCollapse counts, per task and over all tasks, the IP and SP runs
// of the voting and orch-workers cells of the main matrix with a collapsed
// role (an arm's runs may have one condition only, or another recipe).
func CompareCollapse(st *Study) []CollapseGroup {
	type counts struct{ kIP, nIP, kSP, nSP int }
	by := map[string]*counts{}
	var tasks []string
	all := &counts{}
	for _, r := range st.Runs {
		if (r.Condition != study.IP && r.Condition != study.SP) || !slices.Contains(cliffWorkflows(), r.Cell.Workflow) || r.Cell.Arm != "" {
			continue
		}
		judged, yes := FormatCollapsed(r, st.Params.CaptureFormatDrop)
		if !judged {
			continue
		}
		c := by[r.Cell.Task]
		if c == nil {
			c = &counts{}
			by[r.Cell.Task] = c
			tasks = append(tasks, r.Cell.Task)
		}
		for _, x := range []*counts{c, all} {
			if r.Condition == study.IP {
				x.nIP++
				if yes {
					x.kIP++
				}
			} else {
				x.nSP++
				if yes {
					x.kSP++
				}
			}
		}
	}
	slices.Sort(tasks)
	group := func(task string, c *counts) CollapseGroup {
		return CollapseGroup{Task: task, IP: ClopperPearson(c.kIP, c.nIP, st.Params.CI), SP: ClopperPearson(c.kSP, c.nSP, st.Params.CI),
			P: FisherGreater(c.kIP, c.nIP, c.kSP, c.nSP)}
	}
	var out []CollapseGroup
	for _, t := range tasks {
		out = append(out, group(t, by[t]))
	}
	if len(tasks) > 1 {
		out = append(out, group("", all))
	}
	return out
}
