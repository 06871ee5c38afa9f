package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/runner"
)

// The compile smoke's verdict names each missing piece with what to do,
// Triton only on cuda, and a compiled function that differs from eager.
func TestCompileSmokeJudge(t *testing.T) {
	ok := smokeResult{CC: "/usr/bin/gcc", PythonH: "/usr/include/python3.11/Python.h", Triton: "3.6.0", CompileDiff: 1e-6}
	for _, tc := range []struct {
		name   string
		edit   func(*smokeResult)
		device string
		want   []string
	}{
		{"all there", func(*smokeResult) {}, "cuda", nil},
		{"no compiler", func(r *smokeResult) { r.CC = "" }, "cpu", []string{"no C compiler"}},
		{"no headers", func(r *smokeResult) { r.PythonH = "" }, "cuda", []string{"no Python.h"}},
		{"no triton on cuda", func(r *smokeResult) { r.Triton, r.TritonError = "", "ModuleNotFoundError" }, "cuda", []string{"triton does not import (ModuleNotFoundError)"}},
		{"no triton on the CPU", func(r *smokeResult) { r.Triton = "" }, "cpu", nil},
		{"compile error", func(r *smokeResult) { r.CompileError = "InductorError" }, "cpu", []string{"torch.compile failed: InductorError"}},
		{"wrong result", func(r *smokeResult) { r.CompileDiff = 0.5 }, "cpu", []string{"differs from eager by 0.5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			got := r.judge(tc.device)
			if len(got) != len(tc.want) {
				t.Fatalf("%q, want %d findings", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("finding %q lacks %q", got[i], w)
				}
			}
		})
	}
}

// bench node refuses, before it runs anything, a spec whose scale is not
// a torch checkpoint and a device it does not know, saying what to give.
func TestBenchNodeRefuses(t *testing.T) {
	demo := filepath.Join("..", "..", "seeds", "demo.yaml")
	if _, _, err := execCLI(t, "bench", "node", "--spec", demo); err == nil || !strings.Contains(err.Error(), "not a torch checkpoint model") {
		t.Errorf("a tiny-model spec: %v", err)
	}
	t.Setenv("MARLOW_MODELS", t.TempDir())
	t.Setenv("MARLOW_DATA", t.TempDir())
	paper := filepath.Join("..", "..", "seeds", "paper.yaml")
	if _, _, err := execCLI(t, "bench", "node", "--spec", paper, "--device", "tpu"); err == nil || !strings.Contains(err.Error(), "give cuda or cpu") {
		t.Errorf("an unknown device: %v", err)
	}
	if _, _, err := execCLI(t, "bench", "node"); err == nil || !strings.Contains(err.Error(), "--spec is required") {
		t.Errorf("no spec: %v", err)
	}
}

// bench node keeps to its budget: with none left no step runs, each says
// so, the file is still written (naming the steps) and the exit status is 1.
func TestBenchNodeBudget(t *testing.T) {
	t.Setenv("MARLOW_MODELS", t.TempDir())
	t.Setenv("MARLOW_DATA", t.TempDir())
	runs := t.TempDir()
	paper := filepath.Join("..", "..", "seeds", "paper.yaml")
	out, _, err := execCLI(t, "bench", "node", "--spec", paper, "--runs", runs, "--budget", "1ns")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(err.Error(), "6 of 6 steps failed") {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	check, err := runner.ReadNodeCheck(filepath.Join(runs, runner.NodeCheckFile))
	if err != nil || check == nil || len(check.Steps) != 6 || check.Params != 0.6e9 || check.Device != "cuda" || check.DType != "bfloat16" {
		t.Fatalf("the file: %+v, %v", check, err)
	}
	for _, s := range check.Steps {
		if s.OK || !strings.Contains(s.Detail, "the budget is spent") {
			t.Errorf("step %+v", s)
		}
	}
}
