package report

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/analysis/analysistest"
	"github.com/marlowlab/marlow/harness/runlog"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func fixtureStudy(t *testing.T) *analysis.Study {
	t.Helper()
	st, err := analysis.Analyze(analysistest.Fixture())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

var fixtureOpts = Options{Source: "runs/fixture", Out: "reports/fixture"}

// TestByteIdentical renders the same logs twice (from two independent
// analyses) into two folders and compares every file byte for byte.
func TestByteIdentical(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	var lists [][]File
	for _, d := range dirs {
		files, err := Write(fixtureStudy(t), d, fixtureOpts)
		if err != nil {
			t.Fatal(err)
		}
		lists = append(lists, files)
	}
	if len(lists[0]) != len(lists[1]) || len(lists[0]) < 10 {
		t.Fatalf("file counts %d and %d", len(lists[0]), len(lists[1]))
	}
	for _, f := range lists[0] {
		a, err := os.ReadFile(filepath.Join(dirs[0], f.Path))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dirs[1], f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two builds", f.Path)
		}
	}
	if dir := os.Getenv("MARLOW_REPORT_DIR"); dir != "" { // for looking at the figures by hand
		if _, err := Write(fixtureStudy(t), dir, fixtureOpts); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGolden compares the fixture's README.md and the digest of every file
// with testdata/golden; run with -update to rewrite them.
func TestGolden(t *testing.T) {
	files, err := Render(fixtureStudy(t), fixtureOpts)
	if err != nil {
		t.Fatal(err)
	}
	var digest strings.Builder
	var readmeText []byte
	for _, f := range files {
		fmt.Fprintf(&digest, "%x  %s\n", sha256.Sum256(f.Data), f.Path)
		if f.Path == "README.md" {
			readmeText = f.Data
		}
	}
	for _, g := range []struct {
		name string
		data []byte
	}{{"README.md", readmeText}, {"files.sha256", []byte(digest.String())}} {
		path := filepath.Join("testdata", "golden", g.name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, g.data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./analysis/report -run TestGolden -update)", err)
		}
		if !bytes.Equal(want, g.data) {
			t.Errorf("%s differs from %s (run with -update after checking the change)\n%s", g.name, path, firstDiff(string(want), string(g.data)))
		}
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, x, y)
		}
	}
	return ""
}

func TestSummaryRoundTrip(t *testing.T) {
	st := fixtureStudy(t)
	rows := SummaryRows(st)
	data, err := EncodeSummary(rows)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSummary("summary.parquet", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(rows) {
		t.Fatalf("%d rows back, wrote %d", len(back), len(rows))
	}
	var runs, cells int
	for i := range rows {
		if rows[i].Key() != back[i].Key() || rows[i].RunID != back[i].RunID || rows[i].CIMethod != back[i].CIMethod {
			t.Errorf("row %d: %s vs %s", i, rows[i].Key(), back[i].Key())
		}
		for j, m := range SummaryMetrics {
			a, b := rows[i].Values[j], back[i].Values[j]
			if a != b && !(a != a && b != b) {
				t.Errorf("row %d %s: %v vs %v", i, m, a, b)
			}
		}
		if rows[i].Kind == "run" {
			runs++
		} else {
			cells++
		}
	}
	// 2 scales x (base + sa-rl in 2 workflows + 2 sp + 2 ip) run views; cells: 2 voting x 4 conditions + 2 single x 1
	if runs != 14 || cells != 10 {
		t.Errorf("%d run rows and %d cell rows, want 14 and 10", runs, cells)
	}
	if _, err := DecodeSummary("x.parquet", []byte("not parquet")); err == nil || !strings.Contains(err.Error(), "x.parquet") {
		t.Errorf("bad file: error %v", err)
	}
}

// TestRenderEdgeCases renders studies with degenerate logs: a base run
// alone, a run with one validation, constant gradient norms and NaN
// statistics. They must render without error.
func TestRenderEdgeCases(t *testing.T) {
	nan := func(int) float64 { return math.NaN() }
	tests := []struct {
		name string
		runs func() []*runlog.Run
	}{
		{"base only", func() []*runlog.Run {
			r := &runlog.Run{Manifest: analysistest.Manifest("b", "voting", "base", "t", "s", 1)}
			r.Evals = analysistest.Evals("b", "voting", []int64{0}, []float64{0.5})
			return []*runlog.Run{r}
		}},
		{"one validation, flat and NaN statistics", func() []*runlog.Run {
			r := &runlog.Run{Manifest: analysistest.Manifest("x", "voting", "sp", "t", "s", 1)}
			r.Evals = append(analysistest.Evals("x", "voting", []int64{0}, []float64{0.5}),
				analysistest.RoleEvals("x", "voting", "aggregator", []int64{0}, nan, nan)...)
			r.Steps = append(analysistest.RoleSteps("x", "shared", "generator", 3, analysistest.Const(1), nan, nan),
				analysistest.RoleSteps("x", "shared", "aggregator", 3, analysistest.Const(0), nan, nan)...)
			return []*runlog.Run{r}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := analysis.Analyze(tc.runs())
			if err != nil {
				t.Fatal(err)
			}
			files, err := Render(st, fixtureOpts)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) < 3 || files[0].Path != "README.md" {
				t.Errorf("files %d, first %s", len(files), files[0].Path)
			}
		})
	}
}

