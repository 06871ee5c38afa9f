package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/marlowlab/marlow/analysis"
)

// LoadSummaryDir reads the summary of a folder: dir/summary.parquet when
// it is a report folder, otherwise the runs under dir (a runs tree or a
// .tar.zst archive) are analysed.
func LoadSummaryDir(dir string) ([]SummaryRow, error) {
	p := filepath.Join(dir, "summary.parquet")
	data, err := os.ReadFile(p)
	if err == nil {
		return DecodeSummary(p, data)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	st, err := analysis.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is neither a report folder (no summary.parquet) nor readable runs: %w", dir, err)
	}
	return SummaryRows(st), nil
}

// LoadSummaryAt reads reports/<experiment>/summary.parquet as committed at
// revision rev of the git repository at or above repoPath, without a
// checkout (bare repositories work). An empty experiment is inferred when
// the revision holds exactly one report. It returns the experiment used.
func LoadSummaryAt(repoPath, rev, experiment string) ([]SummaryRow, string, error) {
	repo, err := git.PlainOpen(repoPath) // a work tree root or a bare repository
	if err != nil {
		repo, err = git.PlainOpenWithOptions(repoPath, &git.PlainOpenOptions{DetectDotGit: true})
	}
	if err != nil {
		return nil, "", fmt.Errorf("opening git repository at %s: %w", repoPath, err)
	}
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, "", fmt.Errorf("revision %q: %w", rev, err)
	}
	commit, err := repo.CommitObject(*h)
	if err != nil {
		return nil, "", fmt.Errorf("revision %q (%s): %w", rev, h, err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, "", fmt.Errorf("revision %q: reading tree: %w", rev, err)
	}
	if experiment == "" {
		names, err := reportsIn(tree)
		if err != nil {
			return nil, "", fmt.Errorf("revision %q: %w", rev, err)
		}
		switch len(names) {
		case 0:
			return nil, "", fmt.Errorf("revision %q (%s) has no reports/*/summary.parquet", rev, h.String()[:12])
		case 1:
			experiment = names[0]
		default:
			return nil, "", fmt.Errorf("revision %q has reports for several experiments (%s): choose one with --experiment", rev, strings.Join(names, ", "))
		}
	}
	p := path.Join("reports", experiment, "summary.parquet")
	f, err := tree.File(p)
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, "", fmt.Errorf("experiment %q has no report at revision %q (%s): %s not found", experiment, rev, h.String()[:12], p)
	}
	if err != nil {
		return nil, "", fmt.Errorf("revision %q: %s: %w", rev, p, err)
	}
	rd, err := f.Reader()
	if err != nil {
		return nil, "", fmt.Errorf("revision %q: opening %s: %w", rev, p, err)
	}
	defer rd.Close()
	data, err := io.ReadAll(rd)
	if err != nil {
		return nil, "", fmt.Errorf("revision %q: reading %s: %w", rev, p, err)
	}
	rows, err := DecodeSummary(rev+":"+p, data)
	return rows, experiment, err
}

