package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// marlow samples reads every kind of source and applies its filters.
func TestSamplesCLI(t *testing.T) {
	specFile, runsRoot, runsDir, archive := sources(t)
	cases := []struct {
		name string
		args []string
		want []string // fragments of stdout
		err  string
	}{
		{"folder, one run's final rows", []string{runsDir, "--only", "voting-ip-s-math-seed1", "--role", "final", "--max-chars", "20"},
			[]string{"== voting-ip-s-math-seed1  step ", "-- final (agent final"}, ""},
		{"archive, a problem at step 0", []string{archive, "--only", "voting-sp-s-math-seed1", "--step", "0", "--problem", "p000"},
			[]string{"voting-sp-s-math-seed1  step 0  val  voting  problem p000  rollout 0", "-- final answer"}, ""},
		{"spec", []string{specFile, "--runs", runsRoot, "--only", "voting-sp-s-math-seed1", "--step", "0", "--problem", "p000"},
			[]string{"problem p000"}, ""},
		{"no such step", []string{runsDir, "--only", "voting-sp-s-math-seed1", "--step", "12345"}, nil, "no rollout matches run voting-sp-s-math-seed1, step 12345, split val; the runs hold val steps"},
		{"no such run", []string{runsDir, "--only", "nothing-*"}, nil, `no run matches "nothing-*"`},
		{"no such problem", []string{runsDir, "--only", "voting-sp-s-math-seed1", "--step", "0", "--problem", "p3"}, nil, "problem p3; the runs hold val steps 0"},
		{"no such problem lists problem IDs", []string{runsDir, "--only", "voting-sp-s-math-seed1", "--step", "0", "--problem", "p3"}, nil, "; problems (val) p000, "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, _, err := execCLI(t, append([]string{"samples"}, c.args...)...)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%.2000s", w, stdout)
				}
			}
		})
	}
	stdout, _, err := execCLI(t, "samples", runsDir, "--only", "voting-sp-s-math-seed1", "--step", "0", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rs []struct {
		RunID string `json:"run_id"`
		Step  int64
	}
	if err := json.Unmarshal([]byte(stdout), &rs); err != nil || len(rs) == 0 || rs[0].RunID != "voting-sp-s-math-seed1" {
		t.Errorf("--json: %v, %d rollouts\n%.500s", err, len(rs), stdout)
	}
}

// The example in samples' help runs against the committed archive it names
// and prints the rollout it asks for.
func TestSamplesHelpExample(t *testing.T) {
	_, example, ok := strings.Cut(newSamplesCmd().Long, "\n  marlow samples ")
	if !ok {
		t.Fatal("samples' help has no example")
	}
	args := strings.Fields(example)
	problem := ""
	for i, a := range args {
		if strings.HasPrefix(a, "reports/") {
			args[i] = filepath.Join("..", "..", a)
		}
		if a == "--problem" && i+1 < len(args) {
			problem = args[i+1]
		}
	}
	stdout, _, err := execCLI(t, append([]string{"samples"}, args...)...)
	if err != nil {
		t.Fatalf("samples %v: %v", args, err)
	}
	if problem == "" || !strings.Contains(stdout, "problem "+problem+"  rollout ") {
		t.Errorf("samples %v does not print problem %q:\n%.1000s", args, problem, stdout)
	}
}
