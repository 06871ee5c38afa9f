package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// fixtureSpec is a valid spec of the analysis fixture's experiment, so a
// spec can name the fixture's runs under a runs root.
const fixtureSpec = `experiment: fixture
seeds: [1, 2]
matrix:
  workflows: [voting]
  tasks: [synth-math]
  scales: [s]
  conditions: [base, sa-rl, sp, ip]
models:
  s:
    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}
`

// sources returns the fixture's runs as each kind of source the commands
// that read runs accept: a spec (with its runs root), a runs folder and an
// archive.
func sources(t *testing.T) (specFile, runsRoot, runsDir, archive string) {
	t.Helper()
	dir := t.TempDir()
	runsRoot = filepath.Join(dir, "runs")
	runsDir = filepath.Join(runsRoot, "fixture")
	copyTree(t, fixtureRuns(t), runsDir)
	specFile = filepath.Join(dir, "fixture.yaml")
	if err := os.WriteFile(specFile, []byte(fixtureSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	archive = filepath.Join(dir, "logs.tar.zst")
	if _, _, err := execCLI(t, "archive", runsDir, archive); err != nil {
		t.Fatal(err)
	}
	return specFile, runsRoot, runsDir, archive
}

// Every command that reads runs takes a spec, a runs folder or an archive,
// and --only keeps the same runs in each.
func TestCommandsReadEverySource(t *testing.T) {
	specFile, runsRoot, runsDir, archive := sources(t)
	only := "voting-sp-*"
	for _, src := range []struct{ name, arg string }{{"spec", specFile}, {"folder", runsDir}, {"archive", archive}} {
		t.Run(src.name, func(t *testing.T) {
			// check counts the runs it read, with and without --only.
			_, stderr, err := execCLI(t, "check", src.arg, "--runs", runsRoot)
			if err != nil || !strings.Contains(stderr, "12 runs read, no problems") {
				t.Errorf("check: err %v, stderr %q", err, stderr)
			}
			_, stderr, err = execCLI(t, "check", src.arg, "--runs", runsRoot, "--only", only)
			if err != nil || !strings.Contains(stderr, "4 runs read, no problems") {
				t.Errorf("check --only: err %v, stderr %q", err, stderr)
			}
			// analyze keeps the matching runs only.
			stdout, _, err := execCLI(t, "analyze", src.arg, "--runs", runsRoot, "--only", only)
			if err != nil {
				t.Fatalf("analyze --only: %v", err)
			}
			if !strings.Contains(stdout, "voting-sp-s-math-seed2") || strings.Contains(stdout, "voting-ip-") {
				t.Errorf("analyze --only %s printed:\n%s", only, stdout)
			}
			// report of the selection (--partial: the spec plans run ids of
			// its own, which are pending).
			out := filepath.Join(t.TempDir(), "rep")
			stdout, _, err = execCLI(t, "report", src.arg, "--runs", runsRoot, "--only", only, "--out", out, "--partial")
			if err != nil || !strings.Contains(stdout, "from 4 run views") {
				t.Errorf("report --only: err %v, stdout %q", err, stdout)
			}
			// status --json: 12 done runs; the spec plans 8 runs of its own
			// ids, so there every planned run is pending.
			stdout, _, err = execCLI(t, "status", src.arg, "--runs", runsRoot, "--json")
			if err != nil {
				t.Fatalf("status --json: %v", err)
			}
			var st struct {
				Runs []struct {
					ID, State string
					LastStep  int64 `json:"last_step"`
				}
				Counts map[string]int
			}
			if err := json.Unmarshal([]byte(stdout), &st); err != nil {
				t.Fatalf("status --json is not JSON: %v\n%s", err, stdout)
			}
			want := map[string]int{"done": 12}
			if src.name == "spec" {
				want = map[string]int{"pending": 8}
			}
			if len(st.Counts) != len(want) || st.Counts["done"] != want["done"] || st.Counts["pending"] != want["pending"] {
				t.Errorf("status --json counts %v, want %v", st.Counts, want)
			}
			// archive of the selection holds the selected runs only.
			if src.name != "archive" {
				a := filepath.Join(t.TempDir(), "sel.tar.zst")
				stdout, _, err = execCLI(t, "archive", src.arg, a, "--runs", runsRoot, "--only", only)
				if err != nil || !strings.Contains(stdout, "(4 runs,") {
					t.Errorf("archive --only: err %v, stdout %q", err, stdout)
				}
			}
		})
	}
	// A runs folder's status lists the runs found, with their steps.
	stdout, _, err := execCLI(t, "status", runsDir, "--only", "voting-ip-m-*")
	if err != nil || !strings.Contains(stdout, "voting-ip-m-math-seed2") || !strings.Contains(stdout, "2 runs: done 2") {
		t.Errorf("status of a runs folder: err %v\n%s", err, stdout)
	}
	if _, _, err := execCLI(t, "status", runsDir, "--only", "nothing-*"); err == nil || !strings.Contains(err.Error(), "no run matches") {
		t.Errorf("status --only matching nothing: err %v", err)
	}
}

// On a fresh clone the runs of a committed experiment are absent: report
// and the other readers point at the archive committed with its report.
func TestMissingRunsPointAtCommittedArchive(t *testing.T) {
	repo := t.TempDir()
	for p, text := range map[string]string{"go.mod": "module x\n", "seeds/fixture.yaml": fixtureSpec, "reports/fixture/logs.tar.zst": "x"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, p), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range []string{"report", "analyze", "check"} {
		_, _, err := execCLI(t, cmd, filepath.Join(repo, "seeds", "fixture.yaml"), "--runs", filepath.Join(repo, "runs"))
		want := filepath.Join(repo, "reports", "fixture", "logs.tar.zst")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "marlow run") {
			t.Errorf("%s with absent runs: err %v, want one naming %s", cmd, err, want)
		}
	}
}

// marlow list shows every experiment of a runs root with its counts.
func TestListCLI(t *testing.T) {
	_, runsRoot, runsDir, _ := sources(t)
	copyTree(t, runsDir, filepath.Join(runsRoot, "second"))
	if err := os.RemoveAll(filepath.Join(runsRoot, "second", "voting-base-s-math-seed1", "manifest.json")); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := execCLI(t, "list", "--runs", runsRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`(?m)^fixture +12 +done 12 `, `(?m)^second +12 +done 11, corrupt 1 `} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("list output does not match %s:\n%s", re, stdout)
		}
	}
	if _, _, err := execCLI(t, "list", "--runs", filepath.Join(runsRoot, "absent")); err == nil || !strings.Contains(err.Error(), "no runs folder") {
		t.Errorf("list of a missing root: err %v", err)
	}
}

