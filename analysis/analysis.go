// Package analysis turns stored run logs into the study's numbers: per-run
// ceiling/floor metrics of the validation curve, per-cell comparisons of
// the conditions with seeded bootstrap confidence intervals, and the
// failure-mode detectors (gradient amplification, gradient-mass dominance,
// role capture), each returning its evidence.
//
// It reads runs only through harness/runlog and never imports training
// code, so every number can be rebuilt from logs alone.
package analysis

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// CondOrder returns a sort rank of a condition: base, sa-rl, sp, ip, then others.
func CondOrder(c string) int {
	switch c {
	case study.Base:
		return 0
	case study.SARL:
		return 1
	case study.SP:
		return 2
	case study.IP:
		return 3
	}
	return 4
}

// CellKey identifies a cell of the matrix.
type CellKey struct {
	Workflow, Task, Scale string
}

func (k CellKey) String() string { return k.Workflow + "/" + k.Task + "/" + k.Scale }

func (k CellKey) less(o CellKey) bool {
	if k.Task != o.Task {
		return k.Task < o.Task
	}
	if k.Workflow != o.Workflow {
		return k.Workflow < o.Workflow
	}
	return ScaleLess(k.Scale, o.Scale)
}

// sizeRank orders the named model sizes of the CPU study and common
// size words; other names rank after them.
var sizeRank = map[string]int{"xxs": 1, "xs": 2, "s": 3, "small": 3, "m": 4, "medium": 4, "l": 5, "large": 5, "xl": 6, "xxl": 7}

// ScaleLess orders scale names by model size: the size words (xs, s, m,
// l, xl, ...), then names that start with a number by that number (e.g.
// 0.6b < 1.7b < 4b), then the rest by name; ties fall back to the name, so
// the order is total and deterministic.
func ScaleLess(a, b string) bool {
	ra, rb := scaleRank(a), scaleRank(b)
	if ra.class != rb.class {
		return ra.class < rb.class
	}
	if ra.v != rb.v {
		return ra.v < rb.v
	}
	return a < b
}

type rank struct {
	class int
	v     float64
}

func scaleRank(s string) rank {
	if r, ok := sizeRank[strings.ToLower(s)]; ok {
		return rank{0, float64(r)}
	}
	n := 0
	for n < len(s) && (s[n] >= '0' && s[n] <= '9' || s[n] == '.') {
		n++
	}
	if v, err := strconv.ParseFloat(s[:n], 64); n > 0 && err == nil {
		return rank{1, v}
	}
	return rank{2, 0}
}

// RunResult is one run seen in one workflow: an sa-rl run gives one result
// per workflow it was evaluated in, every other run one.
type RunResult struct {
	RunID         string
	Cell          CellKey
	TrainWorkflow string // the manifest's Workflow
	Condition     string
	SeedIndex     int
	Status        string
	Curve         []Point
	Metrics       Metrics
	Problems      *ProblemMatrix   // nil when the run has no usable validation samples
	Amplification []Amplification  // per (policy, role); empty for base runs
	Dominance     []Dominance      // policies with two or more roles
	Capture       []Capture        // per non-dominant role of a multi-role policy
	run           *runlog.Run      // source, for figures of training statistics
	steps         []runlog.StepRow // sorted by (step, policy, role)
}

// Steps returns the run's step rows sorted by (step, policy, role).
func (r *RunResult) Steps() []runlog.StepRow { return r.steps }

// Evals returns the run's evals rows for its cell's workflow, split "val",
// sorted by (step, role).
func (r *RunResult) Evals() []runlog.EvalRow {
	var out []runlog.EvalRow
	for _, e := range r.run.Evals {
		if e.Workflow == r.Cell.Workflow && e.Split == "val" {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Step != out[j].Step {
			return out[i].Step < out[j].Step
		}
		return out[i].Role < out[j].Role
	})
	return out
}

// Manifest returns the run's manifest.
func (r *RunResult) Manifest() runlog.Manifest { return r.run.Manifest }

