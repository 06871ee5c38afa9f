package analysis

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// Analyze computes the study of a set of runs of one experiment, held in
// memory (LoadWith reads them from their sources in bounded memory).
func Analyze(runs []*runlog.Run) (*Study, error) {
	reduced := make([]*runViews, len(runs))
	for i, r := range runs {
		if r == nil {
			return nil, fmt.Errorf("analysis: run %d is nil", i)
		}
		reduced[i] = reduceRun(r)
	}
	return assemble(reduced)
}

// runViews is what the analysis keeps of one run once it has been read:
// the run without its samples, and its views (or the notes of the
// workflows skipped), in order, and the error that ended them. Every
// sample-based number of a view is computed from the samples first, so
// the study never holds more than the runs being reduced.
type runViews struct {
	run   *runlog.Run
	items []viewItem
	err   error
}

// viewItem is a view of a run, or the note of a workflow skipped.
type viewItem struct {
	view    *RunResult
	skipped string
}

// reduceRun computes the views of one run with the analysis parameters of
// its own manifest (assemble checks that every run has the same) and
// drops its samples. An error is kept, to be reported in the order
// Analyze has always reported errors: after the study-wide checks.
func reduceRun(r *runlog.Run) *runViews {
	rv := &runViews{}
	// A workflow the run's config declares is registered before its views
	// are computed, which read the workflow's roles and structure.
	if err := registerDeclared([]*runlog.Run{r}); err != nil {
		rv.err = err
	} else if p, err := ParamsFromMap(r.Manifest.Analysis); err == nil {
		rv.items, rv.err = viewsOf(r, p)
	}
	lean := *r
	lean.Samples = nil
	rv.run = &lean
	for _, it := range rv.items {
		if it.view != nil {
			it.view.run = rv.run
		}
	}
	return rv
}

// assemble checks the runs' manifests and settings and builds the study
// from their views.
func assemble(reduced []*runViews) (*Study, error) {
	if len(reduced) == 0 {
		return nil, fmt.Errorf("analysis: no runs")
	}
	sorted := append([]*runViews(nil), reduced...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].run.Manifest.RunID < sorted[j].run.Manifest.RunID })
	runs := make([]*runlog.Run, len(sorted))
	for i, rv := range sorted {
		runs[i] = rv.run
	}
	st := &Study{Controls: defaultControls()}
	if err := checkManifests(st, runs); err != nil {
		return nil, err
	}
	if err := checkSettings(runs); err != nil {
		return nil, err
	}
	taken := map[slot]string{}
	for _, rv := range sorted {
		m := rv.run.Manifest
		for _, it := range rv.items {
			if it.view == nil {
				st.Skipped = append(st.Skipped, it.skipped)
				continue
			}
			rr := it.view
			sl := slot{rr.Cell, m.Condition, m.SeedIndex}
			if other, ok := taken[sl]; ok {
				return nil, fmt.Errorf("analysis: runs %q and %q are both condition %s seed %d of cell %s", other, m.RunID, m.Condition, m.SeedIndex, rr.Cell)
			}
			taken[sl] = m.RunID
			st.Runs = append(st.Runs, rr)
		}
		if rv.err != nil {
			return nil, rv.err
		}
	}
	if len(st.Runs) == 0 {
		return nil, fmt.Errorf("analysis: none of the %d runs has validation rows (%s)", len(reduced), strings.Join(st.Skipped, "; "))
	}
	sortRunResults(st.Runs)
	st.Cells = buildCells(st.Runs, st.Params)
	st.Provenance = provenance(runs)
	return st, nil
}

// checkManifests checks that the runs (sorted by id) have distinct ids, the
// identifying fields, one experiment and one set of analysis parameters,
// and sets the study's experiment and parameters.
func checkManifests(st *Study, sorted []*runlog.Run) error {
	var paramsFrom string
	seen := map[string]bool{}
	for _, r := range sorted {
		m := r.Manifest
		where := fmt.Sprintf("run %q (%s)", m.RunID, r.Dir)
		if m.RunID == "" {
			return fmt.Errorf("analysis: run in %s: manifest has no run_id", r.Dir)
		}
		if seen[m.RunID] {
			return fmt.Errorf("analysis: %s: run id appears twice", where)
		}
		seen[m.RunID] = true
		for _, f := range []struct{ name, v string }{{"workflow", m.Workflow}, {"task", m.Task}, {"scale", m.Scale}, {"condition", m.Condition}} {
			if f.v == "" {
				return fmt.Errorf("analysis: %s: manifest field %s is empty", where, f.name)
			}
		}
		if st.Experiment == "" {
			st.Experiment = m.Experiment
		} else if m.Experiment != st.Experiment {
			return fmt.Errorf("analysis: %s belongs to experiment %q, others to %q", where, m.Experiment, st.Experiment)
		}
		p, err := ParamsFromMap(m.Analysis)
		if err != nil {
			return fmt.Errorf("analysis: %s: %w", where, err)
		}
		if paramsFrom == "" {
			st.Params, paramsFrom = p, m.RunID
		} else if !reflect.DeepEqual(p, st.Params) {
			return fmt.Errorf("analysis: %s has analysis parameters %+v, run %q has %+v", where, p, paramsFrom, st.Params)
		}
	}
	return nil
}

