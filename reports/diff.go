package reports

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

// DiffRow is one metric of one cell condition in two summaries.
type DiffRow struct {
	Task, Workflow, Scale, Condition, Metric string
	A, B, Delta                              float64
	ALo, AHi                                 float64 // A's interval (NaN when none)
	// Outside: B lies outside A's interval.
	Outside bool
}

// DiffResult compares the cell rows of two summaries.
type DiffResult struct {
	Rows  []DiffRow
	OnlyA []string // cell conditions only in A ("task/workflow/scale condition")
	OnlyB []string
}

func cellLabel(r SummaryRow) string {
	return fmt.Sprintf("%s/%s/%s %s", r.Task, r.Workflow, r.Scale, r.Condition)
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
		for _, m := range DiffMetrics {
			va, vb := ra.Value(m), rb.Value(m)
			if math.IsNaN(va) && math.IsNaN(vb) {
				continue
			}
			row := DiffRow{Task: ra.Task, Workflow: ra.Workflow, Scale: ra.Scale, Condition: ra.Condition, Metric: m,
				A: va, B: vb, Delta: vb - va, ALo: ra.Value(m + "_lo"), AHi: ra.Value(m + "_hi")}
			row.Outside = analysis.Estimate{Value: va, Lo: row.ALo, Hi: row.AHi}.Outside(vb)
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

// Markdown renders the comparison: one table per cell condition.
func (d DiffResult) Markdown(labelA, labelB string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# marlow diff: A = %s, B = %s\n\n", labelA, labelB)
	fmt.Fprintf(&b, "\"outside CI\": B lies outside A's bootstrap interval.\n")
	prev := ""
	changed := 0
	for _, r := range d.Rows {
		head := fmt.Sprintf("%s / %s / %s — %s", r.Task, r.Workflow, r.Scale, r.Condition)
		if head != prev {
			fmt.Fprintf(&b, "\n## %s\n\n| metric | A | B | delta | A's CI | outside CI |\n|---|---:|---:|---:|---|---|\n", head)
			prev = head
		}
		ci := "–"
		if !math.IsNaN(r.ALo) && !math.IsNaN(r.AHi) {
			ci = fmt.Sprintf("[%s, %s]", f3(r.ALo), f3(r.AHi))
		}
		out := ""
		if r.Outside {
			out = "**yes**"
			changed++
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Metric, f3(r.A), f3(r.B), sf3(r.Delta), ci, out)
	}
	if len(d.OnlyA) > 0 {
		fmt.Fprintf(&b, "\nOnly in A: %s\n", strings.Join(d.OnlyA, "; "))
	}
	if len(d.OnlyB) > 0 {
		fmt.Fprintf(&b, "\nOnly in B: %s\n", strings.Join(d.OnlyB, "; "))
	}
	fmt.Fprintf(&b, "\n%d of %d compared values lie outside A's interval.\n", changed, len(d.Rows))
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
	Outside   bool     `json:"outside_ci"`
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
		A     string        `json:"a"`
		B     string        `json:"b"`
		Rows  []jsonDiffRow `json:"rows"`
		OnlyA []string      `json:"only_a"`
		OnlyB []string      `json:"only_b"`
	}{A: labelA, B: labelB, Rows: []jsonDiffRow{}, OnlyA: append([]string{}, d.OnlyA...), OnlyB: append([]string{}, d.OnlyB...)}
	for _, r := range d.Rows {
		out.Rows = append(out.Rows, jsonDiffRow{r.Task, r.Workflow, r.Scale, r.Condition, r.Metric,
			jnum(r.A), jnum(r.B), jnum(r.Delta), jnum(r.ALo), jnum(r.AHi), r.Outside})
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding diff as JSON: %w", err)
	}
	return append(data, '\n'), nil
}
