package reports

import (
	"encoding/json"
	"os"
	"path/filepath"
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
	if !(changed.Delta < -0.2) || !changed.Outside {
		t.Errorf("ip final in voting/synth-math/s: delta %v outside %v; want a large fall outside the interval", changed.Delta, changed.Outside)
	}
	same := findRow(t, d, "voting/synth-math/m", "ip", "final")
	if same.Delta != 0 || same.Outside {
		t.Errorf("untouched cell changed: %+v", same)
	}
	md := d.Markdown("A", "B")
	if !strings.Contains(md, "## synth-math / voting / s — ip") || !strings.Contains(md, "**yes**") {
		t.Errorf("markdown lacks the changed cell:\n%s", md)
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
