// Package analysis turns stored run logs into the study's numbers: per-run
// ceiling/floor metrics of the validation curve, per-cell comparisons of
// the conditions with confidence intervals that rest on the seeds and the
// validation problems (interval.go, with their measured coverage in
// coverage.go), and the
// failure-mode detectors (gradient amplification, gradient-mass dominance,
// role capture), each returning its evidence, and the comparison of the
// study with the paper's four claims (claims.go): per-unit evidence,
// counts and a verdict by a stated rule. Results are data (typed verdicts,
// outcomes, reasons, counts and estimates), never prose: package
// analysis/report states the rules and writes every sentence.
//
// It reads runs only through harness/runlog and never imports training
// code, so every number can be rebuilt from logs alone.
package analysis

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

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

// CellKey identifies a cell of the matrix: a workflow, task and scale,
// in the main matrix (Arm "") or in one of the spec's arms (a named
// variant of the recipe: another rate, an intervention, another n_votes;
// runlog.Manifest.Arm). An arm's runs form cells of their own, so that
// its conditions are compared with each other and never pooled with the
// main matrix's runs of the same workflow, task and scale.
type CellKey struct {
	Workflow, Task, Scale string
	Arm                   string
}

// String is "workflow/task/" and the ScaleLabel.
func (k CellKey) String() string { return k.Workflow + "/" + k.Task + "/" + k.ScaleLabel() }

// ScaleLabel is the scale as reports and diffs show it: followed by
// " [arm]" for an arm's cell.
func (k CellKey) ScaleLabel() string {
	if k.Arm != "" {
		return k.Scale + " [" + k.Arm + "]"
	}
	return k.Scale
}

// Main is the cell of the main matrix with the same workflow, task and
// scale.
func (k CellKey) Main() CellKey {
	k.Arm = ""
	return k
}

func (k CellKey) less(o CellKey) bool {
	if k.Task != o.Task {
		return k.Task < o.Task
	}
	if k.Workflow != o.Workflow {
		return k.Workflow < o.Workflow
	}
	if k.Scale != o.Scale {
		return ScaleLess(k.Scale, o.Scale)
	}
	return k.Arm < o.Arm
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
	Degeneration  []Degeneration   // per role with validation outputs (degenerate.go)
	Workflow      []WorkflowStep   // role-level workflow metrics per validation, by step (roles.go)
	Late          LateEvents       // lasting cliffs and format collapses, early or late (late.go)
	run           *runlog.Run      // source without its samples, for figures of training statistics
	steps         []runlog.StepRow // sorted by (step, policy, role)
	// captureAgainst is the capture test against each role of the
	// workflow as the dominant one (CaptureAgainst).
	captureAgainst map[string][]Capture
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
	// CIMethod says what the intervals rest on (interval.go):
	// MethodSeedsProblems, MethodSeeds, MethodProblems or MethodNone.
	CIMethod string
	// Problems is the number of validation problems per seed that the
	// problem part of the intervals resampled (0 when none were).
	Problems             int
	Base, Ceiling, Final Estimate
	Floor, Drop, AUC     Estimate
	CeilingStep          float64 // mean over seeds
	CliffRuns            int     // runs flagged with a terminal cliff
	// CliffRate is the fraction of seeds with a terminal cliff, its
	// interval by the same rule (the cliff test rerun on resampled
	// problems gives its problem part).
	CliffRate       Estimate
	GainBaseCeiling Estimate
	GainBaseFinal   Estimate
	GainSARLCeiling Estimate
	GainSARLFinal   Estimate
	// StrictFinal and LenientFinal are the final accuracy with every
	// supervisory output required to parse and as the workflow graded it,
	// from the samples (roles.go); over seeds alone.
	StrictFinal, LenientFinal Estimate
	samp                      *sampling // what the intervals rest on
	values                    []float64 // per metric, point estimate
}

// metricNames are the metrics carrying bootstrap intervals, in order.
// "cliff" is the terminal-cliff indicator (1 or 0), whose mean over seeds
// is the cliff rate.
var metricNames = []string{"base", "ceiling", "final", "floor", "drop", "auc", "cliff"}

func metricVector(m Metrics) []float64 {
	cliff := 0.0
	if m.Cliff.Cliff {
		cliff = 1
	}
	return []float64{m.Base, m.Ceiling, m.Final, m.Floor, m.Drop, m.AUC, cliff}
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
	// Controls are the detectors with a shown positive control and the
	// test that shows it (PositiveControls when analysed).
	Controls map[Detector]string
}

// Arms returns the spec arms the study's cells belong to, by name (none
// for a study of the main matrix alone).
func (st *Study) Arms() []string {
	var out []string
	for _, c := range st.Cells {
		if c.Key.Arm != "" && !slices.Contains(out, c.Key.Arm) {
			out = append(out, c.Key.Arm)
		}
	}
	slices.Sort(out)
	return out
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
	return LoadAll(src)
}

// LoadAll reads the runs of several runs trees and .tar.zst archives and
// analyses them as one study (see LoadWith), so results gathered from
// several machines or archived piece by piece give one report.
func LoadAll(srcs ...string) (*Study, error) {
	return LoadWith(context.Background(), LoadOptions{}, srcs...)
}

// LoadOptions say how LoadWith reads.
type LoadOptions struct {
	// Jobs is how many runs are read and reduced at once (0: GOMAXPROCS).
	// The study does not depend on it.
	Jobs int
	// Keep, when set, keeps only the runs whose id it returns true for;
	// the others are not read past their manifests.
	Keep func(runID string) bool
	// Only is how Keep is shown in the error of a selection that keeps
	// no run (e.g. `--only "x*"`).
	Only string
}

