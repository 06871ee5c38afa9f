package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/marlowlab/marlow/analysis/analysistest"
	"github.com/marlowlab/marlow/harness/runlog"
)

// execCLI runs a fresh marlow command tree in-process with args and
// returns what it printed and its error.
func execCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&o)
	root.SetErr(&e)
	err = root.Execute()
	return o.String(), e.String(), err
}

var (
	fixtureOnce sync.Once
	fixtureDir  string
	fixtureErr  error
)

// fixtureRuns writes the analysis fixture's runs once per test binary and
// returns the runs folder; tests must not modify it.
func fixtureRuns(t *testing.T) string {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "marlow-cli-runs-")
		if err != nil {
			fixtureErr = err
			return
		}
		fixtureDir = filepath.Join(dir, "fixture")
		fixtureErr = analysistest.WriteRuns(fixtureDir, analysistest.Fixture())
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixtureDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(filepath.Dir(fixtureDir))
	}
	os.Exit(code)
}

// copyTree copies a runs folder so a test can damage its copy.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// firstParquet returns the first Parquet file (in sorted order) under dir.
func firstParquet(t *testing.T, dir string) string {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		t.Fatalf("no parquet files under %s", dir)
	}
	sort.Strings(files)
	return files[0]
}

func TestCheckCLI(t *testing.T) {
	good := fixtureRuns(t)
	bad := filepath.Join(t.TempDir(), "runs")
	copyTree(t, good, bad)
	// Damage two runs: one loses its manifest, one gets a truncated segment.
	runs, err := os.ReadDir(bad)
	if err != nil || len(runs) < 2 {
		t.Fatalf("fixture runs: %v (%d)", err, len(runs))
	}
	noManifest := filepath.Join(bad, runs[0].Name(), "manifest.json")
	if err := os.Remove(noManifest); err != nil {
		t.Fatal(err)
	}
	trunc := firstParquet(t, filepath.Join(bad, runs[1].Name()))
	data, err := os.ReadFile(trunc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trunc, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name     string
		dir      string
		wantCode int
		lines    []string // substrings, each expected on its own stdout line
	}{
		{name: "clean", dir: good, wantCode: 0},
		{name: "damaged", dir: bad, wantCode: 1, lines: []string{runs[0].Name(), filepath.Base(trunc)}},
		{name: "missing folder", dir: filepath.Join(t.TempDir(), "absent"), wantCode: 1, lines: []string{"absent"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := execCLI(t, "check", tc.dir)
			code := 0
			if err != nil {
				code = exitCode(err)
			}
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d (err %v)\nstdout:\n%s", code, tc.wantCode, err, stdout)
			}
			out := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
			if tc.wantCode == 0 {
				if stdout != "" || !strings.Contains(stderr, "no problems") {
					t.Fatalf("clean check printed stdout %q stderr %q", stdout, stderr)
				}
				return
			}
			if len(out) < len(tc.lines) {
				t.Fatalf("%d problem lines, want at least %d:\n%s", len(out), len(tc.lines), stdout)
			}
			for _, want := range tc.lines {
				n := 0
				for _, l := range out {
					if strings.Contains(l, want) {
						n++
					}
				}
				if n == 0 {
					t.Errorf("no problem line names %q:\n%s", want, stdout)
				}
			}
			if !strings.Contains(err.Error(), "problem(s)") {
				t.Errorf("error %q does not count the problems", err)
			}
		})
	}
}