// slot is the place of a run view in the matrix; two runs may not share
// one.
type slot struct {
	cell      CellKey
	cond      string
	seedIndex int
}

// sortedSteps returns the step rows of a run by step, policy and role:
// the run's own rows when they are in that order (as the readers return
// them), else a sorted copy.
func sortedSteps(r *runlog.Run) []runlog.StepRow {
	cmpRows := func(a, b runlog.StepRow) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Role, b.Role))
	}
	if slices.IsSortedFunc(r.Steps, cmpRows) {
		return r.Steps
	}
	steps := slices.Clone(r.Steps)
	slices.SortStableFunc(steps, cmpRows)
	return steps
}

// viewsOf computes the views of one run: one per workflow it was
// validated in (an SA-RL run's evaluation workflows, else its own), with
// metrics and failure-mode detectors; a workflow without validation rows
// is a note of its skipping.
func viewsOf(r *runlog.Run, p Params) ([]viewItem, error) {
	m := r.Manifest
	wfs := []string{m.Workflow}
	if m.Condition == study.SARL && len(m.EvalWorkflows) > 0 {
		wfs = append([]string(nil), m.EvalWorkflows...)
		sort.Strings(wfs)
	}
	steps := sortedSteps(r)
	var out []viewItem
	for _, wf := range wfs {
		curve, err := Curve(r, wf)
		if err != nil {
			return out, fmt.Errorf("analysis: %w", err)
		}
		if len(curve) == 0 {
			out = append(out, viewItem{skipped: fmt.Sprintf("%s: no validation rows for workflow %s", m.RunID, wf)})
			continue
		}
		met, err := ComputeMetrics(curve, p)
		if err != nil {
			return out, fmt.Errorf("analysis: run %s, workflow %s: %w", m.RunID, wf, err)
		}
		cell := CellKey{Workflow: wf, Task: m.Task, Scale: m.Scale, Arm: m.Arm}
		stepIdx := make([]int64, len(curve))
		for i, pt := range curve {
			stepIdx[i] = pt.Step
		}
		rr := &RunResult{
			RunID: m.RunID, Cell: cell, TrainWorkflow: m.Workflow, Condition: m.Condition,
			SeedIndex: m.SeedIndex, Status: m.Status, Curve: curve, Metrics: met,
			Problems: Problems(r, wf, stepIdx), run: r, steps: steps,
			Workflow: WorkflowSteps(r, wf),
		}
		rr.Late = DetectLateEvents(curve, rr.Evals(), steps, p)
		rr.Late.StrictCliffOf(curve, rr.Workflow, p)
		rr.Degeneration = DetectDegeneration(r, wf)
		if m.Condition != study.Base && len(steps) > 0 {
			rr.Amplification = DetectAmplification(steps, met.Cliff, p)
			rr.Dominance = DetectDominance(steps)
			for _, d := range rr.Dominance {
				rr.Capture = append(rr.Capture, DetectCapture(r, wf, d, p)...)
			}
		}
		roles := study.WorkflowOf(wf).Roles()
		rr.captureAgainst = make(map[string][]Capture, len(roles))
		for _, role := range roles {
			rr.captureAgainst[role] = DetectCapture(r, wf, Dominance{Roles: roles, DominantRole: role}, p)
		}
		out = append(out, viewItem{view: rr})
	}
	return out, nil
}

// sortRunResults orders run views by cell, condition, seed and run id.
func sortRunResults(runs []*RunResult) {
	sort.SliceStable(runs, func(i, j int) bool {
		a, b := runs[i], runs[j]
		if a.Cell != b.Cell {
			return a.Cell.less(b.Cell)
		}
		if CondOrder(a.Condition) != CondOrder(b.Condition) {
			return CondOrder(a.Condition) < CondOrder(b.Condition)
		}
		if a.Condition != b.Condition {
			return a.Condition < b.Condition
		}
		if a.SeedIndex != b.SeedIndex {
			return a.SeedIndex < b.SeedIndex
		}
		return a.RunID < b.RunID
	})
}