// LoadWith reads the runs of several runs trees and .tar.zst archives and
// analyses them as one study, in memory bounded whatever the size of the
// logs (DESIGN.md, "Reading logs at scale"): each run is read once,
// segment by segment, its sample rows reduced as they arrive
// (valSampleKeeper) and its views computed (reduceRun) before its samples
// are dropped; Jobs runs at a time. Runs found in more than one source
// are merged as MergeRuns merges them.
func LoadWith(ctx context.Context, opt LoadOptions, srcs ...string) (*Study, error) {
	if len(srcs) == 0 {
		return nil, fmt.Errorf("analysis: no sources of runs given")
	}
	type found struct {
		src, idx int
		rv       *runViews
	}
	var (
		mu    sync.Mutex
		all   []found
		total int
	)
	sopt := runlog.StreamOptions{Jobs: opt.Jobs, Samples: newValSampleKeeper, SampleSplits: []string{"val"}, SkipPrompts: true, SkipTables: []string{runlog.TableTiming}}
	if opt.Keep != nil {
		sopt.Want = func(m runlog.Manifest) bool { return opt.Keep(m.RunID) }
	}
	for si, src := range srcs {
		n, err := runlog.StreamRuns(ctx, src, sopt, func(sr runlog.StreamedRun) error {
			rv := reduceRun(sr.Run)
			mu.Lock()
			all = append(all, found{si, sr.Index, rv})
			mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, damagedRunsError(src, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("analysis: no runs found in %s", src)
		}
		total += n
	}
	slices.SortFunc(all, func(a, b found) int {
		if a.src != b.src {
			return a.src - b.src
		}
		return a.idx - b.idx
	})
	runs := make([]*runlog.Run, len(all))
	for i, f := range all {
		runs[i] = f.rv.run
	}
	idx, err := distinctCopies(runs)
	if err != nil {
		return nil, err
	}
	kept := make([]*runViews, len(idx))
	for i, k := range idx {
		kept[i] = all[k].rv
	}
	if len(kept) == 0 && opt.Keep != nil {
		return nil, fmt.Errorf("analysis: no run in %s matches --only %q (%d runs there)", strings.Join(srcs, ", "), opt.Only, total)
	}
	return assemble(kept)
}

// MergeRuns reads the runs of several runs trees and .tar.zst archives,
// every row of them held in memory (LoadWith reads them streaming). A
// run (experiment and run id) found in more than one source is kept once
// when its copies hold the same bytes (manifest and committed segments),
// and is an error naming the run and both places when they differ; a
// source without runs is an error.
func MergeRuns(srcs ...string) ([]*runlog.Run, error) {
	if len(srcs) == 0 {
		return nil, fmt.Errorf("analysis: no sources of runs given")
	}
	var runs []*runlog.Run
	for _, src := range srcs {
		rs, err := runlog.ReadRuns(src)
		if err != nil {
			return nil, damagedRunsError(src, err)
		}
		if len(rs) == 0 {
			return nil, fmt.Errorf("analysis: no runs found in %s", src)
		}
		runs = append(runs, rs...)
	}
	idx, err := distinctCopies(runs)
	if err != nil {
		return nil, err
	}
	kept := make([]*runlog.Run, len(idx))
	for i, k := range idx {
		kept[i] = runs[k]
	}
	return kept, nil
}

// distinctCopies returns the indices of the runs to keep, in order: a run
// (experiment and run id) found more than once is kept once when its
// copies hold the same bytes (Digest), and is an error naming the run and
// both places when they differ.
func distinctCopies(runs []*runlog.Run) ([]int, error) {
	var kept []int
	seen := map[[2]string]*runlog.Run{}
	for i, r := range runs {
		key := [2]string{r.Manifest.Experiment, r.Manifest.RunID}
		prev, dup := seen[key]
		switch {
		case !dup:
			seen[key] = r
			kept = append(kept, i)
		case prev.Digest != r.Digest:
			return nil, fmt.Errorf("analysis: run %s of experiment %s is in %s and in %s with different bytes; keep one of them",
				r.Manifest.RunID, r.Manifest.Experiment, prev.Dir, r.Dir)
		}
	}
	return kept, nil
}

// damagedRunsError is the error of a source whose runs could not be read:
// the reader stops at the first damaged file, so the source is checked as
// `marlow check` checks it and every damaged file is listed, not only the
// first (err stays wrapped, for errors.Is).
func damagedRunsError(src string, err error) error {
	probs := runlog.Check(src)
	if len(probs) == 0 {
		return fmt.Errorf("analysis: reading runs from %s: %w", src, err)
	}
	lines := make([]string, len(probs))
	for i, p := range probs {
		lines[i] = "    " + p.String()
	}
	word := "files"
	if len(probs) == 1 {
		word = "file"
	}
	return fmt.Errorf("analysis: reading runs from %s: %w\n%d damaged %s (as marlow check lists them; leave their runs out with --only, or run them again):\n%s",
		src, err, len(probs), word, strings.Join(lines, "\n"))
}

// Routing returns the declared routing the run's config holds (its
// condition is the routing's from), nil for a run of a built-in condition
// and for logs written before routings existed.
func (r *RunResult) Routing() *study.Routing {
	if r.run == nil || r.run.Manifest.Config == nil {
		return nil
	}
	var c struct {
		Routing *study.Routing `json:"routing"`
	}
	if r.run.Manifest.DecodeConfig(&c) != nil {
		return nil
	}
	return c.Routing
}