func reportsIn(tree *object.Tree) ([]string, error) {
	sub, err := tree.Tree("reports")
	if errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range sub.Entries {
		if e.Mode.IsFile() {
			continue
		}
		if _, err := sub.File(path.Join(e.Name, "summary.parquet")); err == nil {
			names = append(names, e.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// DiffMetrics are the metrics compared by Diff, in order; the first ones
// carry intervals.
var DiffMetrics = []string{"base", "ceiling", "final", "floor", "drop", "auc", "gain_base_final", "gain_sarl_final", "ceiling_step", "cliff"}

// DiffLevel is the confidence level of the interval of a difference.
const DiffLevel = 0.95

// Bases of a diff verdict.
const (
	// BasisDelta: the interval of B - A, from both sides' standard errors
	// (the two summaries are treated as independent studies; when they
	// share seeds and problems the interval is conservative).
	BasisDelta = "interval of B-A"
	// BasisA: a summary written before standard errors were stored: B is
	// compared with A's interval, which must have a positive width.
	BasisA = "A's interval"
	// BasisNone: no verdict (no interval, or a zero-width one).
	BasisNone = ""
)

// DiffRow is one metric of one cell condition in two summaries.
type DiffRow struct {
	Task, Workflow, Scale, Condition, Metric string
	A, B, Delta                              float64
	ALo, AHi                                 float64 // A's interval (NaN when none)
	// DLo, DHi: interval of Delta at DiffLevel (NaN when none).
	DLo, DHi float64
	// Basis says what the verdict rests on: BasisDelta, BasisA or BasisNone.
	Basis string
	// Significant: the interval named by Basis has a positive width and
	// excludes no change (BasisDelta: DLo..DHi excludes 0; BasisA: B lies
	// outside A's interval). A zero-width interval never gives a verdict.
	Significant bool
}

// DiffSide is what one side's numbers of a cell condition rest on.
type DiffSide struct {
	Seeds, Problems int64
	Method          string
}

func (s DiffSide) String() string {
	w := "seed"
	if s.Seeds != 1 {
		w = "seeds"
	}
	p := "problems unknown"
	if s.Problems > 0 {
		p = fmt.Sprintf("%d problems", s.Problems)
	}
	m := s.Method
	if m == "" {
		m = "–"
	}
	return fmt.Sprintf("%d %s × %s (interval: %s)", s.Seeds, w, p, m)
}

// DiffCell is one cell condition present in both summaries.
type DiffCell struct {
	Task, Workflow, Scale, Condition string
	A, B                             DiffSide
	// Runs is the number of runs the cell condition rests on when both
	// sides have the same run IDs and their manifests were read (DiffRuns),
	// IdenticalRuns how many of them are byte-identical on both sides.
	Runs, IdenticalRuns int
}

// Identical reports whether every run of the cell condition is
// byte-identical on both sides.
func (c DiffCell) Identical() bool { return c.Runs > 0 && c.IdenticalRuns == c.Runs }

// FewSeeds reports whether either side has fewer than analysis.MinSeeds seeds.
func (c DiffCell) FewSeeds() bool {
	return c.A.Seeds < analysis.MinSeeds || c.B.Seeds < analysis.MinSeeds
}

// DiffResult compares the cell rows of two summaries.
type DiffResult struct {
	Rows  []DiffRow
	Cells []DiffCell // in the order of Rows
	OnlyA []string   // cell conditions only in A ("task/workflow/scale condition")
	OnlyB []string
	Runs  DiffRunsInfo // config keys and identical runs (DiffRuns); zero from Diff
}

func cellLabel(r SummaryRow) string {
	return fmt.Sprintf("%s/%s/%s %s", r.Task, r.Workflow, scaleLabel(r), r.Condition)
}

// scaleLabel is a row's scale as a diff shows it (the cell's ScaleLabel).
func scaleLabel(r SummaryRow) string {
	return analysis.CellKey{Workflow: r.Workflow, Task: r.Task, Scale: r.Scale, Arm: r.Arm}.ScaleLabel()
}

// estimateOf reads metric m of a row with its interval, standard error and
// degrees of freedom.
func estimateOf(r SummaryRow, m string) analysis.Estimate {
	return analysis.Estimate{Value: r.Value(m), Lo: r.Value(m + "_lo"), Hi: r.Value(m + "_hi"), SE: r.Value(m + "_se"), DF: r.Value(m + "_df")}
}

// compare fills the interval of the difference and the verdict of a row.
func compare(row *DiffRow, ea, eb analysis.Estimate) {
	row.DLo, row.DHi = math.NaN(), math.NaN()
	if !math.IsNaN(ea.SE) && !math.IsNaN(eb.SE) && !math.IsNaN(ea.DF) && !math.IsNaN(eb.DF) {
		d := analysis.DifferenceInterval(eb, ea, DiffLevel)
		row.DLo, row.DHi, row.Basis = d.Lo, d.Hi, BasisDelta
		row.Significant = d.Excludes(0)
		return
	}
	if !ea.Degenerate() {
		row.Basis = BasisA
		row.Significant = ea.Excludes(row.B)
	}
}

// Diff compares the cell rows of summaries a and b.
func Diff(a, b []SummaryRow) DiffResult {
	index := func(rows []SummaryRow) (map[string]SummaryRow, []string) {
		m := map[string]SummaryRow{}
		var keys []string
		for _, r := range rows {
			if r.Kind != "cell" {
				continue
			}
			if _, ok := m[r.Key()]; !ok {
				keys = append(keys, r.Key())
			}
			m[r.Key()] = r
		}
		return m, keys
	}
	ma, ka := index(a)
	mb, kb := index(b)
	sortRows := func(keys []string, m map[string]SummaryRow) {
		sort.Slice(keys, func(i, j int) bool {
			x, y := m[keys[i]], m[keys[j]]
			if x.Task != y.Task {
				return x.Task < y.Task
			}
			if x.Workflow != y.Workflow {
				return x.Workflow < y.Workflow
			}
			if x.Scale != y.Scale {
				return x.Scale < y.Scale
			}
			if x.Arm != y.Arm {
				return x.Arm < y.Arm
			}
			if analysis.CondOrder(x.Condition) != analysis.CondOrder(y.Condition) {
				return analysis.CondOrder(x.Condition) < analysis.CondOrder(y.Condition)
			}
			return x.Condition < y.Condition
		})
	}
	sortRows(ka, ma)
	sortRows(kb, mb)
	var d DiffResult
	for _, k := range ka {
		ra := ma[k]
		rb, ok := mb[k]
		if !ok {
			d.OnlyA = append(d.OnlyA, cellLabel(ra))
			continue
		}
		d.Cells = append(d.Cells, DiffCell{Task: ra.Task, Workflow: ra.Workflow, Scale: scaleLabel(ra), Condition: ra.Condition,
			A: DiffSide{ra.Seeds, ra.Problems, ra.CIMethod}, B: DiffSide{rb.Seeds, rb.Problems, rb.CIMethod}})
		for _, m := range DiffMetrics {
			ea, eb := estimateOf(ra, m), estimateOf(rb, m)
			if math.IsNaN(ea.Value) && math.IsNaN(eb.Value) {
				continue
			}
			row := DiffRow{Task: ra.Task, Workflow: ra.Workflow, Scale: scaleLabel(ra), Condition: ra.Condition, Metric: m,
				A: ea.Value, B: eb.Value, Delta: eb.Value - ea.Value, ALo: ea.Lo, AHi: ea.Hi}
			compare(&row, ea, eb)
			d.Rows = append(d.Rows, row)
		}
	}
	for _, k := range kb {
		if _, ok := ma[k]; !ok {
			d.OnlyB = append(d.OnlyB, cellLabel(mb[k]))
		}
	}
	return d
}

// isCount reports whether a diff metric is a count or a step, printed as
// an integer.
func isCount(metric string) bool { return metric == "ceiling_step" || metric == "cliff" }

func fmtVal(metric string, v float64, signed bool) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case isCount(metric) && v == math.Trunc(v) && signed:
		return fmt.Sprintf("%+.0f", v)
	case isCount(metric) && v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case signed:
		return sf3(v)
	}
	return f3(v)
}

// verdict is a row's significance column, and whether the row was judged
// (it has an interval or rests on identical runs) and changed.
func (r DiffRow) verdict() (text string, judged, changed bool) {
	switch {
	case r.Basis == BasisIdentical:
		return "no (identical runs)", true, false
	case r.Basis == BasisNone:
		if isCount(r.Metric) {
			return "", false, false
		}
		return "no interval", false, false
	case r.Significant:
		text, judged, changed = "**yes**", true, true
	default:
		text, judged = "no", true
	}
	if r.Basis == BasisA {
		text += " (vs A's CI)"
	}
	return text, judged, changed
}

// maxListed is how many significant changes the conclusion lists.
const maxListed = 20

// Markdown renders the comparison: first its conclusion (what changed
// significantly, which cell conditions rest on identical runs, and the
// config keys that differ between the two sides' runs), then one table per
// cell condition.
func (d DiffResult) Markdown(labelA, labelB string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# marlow diff: A = %s, B = %s\n\n## Conclusion\n\n", labelA, labelB)
	changed, judged := 0, 0
	var listed []string
	for _, r := range d.Rows {
		_, j, c := r.verdict()
		if j {
			judged++
		}
		if c {
			changed++
			if len(listed) < maxListed {
				listed = append(listed, fmt.Sprintf("- %s / %s / %s — %s, %s: %s → %s (%s, %g%% CI [%s, %s])", r.Task, r.Workflow, r.Scale, r.Condition, r.Metric,
					fmtVal(r.Metric, r.A, false), fmtVal(r.Metric, r.B, false), fmtVal(r.Metric, r.Delta, true), DiffLevel*100, fmtVal(r.Metric, r.DLo, true), fmtVal(r.Metric, r.DHi, true)))
			}
		}
	}
	switch {
	case changed == 0:
		fmt.Fprintf(&b, "**No significant change**: none of the %d compared values with an interval changed significantly (%d compared in all).\n", judged, len(d.Rows))
	default:
		fmt.Fprintf(&b, "**%d of %d compared values with an interval changed significantly** (%d compared in all):\n\n%s\n", changed, judged, len(d.Rows), strings.Join(listed, "\n"))
		if changed > len(listed) {
			fmt.Fprintf(&b, "- … and %d more in the tables below\n", changed-len(listed))
		}
	}
	ident := 0
	for _, c := range d.Cells {
		if c.Identical() {
			ident++
		}
	}
	if ident > 0 {
		fmt.Fprintf(&b, "\n%d of %d cell conditions rest on byte-identical runs on both sides (same run IDs and committed segments): their deltas are exactly 0, judged as one study rather than two independent ones.\n", ident, len(d.Cells))
	}
	few := 0
	for _, c := range d.Cells {
		if c.FewSeeds() {
			few++
		}
	}
	if few > 0 {
		fmt.Fprintf(&b, "\n**Warning**: %d of %d cell conditions rest on fewer than %d seeds on one side or both; with one seed an interval covers the validation problems but not the seed-to-seed spread (see the report's Definitions for its measured coverage).\n", few, len(d.Cells), analysis.MinSeeds)
	}
	b.WriteString(d.Runs.markdown())
	fmt.Fprintf(&b, "\n## Reading the tables\n\n\"significant\": the %g%% interval of B − A (from both sides' standard errors, A and B taken as independent studies) has a positive width and excludes 0. "+
		"For a summary written before standard errors were stored, B must lie outside A's interval, and only when that interval has a positive width. "+
		"A zero-width interval never gives a verdict. A cell condition whose runs are byte-identical on both sides is one study: its delta is exactly 0. Each cell says how many seeds and validation problems each side rests on.\n", DiffLevel*100)
	prev := ""
	ci := 0
	for _, r := range d.Rows {
		head := fmt.Sprintf("%s / %s / %s — %s", r.Task, r.Workflow, r.Scale, r.Condition)
		if head != prev {
			for ci < len(d.Cells) && fmt.Sprintf("%s / %s / %s — %s", d.Cells[ci].Task, d.Cells[ci].Workflow, d.Cells[ci].Scale, d.Cells[ci].Condition) != head {
				ci++
			}
			fmt.Fprintf(&b, "\n## %s\n\n", head)
			if ci < len(d.Cells) {
				c := d.Cells[ci]
				warn := ""
				if c.FewSeeds() {
					warn = fmt.Sprintf(" — **fewer than %d seeds**", analysis.MinSeeds)
				}
				if c.Runs > 0 {
					warn += fmt.Sprintf("; %d of its %d runs byte-identical on both sides", c.IdenticalRuns, c.Runs)
				}
				fmt.Fprintf(&b, "A: %s; B: %s%s\n\n", c.A, c.B, warn)
			}
			fmt.Fprintf(&b, "| metric | A | A's CI | B | delta | %g%% CI of delta | significant |\n|---|---:|---|---:|---:|---|---|\n", DiffLevel*100)
			prev = head
		}
		aci := "–"
		if !math.IsNaN(r.ALo) && !math.IsNaN(r.AHi) {
			aci = fmt.Sprintf("[%s, %s]", f3(r.ALo), f3(r.AHi))
		}
		dci := "–"
		if !math.IsNaN(r.DLo) && !math.IsNaN(r.DHi) {
			dci = fmt.Sprintf("[%s, %s]", sf3(r.DLo), sf3(r.DHi))
		}
		verdict, _, _ := r.verdict()
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Metric, fmtVal(r.Metric, r.A, false), aci, fmtVal(r.Metric, r.B, false), fmtVal(r.Metric, r.Delta, true), dci, verdict)
	}
	if len(d.OnlyA) > 0 {
		fmt.Fprintf(&b, "\nOnly in A: %s\n", strings.Join(d.OnlyA, "; "))
	}
	if len(d.OnlyB) > 0 {
		fmt.Fprintf(&b, "\nOnly in B: %s\n", strings.Join(d.OnlyB, "; "))
	}
	return b.String()
}

// markdown is the config part of the conclusion.
func (r DiffRunsInfo) markdown() string {
	if !r.Known {
		why := r.Why
		if why == "" {
			why = "the runs' manifests were not read"
		}
		return fmt.Sprintf("\n**Config**: not compared: %s.\n", why)
	}
	where := fmt.Sprintf("%d runs with the same run ID on both sides", r.Matched)
	if r.OnlyA > 0 || r.OnlyB > 0 {
		where += fmt.Sprintf("; %d only in A, %d only in B", r.OnlyA, r.OnlyB)
	}
	if len(r.Changes) == 0 {
		return fmt.Sprintf("\n**Config**: no key differs between A's and B's runs (%s; %d of them byte-identical).\n", where, r.Identical)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n**Config**: keys that differ between A's and B's runs (%s; %d of them byte-identical):\n\n", where, r.Identical)
	for _, c := range r.Changes {
		fmt.Fprintf(&b, "- `%s` (%d of %d runs)\n", c.Line, c.Runs, r.Matched)
	}
	return b.String()
}

type jsonDiffRow struct {
	Task      string   `json:"task"`
	Workflow  string   `json:"workflow"`
	Scale     string   `json:"scale"`
	Condition string   `json:"condition"`
	Metric    string   `json:"metric"`
	A         *float64 `json:"a"`
	B         *float64 `json:"b"`
	Delta     *float64 `json:"delta"`
	ALo       *float64 `json:"a_lo"`
	AHi       *float64 `json:"a_hi"`
	DeltaLo   *float64 `json:"delta_lo"`
	DeltaHi   *float64 `json:"delta_hi"`
	Basis     string   `json:"basis"`
	Sig       bool     `json:"significant"`
}

type jsonDiffCell struct {
	Task      string `json:"task"`
	Workflow  string `json:"workflow"`
	Scale     string `json:"scale"`
	Condition string `json:"condition"`
	ASeeds    int64  `json:"a_seeds"`
	AProblems int64  `json:"a_problems"`
	AMethod   string `json:"a_ci_method"`
	BSeeds    int64  `json:"b_seeds"`
	BProblems int64  `json:"b_problems"`
	BMethod   string `json:"b_ci_method"`
	FewSeeds  bool   `json:"few_seeds"`
	Runs      int    `json:"runs"`           // runs with the same IDs on both sides (0: not compared)
	Identical int    `json:"identical_runs"` // of them byte-identical
}

type jsonConfigChange struct {
	Change string `json:"change"` // "key: a -> b"
	Runs   int    `json:"runs"`
}

type jsonDiffRuns struct {
	Compared  bool               `json:"compared"`
	Why       string             `json:"why,omitempty"`
	Matched   int                `json:"matched"`
	OnlyA     int                `json:"only_a"`
	OnlyB     int                `json:"only_b"`
	Identical int                `json:"identical"`
	Changes   []jsonConfigChange `json:"config_changes"`
}

func jnum(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// JSON renders the comparison as indented JSON; undefined values are null.
func (d DiffResult) JSON(labelA, labelB string) ([]byte, error) {
	out := struct {
		A     string         `json:"a"`
		B     string         `json:"b"`
		Level float64        `json:"level"`
		Cells []jsonDiffCell `json:"cells"`
		Rows  []jsonDiffRow  `json:"rows"`
		OnlyA []string       `json:"only_a"`
		OnlyB []string       `json:"only_b"`
		Runs  jsonDiffRuns   `json:"runs"`
	}{A: labelA, B: labelB, Level: DiffLevel, Cells: []jsonDiffCell{}, Rows: []jsonDiffRow{}, OnlyA: append([]string{}, d.OnlyA...), OnlyB: append([]string{}, d.OnlyB...),
		Runs: jsonDiffRuns{Compared: d.Runs.Known, Why: d.Runs.Why, Matched: d.Runs.Matched, OnlyA: d.Runs.OnlyA, OnlyB: d.Runs.OnlyB, Identical: d.Runs.Identical, Changes: []jsonConfigChange{}}}
	for _, c := range d.Runs.Changes {
		out.Runs.Changes = append(out.Runs.Changes, jsonConfigChange{c.Line, c.Runs})
	}
	for _, c := range d.Cells {
		out.Cells = append(out.Cells, jsonDiffCell{c.Task, c.Workflow, c.Scale, c.Condition,
			c.A.Seeds, c.A.Problems, c.A.Method, c.B.Seeds, c.B.Problems, c.B.Method, c.FewSeeds(), c.Runs, c.IdenticalRuns})
	}
	for _, r := range d.Rows {
		out.Rows = append(out.Rows, jsonDiffRow{r.Task, r.Workflow, r.Scale, r.Condition, r.Metric,
			jnum(r.A), jnum(r.B), jnum(r.Delta), jnum(r.ALo), jnum(r.AHi), jnum(r.DLo), jnum(r.DHi), r.Basis, r.Significant})
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding diff as JSON: %w", err)
	}
	return append(data, '\n'), nil
}