// CondSummary is one condition of a cell over its seeds.
type CondSummary struct {
	Condition string
	RunIDs    []string
	Seeds     int
	// CIMethod says what the bootstrap resampled: "seeds" (more than one
	// seed), "problems" (one seed, validation problems), or "none".
	CIMethod             string
	Base, Ceiling, Final Estimate
	Floor, Drop, AUC     Estimate
	CeilingStep          float64 // mean over seeds
	CliffRuns            int     // runs flagged with a terminal cliff
	GainBaseCeiling      Estimate
	GainBaseFinal        Estimate
	GainSARLCeiling      Estimate
	GainSARLFinal        Estimate
	reps                 [][]float64 // per metric (metricNames order), bootstrap replicates
	values               []float64   // per metric, point estimate
}

// metricNames are the metrics carrying bootstrap intervals, in order.
var metricNames = []string{"base", "ceiling", "final", "floor", "drop", "auc"}

func metricVector(m Metrics) []float64 {
	return []float64{m.Base, m.Ceiling, m.Final, m.Floor, m.Drop, m.AUC}
}

// CellResult is every condition of a cell side by side.
type CellResult struct {
	Key        CellKey
	Conditions []CondSummary // sorted by CondOrder
}

// Cond returns the summary of a condition, or nil.
func (c *CellResult) Cond(name string) *CondSummary {
	for i := range c.Conditions {
		if c.Conditions[i].Condition == name {
			return &c.Conditions[i]
		}
	}
	return nil
}

// Provenance collects where the runs came from.
type Provenance struct {
	Commits     []string // distinct commits, sorted; "+dirty" marks a dirty tree
	MasterSeeds []uint64
	Seeds       []string // "run-id: seed"
	Engines     []string // distinct "engine version"
	Files       [][2]string
	Status      [][2]string // status -> count, sorted by status
	GoVersions  []string
}

// Study is the analysis of one experiment's runs.
type Study struct {
	Experiment string
	Params     Params
	Runs       []*RunResult // sorted by cell, condition, seed, run id
	Cells      []*CellResult
	Provenance Provenance
	Skipped    []string // "run-id: reason" for runs with no validation
}

// Analyze computes the study of a set of runs of one experiment.
func Analyze(runs []*runlog.Run) (*Study, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("analysis: no runs")
	}
	sorted := append([]*runlog.Run(nil), runs...)
	for i, r := range sorted {
		if r == nil {
			return nil, fmt.Errorf("analysis: run %d is nil", i)
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Manifest.RunID < sorted[j].Manifest.RunID })
	st := &Study{}
	if err := checkManifests(st, sorted); err != nil {
		return nil, err
	}
	taken := map[slot]string{}
	for _, r := range sorted {
		if err := st.addRun(r, taken); err != nil {
			return nil, err
		}
	}
	if len(st.Runs) == 0 {
		return nil, fmt.Errorf("analysis: none of the %d runs has validation rows (%s)", len(runs), strings.Join(st.Skipped, "; "))
	}
	sortRunResults(st.Runs)
	st.Cells = buildCells(st.Runs, st.Params)
	st.Provenance = provenance(sorted)
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

// sortedSteps returns the step rows of a run by step, policy and role.
func sortedSteps(r *runlog.Run) []runlog.StepRow {
	steps := append([]runlog.StepRow(nil), r.Steps...)
	sort.SliceStable(steps, func(i, j int) bool {
		a, b := steps[i], steps[j]
		if a.Step != b.Step {
			return a.Step < b.Step
		}
		if a.Policy != b.Policy {
			return a.Policy < b.Policy
		}
		return a.Role < b.Role
	})
	return steps
}