// TestReadmeIntervals checks that the report says what each number rests
// on (seeds and problems columns, the interval's basis), warns below 3
// seeds, and prints the measured coverage of the intervals.
func TestReadmeIntervals(t *testing.T) {
	text := readme(fixtureStudy(t), nil, fixtureOpts)
	for _, want := range []string{
		"| condition | seeds | problems |",
		"| synth-math | voting | m | ip | 2 | 20 |",
		"**Warning: fewer than 3 seeds.**",
		"seeds+problems |",
		"- **Coverage of the intervals**, measured by `TestIntervalCoverage`",
		fmt.Sprintf("| seed spread large (0.5, 0.5, 0.15) | 1 | %.1f%% |", 100*analysis.MeasuredCoverage[0].Final),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("README lacks %q", want)
		}
	}
}

// TestWriteRefusesCodeFolders: a report folder named like Go code, or one
// holding Go source, is refused before anything is written.
func TestWriteRefusesCodeFolders(t *testing.T) {
	root := t.TempDir()
	withGo := filepath.Join(root, "pkg")
	if err := os.MkdirAll(withGo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withGo, "x.go"), []byte("package x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		out  string
		want string // "" for accepted
	}{
		{filepath.Join(root, "reports", "build.go"), "named like Go code"},
		{filepath.Join(root, "reports", "testdata"), "named like Go code"},
		{filepath.Join(root, "reports", "vendor") + "/", "named like Go code"},
		{withGo, "holds Go source (x.go)"},
		{filepath.Join(root, "reports", "demo.gone"), ""},
		{filepath.Join(root, "reports", "testdata-2"), ""},
	}
	st := fixtureStudy(t)
	for _, tc := range tests {
		_, err := Write(st, tc.out, fixtureOpts)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.out, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--out")):
			t.Errorf("%s: error %v, want one saying %q and naming --out", tc.out, err, tc.want)
		case tc.want != "":
			if _, err := os.Stat(filepath.Join(tc.out, "README.md")); err == nil {
				t.Errorf("%s: refused, but README.md was written", tc.out)
			}
		}
	}
}