// An argument error names the command's usage line, not only the count.
func TestUsageOnArgumentErrors(t *testing.T) {
	cases := [][]string{
		{"report"}, {"status"}, {"check"}, {"analyze"}, {"plan"}, {"run"}, {"pretrain"},
		{"archive", "x"}, {"diff", "a"}, {"list", "extra"}, {"version", "extra"},
		{"status", "--nosuchflag", "x.yaml"},
	}
	for _, args := range cases {
		_, _, err := execCLI(t, args...)
		if err == nil {
			t.Errorf("%v: no error", args)
			continue
		}
		if want := "usage: marlow " + args[0]; !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %q lacks %q", args, err, want)
		}
	}
}

// --threads has one default and one meaning in every command that has it.
func TestThreadsDefaultsAgree(t *testing.T) {
	var seen []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f := c.Flags().Lookup("threads"); f != nil {
			seen = append(seen, c)
			if f.DefValue != "0" || !strings.Contains(f.Usage, "0: the cores divided among the runs at once") {
				t.Errorf("%s --threads: default %s, usage %q", c.CommandPath(), f.DefValue, f.Usage)
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
	if len(seen) < 3 {
		t.Errorf("--threads found on %d commands, want run, pretrain and bench engine at least", len(seen))
	}
	if resolveThreads(3, 8) != 3 || resolveThreads(0, 1<<20) != 1 {
		t.Error("resolveThreads: a given count is kept and the automatic one is at least 1")
	}
}

// The Makefile stamps the commit, which version prints when the build
// has no VCS stamp (a test binary has none).
func TestVersionStamp(t *testing.T) {
	defer func(c string) { buildCommit = c }(buildCommit)
	buildCommit = "0123456789abcdef0123456789abcdef01234567-dirty"
	if v := versionString(); !strings.Contains(v, "commit 0123456789abcdef0123456789abcdef01234567 (dirty)") {
		t.Errorf("stamped version %q", v)
	}
	out, err := exec.Command("make", "-n", "-C", filepath.Join("..", ".."), "build").CombinedOutput()
	if err != nil {
		t.Skipf("make -n build: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`-ldflags "-X main\.buildCommit=[0-9a-f]{40}(-dirty)?"`).Match(out) {
		t.Errorf("make build does not stamp the commit:\n%s", out)
	}
}

// diff reads summary.parquet paths, never calls a path a revision, and
// warns when the two sides are different experiments; its conclusion comes
// first, pairs byte-identical runs and compares the runs' configs where it
// has their manifests, and says why not where it has none.
func TestDiffSidesCLI(t *testing.T) {
	_, runsRoot, runsDir, archive := sources(t)
	rep := filepath.Join(t.TempDir(), "rep")
	if _, _, err := execCLI(t, "report", runsDir, "--out", rep); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(runsRoot, "other")
	copyTree(t, runsDir, other)
	err := filepath.WalkDir(other, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "manifest.json" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(p, []byte(strings.Replace(string(b), `"experiment": "fixture"`, `"experiment": "other"`, 1)), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(rep, "summary.parquet")
	cases := []struct {
		name     string
		args     []string
		warn     bool
		want     string
		wantErr  string
		errNotIn string
	}{
		{name: "summary files", args: []string{summary, summary}, want: "**Config**: not compared: A (" + summary + ") is a summary without log archives"},
		{name: "archive vs summary", args: []string{archive, summary}, want: "**Config**: not compared: B ("},
		{name: "archive vs itself", args: []string{archive, archive}, want: "rest on byte-identical runs on both sides"},
		{name: "different experiments", args: []string{summary, other}, warn: true},
		{name: "missing parquet", args: []string{filepath.Join(rep, "nope", "summary.parquet"), summary}, wantErr: "no such file or folder", errNotIn: `revision "`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := execCLI(t, append([]string{"diff"}, tc.args...)...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), tc.errNotIn) {
					t.Fatalf("err %v, want one with %q and without %q", err, tc.wantErr, tc.errNotIn)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(stdout, "# marlow diff") || !strings.Contains(stdout, "\n## Conclusion\n") {
				t.Errorf("no diff with its conclusion first printed:\n%.500s", stdout)
			}
			if i := strings.Index(stdout, tc.want); i < 0 || i > strings.Index(stdout, "| metric |") {
				t.Errorf("the conclusion lacks %q:\n%.1500s", tc.want, stdout)
			}
			warned := strings.Contains(stderr, "A is experiment fixture and B is experiment other")
			if warned != tc.warn {
				t.Errorf("warning printed %v, want %v; stderr %q", warned, tc.warn, stderr)
			}
		})
	}
}

// plan says where each base model comes from and estimates the time.
func TestPlanBaseModelsAndEstimate(t *testing.T) {
	demo := filepath.Join("..", "..", "seeds", "demo.yaml")
	stdout, _, err := execCLI(t, "plan", "--allow-dirty", demo)
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`(?m)^base models:\n  s +committed: .*seeds/models/s-[0-9a-f]{12}$`, `(?m)^estimated time: [0-9.]+ (s|min|h) to [0-9.]+ (s|min|h) with 2 runs at once$`} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("plan output does not match %s:\n%s", re, stdout)
		}
	}
	stdout, _, err = execCLI(t, "plan", "--allow-dirty", "--json", demo)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		BaseModels []struct{ Scale, Where, Dir string } `json:"base_models"`
		Estimate   *struct {
			Seconds   float64 `json:"seconds"`
			GenTokens float64 `json:"generated_tokens"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.BaseModels) != 1 || p.BaseModels[0].Where != "committed" || p.Estimate == nil || !(p.Estimate.Seconds > 0) || !(p.Estimate.GenTokens > 0) {
		t.Errorf("plan --json: base models %+v, estimate %+v", p.BaseModels, p.Estimate)
	}
	stdout, _, err = execCLI(t, "plan", "--allow-dirty", "--json", "--no-estimate", demo)
	if err != nil || !strings.Contains(stdout, `"estimate": null`) {
		t.Errorf("plan --no-estimate: err %v, output lacks a null estimate:\n%.300s", err, stdout)
	}
}

// The README names every command the program has (docs/cli.md holds them
// all by construction: TestCLIReference), its one-screen CLI block names
// only commands that exist, and main's package doc names every command.
func TestDocsListEveryCommand(t *testing.T) {
	root := newRootCmd()
	root.InitDefaultCompletionCmd()
	var have []string
	for _, c := range root.Commands() {
		if c.Name() != "help" {
			have = append(have, c.Name())
		}
	}
	slices.Sort(have)
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	_, block, ok := strings.Cut(readme, "## The CLI in one screen\n\n```\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no CLI code block")
	}
	for _, m := range regexp.MustCompile(`(?m)^marlow ([a-z-]+)`).FindAllStringSubmatch(block, -1) {
		if !slices.Contains(have, m[1]) {
			t.Errorf("README's CLI block lists marlow %s, which the program does not have (%v)", m[1], have)
		}
	}
	for _, c := range have {
		if !regexp.MustCompile("(?m)^marlow " + c + "\\b|`" + c + "`").MatchString(readme) {
			t.Errorf("README does not name the command %s (in its CLI block or as `%s`)", c, c)
		}
	}
	if !strings.Contains(readme, "(docs/cli.md)") {
		t.Error("README does not link docs/cli.md")
	}
	main, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(main), "package main")
	for _, c := range have {
		if c != "completion" && !regexp.MustCompile(`\b`+c+`\b`).MatchString(doc) {
			t.Errorf("main.go's package doc does not name %s", c)
		}
	}
}

