package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/analysis/analysistest"
	"github.com/marlowlab/marlow/harness/runlog"
)

// changedFixture lowers the last validations of voting-ip-s-math-seed1 so
// that the final accuracy of ip in voting/synth-math/s falls.
func changedFixture() []*runlog.Run {
	runs := analysistest.Fixture()
	for _, r := range runs {
		if r.Manifest.RunID != "voting-ip-s-math-seed1" && r.Manifest.RunID != "voting-ip-s-math-seed2" {
			continue
		}
		for i := range r.Evals {
			e := &r.Evals[i]
			if e.Role == "*" && e.Step >= 80 {
				e.Accuracy = 0.05
			}
		}
	}
	return runs
}

func summaryBytes(t *testing.T, runs []*runlog.Run) []byte {
	t.Helper()
	st, err := analysis.Analyze(runs)
	if err != nil {
		t.Fatal(err)
	}
	data, err := EncodeSummary(SummaryRows(st))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func findRow(t *testing.T, d DiffResult, cell, cond, metric string) DiffRow {
	t.Helper()
	for _, r := range d.Rows {
		if r.Workflow+"/"+r.Task+"/"+r.Scale == cell && r.Condition == cond && r.Metric == metric {
			return r
		}
	}
	t.Fatalf("no diff row for %s %s %s", cell, cond, metric)
	return DiffRow{}
}

func checkDiff(t *testing.T, d DiffResult) {
	t.Helper()
	changed := findRow(t, d, "voting/synth-math/s", "ip", "final")
	if !(changed.Delta < -0.2) || !changed.Significant || changed.Basis != BasisDelta || !(changed.DHi < 0) {
		t.Errorf("ip final in voting/synth-math/s: delta %v [%v, %v] significant %v; want a large significant fall", changed.Delta, changed.DLo, changed.DHi, changed.Significant)
	}
	same := findRow(t, d, "voting/synth-math/m", "ip", "final")
	if same.Delta != 0 || same.Significant {
		t.Errorf("untouched cell changed: %+v", same)
	}
	md := d.Markdown("A", "B")
	for _, want := range []string{"## synth-math / voting / s — ip", "**yes**", "A: 2 seeds × 20 problems (interval: seeds+problems); B: 2 seeds",
		"fewer than 3 seeds", "| cliff | 0 | – | 2 | +2 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	js, err := d.JSON("A", "B")
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatalf("diff JSON does not parse: %v", err)
	}
}

func TestDiffGitRevisions(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "test", Email: "test@example.com", When: time.Unix(0, 0).UTC()}
	rel := filepath.Join("reports", "fixture", "summary.parquet")
	for i, runs := range [][]*runlog.Run{analysistest.Fixture(), changedFixture()} {
		if err := os.MkdirAll(filepath.Join(dir, "reports", "fixture"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), summaryBytes(t, runs), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(filepath.ToSlash(rel)); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Commit("report "+string(rune('1'+i)), &git.CommitOptions{Author: sig}); err != nil {
			t.Fatal(err)
		}
	}
	bare := filepath.Join(t.TempDir(), "bare.git")
	if _, err := git.PlainClone(bare, true, &git.CloneOptions{URL: dir}); err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{dir, bare} {
		a, exp, err := LoadSummaryAt(where, "HEAD~1", "")
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if exp != "fixture" {
			t.Errorf("inferred experiment %q", exp)
		}
		b, _, err := LoadSummaryAt(where, "HEAD", "fixture")
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		checkDiff(t, Diff(a, b))
	}
	tests := []struct{ rev, exp, want string }{
		{"HEAD~1", "nope", `experiment "nope" has no report at revision "HEAD~1"`},
		{"no-such-branch", "fixture", `revision "no-such-branch"`},
	}
	for _, tc := range tests {
		if _, _, err := LoadSummaryAt(bare, tc.rev, tc.exp); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadSummaryAt(%s, %s): error %v, want one containing %q", tc.rev, tc.exp, err, tc.want)
		}
	}
}