func TestArchiveCLI(t *testing.T) {
	runs := fixtureRuns(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar.zst"), filepath.Join(dir, "b.tar.zst")
	for _, out := range []string{a, b} {
		stdout, _, err := execCLI(t, "archive", runs, out)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(stdout, "wrote "+out) {
			t.Errorf("archive printed %q", stdout)
		}
	}
	da, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(da, db) {
		t.Fatal("two archives of the same runs differ")
	}
	// The archive reads back as the same runs, and marlow check accepts it.
	fromDir, err := runlog.ReadRuns(runs)
	if err != nil {
		t.Fatal(err)
	}
	fromArc, err := runlog.ReadRuns(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromArc) != len(fromDir) {
		t.Fatalf("archive holds %d runs, folder %d", len(fromArc), len(fromDir))
	}
	if _, _, err := execCLI(t, "check", a); err != nil {
		t.Errorf("check of the archive: %v", err)
	}
	if _, _, err := execCLI(t, "archive", runs, filepath.Join(dir, "out.tar")); err == nil || !strings.Contains(err.Error(), ".tar.zst") {
		t.Errorf("bad output name: err %v, want one naming .tar.zst", err)
	}
}

// readTree returns every file under dir by slash path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReportCLI(t *testing.T) {
	runs := fixtureRuns(t)
	arc := filepath.Join(t.TempDir(), "fixture.tar.zst")
	if err := runlog.Archive(runs, arc); err != nil {
		t.Fatal(err)
	}
	outA, outB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, c := range []struct{ src, out string }{{runs, outA}, {arc, outB}} {
		stdout, _, err := execCLI(t, "report", c.src, "--out", c.out)
		if err != nil {
			t.Fatalf("report %s: %v", c.src, err)
		}
		if !strings.HasPrefix(stdout, "report "+c.out+":") {
			t.Errorf("report printed %q", stdout)
		}
	}
	a, b := readTree(t, outA), readTree(t, outB)
	for _, want := range []string{"README.md", "summary.parquet"} {
		if len(a[want]) == 0 {
			t.Errorf("report lacks %s", want)
		}
	}
	pngs := 0
	for name := range a {
		if strings.HasPrefix(name, "figures/") && strings.HasSuffix(name, ".png") {
			pngs++
		}
	}
	if pngs == 0 {
		t.Error("report has no PNG figures")
	}
	// The README names its own source, so compare everything else byte for
	// byte and the README with the source replaced.
	if len(a) != len(b) {
		t.Fatalf("folder report has %d files, archive report %d", len(a), len(b))
	}
	for name, da := range a {
		db := b[name]
		if name == "README.md" {
			da = bytes.ReplaceAll(bytes.ReplaceAll(da, []byte(runs), nil), []byte(outA), nil)
			db = bytes.ReplaceAll(bytes.ReplaceAll(db, []byte(arc), nil), []byte(outB), nil)
		}
		if !bytes.Equal(da, db) {
			t.Errorf("%s differs between the report of the folder and of the archive", name)
		}
	}
	readme := string(a["README.md"])
	for _, want := range []string{"marlow report " + runs, "|", "Findings", "ceiling"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README lacks %q", want)
		}
	}
	if _, _, err := execCLI(t, "report", filepath.Join(t.TempDir(), "absent")); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("missing source: err %v, want one naming it", err)
	}
	// a report folder that could be taken for code is refused
	if _, _, err := execCLI(t, "report", runs, "--out", filepath.Join(t.TempDir(), "testdata")); err == nil || !strings.Contains(err.Error(), "named like Go code") {
		t.Errorf("report into a testdata folder: err %v, want a refusal", err)
	}
}

func TestAnalyzeCLI(t *testing.T) {
	runs := fixtureRuns(t)
	stdout, _, err := execCLI(t, "analyze", runs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"experiment fixture:", "ceiling@step", "captured aggregator", "amplification"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("analyze output lacks %q:\n%s", want, stdout)
		}
	}
	stdout, _, err = execCLI(t, "analyze", "--json", runs)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, stdout)
	}
	kinds := map[any]int{}
	for _, r := range rows {
		kinds[r["kind"]]++
		if _, ok := r["ceiling"]; !ok {
			t.Fatalf("row lacks ceiling: %v", r)
		}
	}
	if kinds["run"] == 0 || kinds["cell"] == 0 {
		t.Errorf("--json rows by kind %v, want run and cell rows", kinds)
	}
}

func TestDiffCLI(t *testing.T) {
	runs := fixtureRuns(t)
	rep := filepath.Join(t.TempDir(), "rep")
	if _, _, err := execCLI(t, "report", runs, "--out", rep); err != nil {
		t.Fatal(err)
	}
	repo := commitReport(t, rep)
	cases := []struct {
		name    string
		args    []string
		want    []string
		json    bool
		wantErr string
	}{
		{name: "git revisions", args: []string{"diff", "--repo", repo, "HEAD", "HEAD"}, want: []string{"interval of B − A", "0 of "}},
		{name: "missing experiment", args: []string{"diff", "--repo", repo, "--experiment", "nope", "HEAD", "HEAD"}, wantErr: `revision "HEAD"`},
		{name: "report folders", args: []string{"diff", rep, rep}, want: []string{"interval of B − A", "| metric | A | A's CI | B | delta |", "0 of "}},
		{name: "runs vs report folder", args: []string{"diff", runs, rep}, want: []string{"interval of B − A", "0 of "}},
		{name: "json", args: []string{"diff", "--json", rep, rep}, json: true},
		{name: "unknown revision", args: []string{"diff", "--repo", repo, "nosuchrev", "HEAD"}, wantErr: "nosuchrev"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdout, _, err := execCLI(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("diff output lacks %q:\n%.2000s", w, stdout)
				}
			}
			if tc.json {
				var v map[string]any
				if err := json.Unmarshal([]byte(stdout), &v); err != nil {
					t.Fatalf("--json output is not a JSON object: %v\n%.500s", err, stdout)
				}
			}
		})
	}
	var ee *exitError
	if _, _, err := execCLI(t, "check", filepath.Join(t.TempDir(), "none")); !errors.As(err, &ee) || ee.code != 1 {
		t.Errorf("check of a missing folder: err %v, want exit status 1", err)
	}
}

// commitReport commits rep's summary.parquet as reports/fixture/ in a new
// git repository and returns the repository's folder.
func commitReport(t *testing.T, rep string) string {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(rep, "summary.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	rel := filepath.Join("reports", "fixture", "summary.parquet")
	if err := os.MkdirAll(filepath.Join(dir, "reports", "fixture"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rel), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Add(filepath.ToSlash(rel)); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "test", Email: "test@example.com", When: time.Unix(0, 0).UTC()}
	if _, err := wt.Commit("report", &git.CommitOptions{Author: sig}); err != nil {
		t.Fatal(err)
	}
	return dir
}