// TestReadmeAnswerFirst checks the README's order: the summary (the
// warning about few seeds, the verdicts on the paper's claims and the
// findings) first, then the figure
// index, then the matrix, the claims' evidence and the figures; the index
// links every figure once and the figures section shows each.
func TestReadmeAnswerFirst(t *testing.T) {
	st := fixtureStudy(t)
	figs, err := Figures(st)
	if err != nil {
		t.Fatal(err)
	}
	text := readme(st, figs, fixtureOpts)
	heads := []string{"\n## Summary\n", "\n### Verdicts on the paper's claims\n", "\n### Findings\n", "\n## Figure index\n",
		"\n## Matrix\n", "\n## The paper's claims\n", "\n## Figures\n", "\n### Study-wide\n", "\n## Failure-mode evidence\n"}
	at := make([]int, len(heads))
	for i, h := range heads {
		at[i] = strings.Index(text, h)
		if at[i] < 0 || i > 0 && at[i] < at[i-1] {
			t.Fatalf("%q at %d, want it after %q (at %d)", strings.TrimSpace(h), at[i], strings.TrimSpace(heads[max(0, i-1)]), at[max(0, i-1)])
		}
	}
	if !strings.Contains(text[at[0]:at[1]], fewSeedsWarning(st)) || fewSeedsWarning(st) == "" {
		t.Errorf("summary lacks the warning about the fixture's one- and two-seed cell conditions")
	}
	if f := findings(st); !strings.Contains(text[at[2]:at[3]], "- "+f[0]+"\n") {
		t.Errorf("summary lacks the first finding %q", f[0])
	}
	index, section := text[at[3]:at[4]], text[at[6]:at[8]]
	for _, f := range figs {
		link := "(figures/" + f.Name + ".png)"
		if n := strings.Count(index, link); n != 1 {
			t.Errorf("figure index links %s %d times, want once", f.Name, n)
		}
		if !strings.Contains(section, "!["+f.Title+"]"+link) {
			t.Errorf("figures section lacks %s", f.Name)
		}
		if f.Cell == "" && !strings.Contains(index, "["+f.Title+"]"+link+": "+figureAbout(f.Kind)+".") {
			t.Errorf("figure index lacks the line of %s with its description", f.Name)
		}
		if figureAbout(f.Kind) == "" {
			t.Errorf("figure %s: kind %q has no description", f.Name, f.Kind)
		}
	}
	for _, k := range []string{kindAccuracy, kindGradNorm, kindRoleAcc} {
		if !strings.Contains(index, "- *"+k+"*: "+figureAbout(k)+".") {
			t.Errorf("figure index does not describe %s", k)
		}
	}
}

// TestReportArms: an arm's cell has its own rows, figures and summary rows,
// with the arm named in the scale column and the summary's arm column.
func TestReportArms(t *testing.T) {
	runs := analysistest.Fixture()
	runs = append(runs, analysistest.InArm(runs, "voting-ip-m-", "i6")...)
	st, err := analysis.Analyze(runs)
	if err != nil {
		t.Fatal(err)
	}
	files, err := Render(st, fixtureOpts)
	if err != nil {
		t.Fatal(err)
	}
	var readme, summary []byte
	figs := 0
	for _, f := range files {
		switch {
		case f.Path == "README.md":
			readme = f.Data
		case f.Path == "summary.parquet":
			summary = f.Data
		case strings.HasPrefix(f.Path, "figures/accuracy_voting_synth-math_m_i6."):
			figs++
		}
	}
	if figs == 0 {
		t.Error("no accuracy figure of the arm's cell (figures/accuracy_voting_synth-math_m_i6.*)")
	}
	if !strings.Contains(string(readme), "| synth-math | voting | m [i6] | ip | 2 |") {
		t.Error("README's matrix has no row of the arm's cell (scale column \"m [i6]\")")
	}
	rows, err := DecodeSummary("summary.parquet", summary)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for _, r := range rows {
		keys[r.Key()]++
		if r.Arm != "" && (r.Arm != "i6" || r.Scale != "m" || r.Condition != "ip") {
			t.Errorf("row %s: arm %q", r.Key(), r.Arm)
		}
	}
	for k, n := range keys {
		if n > 1 {
			t.Errorf("summary key %s on %d rows", k, n)
		}
	}
	if keys["cell|synth-math|voting|m|ip|arm=i6"] != 1 || keys["cell|synth-math|voting|m|ip"] != 1 {
		t.Errorf("summary keys %v", keys)
	}
}
