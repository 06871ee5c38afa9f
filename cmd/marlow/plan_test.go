package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/runner"
)

// When MARLOW_TEST_RUN_MAIN is set, the test binary acts as the marlow CLI,
// so the tests can check exit status and stderr without building it.
func init() {
	if os.Getenv("MARLOW_TEST_RUN_MAIN") == "1" {
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv("MARLOW_TEST_ARGS")), &args); err != nil {
			panic(err)
		}
		os.Args = append([]string{"marlow"}, args...)
		main()
		os.Exit(0)
	}
}

func runCLI(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIIn(t, "", env, args...)
}

// runCLIIn is runCLI in working directory dir ("" for the test's own).
func runCLIIn(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	a, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "MARLOW_TEST_RUN_MAIN=1", "MARLOW_TEST_ARGS="+string(a)), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestPlanCLI(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("experiment: x\nseeds: [1, 1]\nbogus: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	paper := filepath.Join("..", "..", "seeds", "paper.yaml")
	env := []string{"MARLOW_MODELS=/m", "MARLOW_DATA=/d"}
	cases := []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		wantNoJSON bool
	}{
		{name: "paper table", args: []string{"plan", paper}, stdout: []string{
			"voting-ip-s-dapo-math-seed1", "sa-rl-l-deepcoder-seed3", "180 runs: base 54, sa-rl 18, sp 54, ip 54", "commit: "}},
		{name: "only glob", args: []string{"plan", "--only", "sa-rl-*-seed2", paper}, stdout: []string{"6 runs: sa-rl 6"}},
		{name: "resolved", args: []string{"plan", "--resolved", paper}, stdout: []string{"clip_high: 0.28", "checkpoint: /m/Qwen3-0.6B"}},
		{name: "malformed spec", args: []string{"plan", bad}, code: 1, stderr: []string{
			bad + ":2: seeds[1]: duplicate seed 1", bad + ":3: bogus: unknown key", "matrix: required key is missing"}},
		{name: "missing file", args: []string{"plan", "/nonexistent/spec.yaml"}, code: 1, stderr: []string{"no such file"}},
		{name: "no args", args: []string{"plan"}, code: 1, stderr: []string{"accepts 1 arg"}},
		{name: "bad glob", args: []string{"plan", "--only", "[", paper}, code: 1, stderr: []string{"--only"}},
		{name: "version", args: []string{"version"}, stdout: []string{"marlow ", "go1."}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, env, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, c.code, errOut)
			}
			for _, w := range c.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range c.stderr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if strings.Contains(errOut, "panic") {
				t.Errorf("panic: %s", errOut)
			}
		})
	}
}

func TestPlanJSON(t *testing.T) {
	out, errOut, code := runCLI(t, []string{"MARLOW_MODELS=/m", "MARLOW_DATA=/d"}, "plan", "--json", filepath.Join("..", "..", "seeds", "paper.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var p struct {
		Commit string `json:"commit"`
		Runs   []struct {
			ID, Condition, Workflow, Task, Scale string
			ConfigHash                           string `json:"config_hash"`
			Seed                                 uint64
			SeedIndex                            int `json:"seed_index"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	if len(p.Runs) != 180 {
		t.Fatalf("%d runs, want 180", len(p.Runs))
	}
	for _, r := range p.Runs {
		if r.ID == "" || r.Condition == "" || r.Workflow == "" || r.Task == "" || r.Scale == "" || len(r.ConfigHash) != 64 || r.Seed == 0 || r.SeedIndex == 0 {
			t.Fatalf("incomplete run %+v", r)
		}
	}
}

// TestPlanWarnings: a budget past the stated limits and a generator that
// may write one token are warned about; smoke is not.
func TestPlanWarnings(t *testing.T) {
	smoke, err := os.ReadFile(filepath.Join("..", "..", "seeds", "smoke.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	big := strings.NewReplacer("steps: 2\n", "steps: 200000\n", "every: 1\n", "every: 1\n").Replace(string(smoke))
	tiny := strings.Replace(string(smoke), "max_new_tokens: {default: 96}", "max_new_tokens: {default: 96, generator: 1}", 1)
	for name, text := range map[string]string{"big.yaml": big, "tiny.yaml": tiny} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		file string
		want []string
		none bool
	}{
		{filepath.Join("..", "..", "seeds", "smoke.yaml"), nil, true},
		{filepath.Join(dir, "big.yaml"), []string{"would write more than 50000 files", "the experiment would write about", "more than 1000000"}, false},
		{filepath.Join(dir, "tiny.yaml"), []string{"has no learning signal: grpo.max_new_tokens.generator 1"}, false},
	}
	for _, c := range cases {
		out, errOut, code := runCLI(t, nil, "plan", "--allow-dirty", c.file)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.file, code, errOut)
		}
		if !strings.Contains(out, "estimated footprint:") {
			t.Errorf("%s: no footprint line:\n%s", c.file, out)
		}
		if !strings.Contains(out, "report (marlow report --jobs ") {
			t.Errorf("%s: no report estimate:\n%s", c.file, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.file, w, errOut)
			}
		}
		for _, line := range strings.Split(errOut, "\n") {
			if c.none && strings.Contains(line, "warning:") && !strings.Contains(line, "pin:") {
				t.Errorf("%s: unexpected warning %q", c.file, line)
			}
		}
	}
}

// marlow plan prices the paper study's GPU runs without a time line for
// its checkpoint models: from the stated model when the runs folder holds
// no node self-check, from the measured figures (naming the GPU and the
// date) when it does; a damaged check file is an error that names it.
func TestPlanGPUCostSource(t *testing.T) {
	t.Setenv("MARLOW_MODELS", t.TempDir())
	t.Setenv("MARLOW_DATA", t.TempDir())
	spec := filepath.Join("..", "..", "seeds", "paper.yaml")
	runs := t.TempDir()
	out, _, err := execCLI(t, "plan", spec, "--runs", runs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "estimated time") || !strings.Contains(out, "throughput stated, not measured") {
		t.Errorf("plan without a check file:\n%s", tailLines(out, 12))
	}
	check := &runner.NodeCheck{Version: runner.NodeCheckVersion, GPU: "NVIDIA H100 80GB HBM3", Date: "2026-12-05", Checkpoint: "/m/Qwen3-0.6B", Params: 0.6e9,
		Generate: map[string]runner.Rate{"slots": {TokS: 5000}}, Train: runner.Rate{TokS: 30000}}
	if err := runner.WriteNodeCheck(filepath.Join(runs, runner.NodeCheckFile), check); err != nil {
		t.Fatal(err)
	}
	out, _, err = execCLI(t, "plan", spec, "--runs", runs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "throughput measured on NVIDIA H100 80GB HBM3, 2026-12-05") || !strings.Contains(out, "5,000 generated and 30,000 trained tok/s") {
		t.Errorf("plan with a check file:\n%s", tailLines(out, 12))
	}
	bad := filepath.Join(t.TempDir(), "check.json")
	if err := os.WriteFile(bad, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := execCLI(t, "plan", spec, "--gpu-check", bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a damaged check file: %v", err)
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
