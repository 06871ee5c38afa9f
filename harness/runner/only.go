package runner

import (
	"fmt"
	"path"
	"strings"

	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
)

// OnlyWarnings warns when --only keeps SP or IP runs of a cell but not the
// cell's SA-RL run, whose id has no workflow prefix ("sa-rl-<scale>-
// <task>-seed<N>"), so that a glob such as 'voting-*' leaves it out. --only
// keeps exactly the runs it matches in every command (status, check and
// report read the same set, and `marlow slurm` runs one `--only <run-id>`
// per task), so the runs are not added; the warning names them and the
// globs that keep them, since the report compares SP and IP with SA-RL
// only where SA-RL ran. It returns nil when only is "", names one run
// exactly (no wildcard: a deliberate choice, and what each `marlow slurm`
// task runs) or matches nothing.
func OnlyWarnings(planned []spec.Run, only string) []string {
	if !strings.ContainsAny(only, "*?[") {
		return nil
	}
	kept := map[string]bool{}
	for _, r := range planned {
		if ok, _ := path.Match(only, r.ID); ok {
			kept[r.ID] = true
		}
	}
	var missing []string
	seen := map[string]bool{}
	for _, r := range planned {
		if !kept[r.ID] || (r.Condition != study.SP && r.Condition != study.IP) {
			continue
		}
		sa := spec.RunID(r.Workflow, study.SARL, r.Task, r.Scale, r.Arm, r.SeedIndex)
		if kept[sa] || seen[sa] || !planHas(planned, sa) {
			continue
		}
		seen[sa] = true
		missing = append(missing, sa)
	}
	if len(missing) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("--only %q keeps SP or IP runs without the SA-RL %s of their %s (%s), so the report cannot compare them with SA-RL; "+
		"run %s too (--only 'sa-rl-*', or a glob such as '*-%s' that matches the SA-RL run and the cell's)",
		only, plural(len(missing), "run", "runs"), plural(len(missing), "cell", "cells"), strings.Join(missing, ", "),
		plural(len(missing), "it", "them"), strings.TrimPrefix(missing[0], "sa-rl-"))}
}

// planHas reports whether a run id is planned.
func planHas(planned []spec.Run, id string) bool {
	for _, r := range planned {
		if r.ID == id {
			return true
		}
	}
	return false
}

// plural picks the singular or plural word for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