// The minimal spec of docs/running.md is valid, plans four runs and uses a
// committed base model, so it runs without pretraining.
func TestReadmeMinimalSpec(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "running.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "A minimal spec")
	_, rest, ok2 := strings.Cut(rest, "```yaml\n")
	yml, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/running.md has no minimal spec")
	}
	// in a folder whose seeds/models is the repository's, as a user's
	// spec in a clone would see it
	dir := t.TempDir()
	models, err := filepath.Abs(filepath.Join("..", "..", "seeds", "models"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "seeds"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(models, filepath.Join(dir, "seeds", "models")); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(f, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := execCLI(t, "plan", "--allow-dirty", "--no-estimate", f)
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`(?m)^4 runs: base 1, sa-rl 1, sp 1, ip 1$`, `(?m)^  s +committed: .*seeds/models/s-[0-9a-f]{12}$`} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("plan of docs/running.md's minimal spec does not match %s:\n%s", re, stdout)
		}
	}
}

// TestCPUProfileFlag: --cpuprofile writes a profile of any command, also of
// one that fails, and names the file it cannot create.
func TestCPUProfileFlag(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "version.prof")
	if _, stderr, code := runCLI(t, nil, "--cpuprofile", prof, "version"); code != 0 {
		t.Fatalf("version with --cpuprofile: exit %d: %s", code, stderr)
	}
	if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
		t.Fatalf("profile of version: %v (size %v)", err, fi)
	}
	failed := filepath.Join(dir, "failed.prof")
	if _, _, code := runCLI(t, nil, "--cpuprofile", failed, "plan", filepath.Join(dir, "missing.yaml")); code == 0 {
		t.Fatal("plan of a missing spec succeeded")
	}
	if fi, err := os.Stat(failed); err != nil || fi.Size() == 0 {
		t.Fatalf("profile of a failing command: %v (size %v)", err, fi)
	}
	bad := filepath.Join(dir, "no", "such", "dir", "x.prof")
	if _, stderr, code := runCLI(t, nil, "--cpuprofile", bad, "version"); code == 0 || !strings.Contains(stderr, bad) {
		t.Fatalf("unwritable profile: exit %d, stderr %q (want an error naming %s)", code, stderr, bad)
	}
}

// make reproduce hands its runs folder to every marlow command that reads
// or writes runs, the preflight included: the preflight's free-disk check
// must look at the disk the runs will be written to, not at ./runs.
func TestReproduceRunsFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "elsewhere", "runs")
	out, err := exec.Command("make", "-n", "-C", filepath.Join("..", ".."), "reproduce", "PAPER_RUNS="+dir).CombinedOutput()
	if err != nil {
		t.Skipf("make -n reproduce: %v\n%s", err, out)
	}
	cmds := regexp.MustCompile(`\./bin/marlow (run|report)[^;\n]*`).FindAllString(string(out), -1)
	if len(cmds) != 3 {
		t.Fatalf("make -n reproduce runs %d marlow run/report commands, want 3 (preflight, runs, report):\n%s", len(cmds), out)
	}
	for _, c := range cmds {
		if !strings.Contains(c, `--runs "`+dir+`"`) {
			t.Errorf("make reproduce's %q does not use PAPER_RUNS (%s)", c, dir)
		}
	}
	if !strings.Contains(cmds[0], "--preflight") {
		t.Errorf("make reproduce's first command is not the preflight: %q", cmds[0])
	}
}