// addRun adds the views of one run: one per workflow it was validated in
// (an SA-RL run's evaluation workflows, else its own), with metrics and
// failure-mode detectors; a workflow without validation rows is skipped.
func (st *Study) addRun(r *runlog.Run, taken map[slot]string) error {
	m := r.Manifest
	wfs := []string{m.Workflow}
	if m.Condition == study.SARL && len(m.EvalWorkflows) > 0 {
		wfs = append([]string(nil), m.EvalWorkflows...)
		sort.Strings(wfs)
	}
	steps := sortedSteps(r)
	for _, wf := range wfs {
		curve, err := Curve(r, wf)
		if err != nil {
			return fmt.Errorf("analysis: %w", err)
		}
		if len(curve) == 0 {
			st.Skipped = append(st.Skipped, fmt.Sprintf("%s: no validation rows for workflow %s", m.RunID, wf))
			continue
		}
		met, err := ComputeMetrics(curve, st.Params)
		if err != nil {
			return fmt.Errorf("analysis: run %s, workflow %s: %w", m.RunID, wf, err)
		}
		cell := CellKey{Workflow: wf, Task: m.Task, Scale: m.Scale}
		sl := slot{cell, m.Condition, m.SeedIndex}
		if other, ok := taken[sl]; ok {
			return fmt.Errorf("analysis: runs %q and %q are both condition %s seed %d of cell %s", other, m.RunID, m.Condition, m.SeedIndex, cell)
		}
		taken[sl] = m.RunID
		stepIdx := make([]int64, len(curve))
		for i, p := range curve {
			stepIdx[i] = p.Step
		}
		rr := &RunResult{
			RunID: m.RunID, Cell: cell, TrainWorkflow: m.Workflow, Condition: m.Condition,
			SeedIndex: m.SeedIndex, Status: m.Status, Curve: curve, Metrics: met,
			Problems: Problems(r, wf, stepIdx), run: r, steps: steps,
		}
		if m.Condition != study.Base && len(steps) > 0 {
			rr.Amplification = DetectAmplification(steps, met.Cliff, st.Params)
			rr.Dominance = DetectDominance(steps)
			for _, d := range rr.Dominance {
				rr.Capture = append(rr.Capture, DetectCapture(r, wf, d, st.Params)...)
			}
		}
		st.Runs = append(st.Runs, rr)
	}
	return nil
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

func buildCells(runs []*RunResult, p Params) []*CellResult {
	var cells []*CellResult
	for i := 0; i < len(runs); {
		j := i
		for j < len(runs) && runs[j].Cell == runs[i].Cell {
			j++
		}
		cell := &CellResult{Key: runs[i].Cell}
		for a := i; a < j; {
			b := a
			for b < j && runs[b].Condition == runs[a].Condition {
				b++
			}
			cell.Conditions = append(cell.Conditions, summarize(runs[a:b], cell.Key, p))
			a = b
		}
		base, sarl := cell.Cond(study.Base), cell.Cond(study.SARL)
		for k := range cell.Conditions {
			c := &cell.Conditions[k]
			if base != nil && c.Condition != study.Base {
				c.GainBaseCeiling = gain(c, base, 1, p)
				c.GainBaseFinal = gain(c, base, 2, p)
			} else {
				c.GainBaseCeiling, c.GainBaseFinal = noCI(math.NaN()), noCI(math.NaN())
			}
			if sarl != nil && c.Condition != study.SARL && c.Condition != study.Base {
				c.GainSARLCeiling = gain(c, sarl, 1, p)
				c.GainSARLFinal = gain(c, sarl, 2, p)
			} else {
				c.GainSARLCeiling, c.GainSARLFinal = noCI(math.NaN()), noCI(math.NaN())
			}
		}
		cells = append(cells, cell)
		i = j
	}
	return cells
}

// gain is metric mi of c minus that of ref, with the interval of the
// difference of their (paired) bootstrap replicates.
func gain(c, ref *CondSummary, mi int, p Params) Estimate {
	e := noCI(c.values[mi] - ref.values[mi])
	if c.reps == nil || ref.reps == nil {
		return e
	}
	d := make([]float64, len(c.reps[mi]))
	for b := range d {
		d[b] = c.reps[mi][b] - ref.reps[mi][b]
	}
	e.Lo, e.Hi = percentileCI(d, p.CI)
	return e
}

// summarize computes a condition's estimates. With several seeds the
// point estimate is the mean over seeds and the bootstrap resamples seeds;
// with one seed it resamples that run's validation problems and recomputes
// every metric from the resampled curve.
func summarize(runs []*RunResult, key CellKey, p Params) CondSummary {
	cs := CondSummary{Condition: runs[0].Condition, Seeds: len(runs)}
	nm := len(metricNames)
	cs.values = make([]float64, nm)
	for _, r := range runs {
		cs.RunIDs = append(cs.RunIDs, r.RunID)
		v := metricVector(r.Metrics)
		for k := range v {
			cs.values[k] += v[k] / float64(len(runs))
		}
		cs.CeilingStep += float64(r.Metrics.CeilingStep) / float64(len(runs))
		if r.Metrics.Cliff.Cliff {
			cs.CliffRuns++
		}
	}
	rng := streamFor(p.BootstrapSeed, key.String())
	switch {
	case len(runs) > 1:
		cs.CIMethod = "seeds"
		cs.reps = make([][]float64, nm)
		vecs := make([][]float64, len(runs))
		for i, r := range runs {
			vecs[i] = metricVector(r.Metrics)
		}
		for b := 0; b < p.Bootstrap; b++ {
			acc := make([]float64, nm)
			for range runs {
				v := vecs[rng.IntN(len(runs))]
				for k := range acc {
					acc[k] += v[k] / float64(len(runs))
				}
			}
			for k := range acc {
				cs.reps[k] = append(cs.reps[k], acc[k])
			}
		}
	case runs[0].Problems != nil && len(runs[0].Problems.Problems) > 1:
		cs.CIMethod = "problems"
		pm := runs[0].Problems
		cs.reps = make([][]float64, nm)
		idx := make([]int, len(pm.Problems))
		var curve []Point
		for b := 0; b < p.Bootstrap; b++ {
			for i := range idx {
				idx[i] = rng.IntN(len(idx))
			}
			curve = pm.resampledCurve(idx, curve)
			m, err := ComputeMetrics(curve, p)
			if err != nil { // cannot happen: steps come from a valid curve
				cs.reps = nil
				break
			}
			for k, v := range metricVector(m) {
				cs.reps[k] = append(cs.reps[k], v)
			}
		}
	default:
		cs.CIMethod = "none"
	}
	est := make([]Estimate, nm)
	for k := range est {
		est[k] = noCI(cs.values[k])
		if cs.reps != nil {
			est[k].Lo, est[k].Hi = percentileCI(cs.reps[k], p.CI)
		}
	}
	if cs.reps == nil {
		cs.CIMethod = "none"
	}
	cs.Base, cs.Ceiling, cs.Final, cs.Floor, cs.Drop, cs.AUC = est[0], est[1], est[2], est[3], est[4], est[5]
	return cs
}

func provenance(runs []*runlog.Run) Provenance {
	var pv Provenance
	commits, engines, gov, status := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]int{}
	masters := map[uint64]bool{}
	files := map[string]string{}
	for _, r := range runs {
		m := r.Manifest
		c := m.Provenance.Commit
		if c == "" {
			c = "(unknown)"
		}
		if m.Provenance.Dirty {
			c += "+dirty"
		}
		commits[c] = true
		engines[strings.TrimSpace(m.Engine+" "+m.EngineVersion)] = true
		if m.Provenance.GoVersion != "" {
			gov[m.Provenance.GoVersion] = true
		}
		status[m.Status]++
		masters[m.MasterSeed] = true
		pv.Seeds = append(pv.Seeds, fmt.Sprintf("%s: %d", m.RunID, m.Seed))
		for f, h := range m.Provenance.Files {
			if old, ok := files[f]; ok && old != h {
				files[f] = old + " / " + h
			} else if !ok {
				files[f] = h
			}
		}
	}
	pv.Commits = slices.Sorted(maps.Keys(commits))
	pv.Engines = slices.Sorted(maps.Keys(engines))
	pv.GoVersions = slices.Sorted(maps.Keys(gov))
	for s := range masters {
		pv.MasterSeeds = append(pv.MasterSeeds, s)
	}
	sort.Slice(pv.MasterSeeds, func(i, j int) bool { return pv.MasterSeeds[i] < pv.MasterSeeds[j] })
	fk := slices.Sorted(maps.Keys(files))
	for _, f := range fk {
		pv.Files = append(pv.Files, [2]string{f, files[f]})
	}
	sk := slices.Sorted(maps.Keys(status))
	for _, s := range sk {
		pv.Status = append(pv.Status, [2]string{s, fmt.Sprint(status[s])})
	}
	return pv
}

// Load reads every run of a runs tree or a .tar.zst archive and analyses them.
func Load(src string) (*Study, error) {
	runs, err := runlog.ReadRuns(src)
	if err != nil {
		return nil, fmt.Errorf("analysis: reading runs from %s: %w", src, err)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("analysis: no runs found in %s", src)
	}
	return Analyze(runs)
}