func TestDiffFolders(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	for i, runs := range [][]*runlog.Run{analysistest.Fixture(), changedFixture()} {
		st, err := analysis.Analyze(runs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Write(st, dirs[i], fixtureOpts); err != nil {
			t.Fatal(err)
		}
	}
	a, err := LoadSummaryDir(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadSummaryDir(dirs[1])
	if err != nil {
		t.Fatal(err)
	}
	checkDiff(t, Diff(a, b))
	// a cell present only in B is reported
	bOnly := append(b, SummaryRow{Kind: "cell", Task: "synth-code", Workflow: "voting", Scale: "s", Condition: "sp", Values: make([]float64, len(SummaryMetrics))})
	d := Diff(a, bOnly)
	if len(d.OnlyB) != 1 || d.OnlyB[0] != "synth-code/voting/s sp" || len(d.OnlyA) != 0 {
		t.Errorf("only-in lists %v %v", d.OnlyA, d.OnlyB)
	}
	if _, err := LoadSummaryDir(filepath.Join(dirs[0], "figures")); err == nil {
		t.Error("a folder without summary or runs gave no error")
	}
}

// TestDiffVerdicts checks the rule of a diff verdict: the interval of the
// difference when both sides carry standard errors, A's interval for old
// summaries, and never a verdict from a zero-width interval.
func TestDiffVerdicts(t *testing.T) {
	nan := math.NaN()
	row := func(final, lo, hi, se, df float64) SummaryRow {
		r := SummaryRow{Kind: "cell", Task: "t", Workflow: "voting", Scale: "s", Condition: "sp", Seeds: 1, Problems: 48, CIMethod: analysis.MethodProblems,
			Values: make([]float64, len(SummaryMetrics))}
		for i := range r.Values {
			r.Values[i] = nan
		}
		for i, m := range SummaryMetrics {
			switch m {
			case "final":
				r.Values[i] = final
			case "final_lo":
				r.Values[i] = lo
			case "final_hi":
				r.Values[i] = hi
			case "final_se":
				r.Values[i] = se
			case "final_df":
				r.Values[i] = df
			}
		}
		return r
	}
	inf := math.Inf(1)
	tests := []struct {
		name  string
		a, b  SummaryRow
		basis string
		sig   bool
	}{
		{"zero width both sides", row(0.021, 0.021, 0.021, 0, inf), row(0.042, 0.042, 0.042, 0, inf), BasisDelta, false},
		{"zero-width A, wide B", row(0.021, 0.021, 0.021, 0, inf), row(0.042, 0.0, 0.09, 0.02, 40), BasisDelta, false},
		{"clear change", row(0.20, 0.15, 0.25, 0.025, 40), row(0.40, 0.35, 0.45, 0.025, 40), BasisDelta, true},
		{"inside the noise", row(0.20, 0.15, 0.25, 0.025, 40), row(0.23, 0.18, 0.28, 0.025, 40), BasisDelta, false},
		{"old summary, zero-width A", row(0.021, 0.021, 0.021, nan, nan), row(0.042, 0.042, 0.042, nan, nan), BasisNone, false},
		{"old summary, B outside A", row(0.20, 0.15, 0.25, nan, nan), row(0.40, 0.35, 0.45, nan, nan), BasisA, true},
		{"no interval", row(0.20, nan, nan, nan, nan), row(0.40, nan, nan, nan, nan), BasisNone, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Diff([]SummaryRow{tc.a}, []SummaryRow{tc.b})
			r := findRow(t, d, "voting/t/s", "sp", "final")
			if r.Basis != tc.basis || r.Significant != tc.sig {
				t.Errorf("basis %q significant %v, want %q %v (row %+v)", r.Basis, r.Significant, tc.basis, tc.sig, r)
			}
			md := d.Markdown("A", "B")
			if !strings.Contains(md, "A: 1 seed × 48 problems (interval: problems)") || !strings.Contains(md, "fewer than 3 seeds") {
				t.Errorf("markdown does not say what each side rests on:\n%s", md)
			}
		})
	}
}

// diffManifests are the manifests of runs with a config of the given rate
// and one segment each, whose hash is the run's ID unless changed lists it.
func diffManifests(runs []*runlog.Run, lr float64, changed ...string) []runlog.Manifest {
	var out []runlog.Manifest
	for _, r := range runs {
		m := r.Manifest
		m.Config = map[string]any{"grpo": map[string]any{"lr": lr, "steps": 120}}
		m.ConfigHash = fmt.Sprintf("hash-lr%g", lr)
		sha := "sha-" + m.RunID
		if slices.Contains(changed, m.RunID) {
			sha += "-changed"
		}
		m.Inventory = &runlog.Inventory{Segments: []runlog.SegmentEntry{{Path: "steps/000120.parquet", SHA256: sha}}}
		out = append(out, m)
	}
	return out
}

// TestDiffLeadsWithConclusion: the diff's markdown starts with its
// conclusion (what changed, with its interval), then the config keys that
// differ between the sides' runs, before any table; cell conditions whose
// runs are byte-identical on both sides are one study (delta exactly 0),
// not two independent ones; without manifests it says why nothing was
// compared.
func TestDiffLeadsWithConclusion(t *testing.T) {
	rowsOf := func(runs []*runlog.Run) []SummaryRow {
		st, err := analysis.Analyze(runs)
		if err != nil {
			t.Fatal(err)
		}
		return SummaryRows(st)
	}
	fa, fb := analysistest.Fixture(), changedFixture()
	a, b := rowsOf(fa), rowsOf(fb)
	changedRuns := []string{"voting-ip-s-math-seed1", "voting-ip-s-math-seed2"}
	tests := []struct {
		name        string
		ma, mb      []runlog.Manifest
		identical   bool // the untouched cells rest on identical runs
		wantConfig  string
		wantBasisIP string
	}{
		{"same config, two runs changed", diffManifests(fa, 0.002), diffManifests(fb, 0.002, changedRuns...), true,
			"**Config**: no key differs between A's and B's runs", BasisDelta},
		// the untouched runs' logs stay byte-identical (as a base run's do when only the rate changed)
		{"the rate changed", diffManifests(fa, 0.002), diffManifests(fb, 0.003, changedRuns...), true,
			"- `grpo.lr: 0.002 -> 0.003` (", BasisDelta},
		{"no manifests", nil, nil, false, "**Config**: not compared: A has none", BasisDelta},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := DiffRuns(a, b, tc.ma, tc.mb, "A has none")
			checkDiff(t, d)
			if r := findRow(t, d, "voting/synth-math/s", "ip", "final"); r.Basis != tc.wantBasisIP {
				t.Errorf("changed cell: basis %q, want %q", r.Basis, tc.wantBasisIP)
			}
			same := findRow(t, d, "voting/synth-math/m", "ip", "final")
			if got := same.Basis == BasisIdentical; got != tc.identical {
				t.Errorf("untouched cell: basis %q; identical runs %v, want %v", same.Basis, got, tc.identical)
			}
			if tc.identical && (same.DLo != 0 || same.DHi != 0 || same.Significant) {
				t.Errorf("identical runs: delta interval [%v, %v] significant %v, want exactly 0", same.DLo, same.DHi, same.Significant)
			}
			md := d.Markdown("A", "B")
			concl, table := strings.Index(md, "## Conclusion"), strings.Index(md, "| metric |")
			cfg, sig := strings.Index(md, tc.wantConfig), strings.Index(md, "- synth-math / voting / s — ip, final: ")
			if concl < 0 || cfg < 0 || sig < 0 || !(concl < sig && sig < cfg && cfg < table) {
				t.Errorf("conclusion at %d, significant change at %d, config (%q) at %d, first table at %d; want them in that order, before the tables:\n%s",
					concl, sig, tc.wantConfig, cfg, table, md[:min(len(md), 3000)])
			}
			if tc.identical && !strings.Contains(md, "rest on byte-identical runs on both sides") {
				t.Errorf("markdown does not say which cells rest on identical runs")
			}
			if js, err := d.JSON("A", "B"); err != nil || !strings.Contains(string(js), `"config_changes"`) {
				t.Errorf("JSON lacks the config changes (%v)", err)
			}
		})
	}
}
