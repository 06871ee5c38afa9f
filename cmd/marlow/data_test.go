package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets/dapo"
	"github.com/marlowlab/marlow/datasets/datasetstest"
)

func TestDataCLI(t *testing.T) {
	dir := t.TempDir()
	var rows []datasetstest.MathRow
	for r := 0; r < 2; r++ {
		for i := 0; i < 10; i++ {
			rows = append(rows, datasetstest.MathRow{Prompt: dapo.WrapperPrefix + fmt.Sprintf("Compute $%d \\cdot 2$.", i) + dapo.WrapperSuffix, Truth: fmt.Sprint(2 * i)})
		}
	}
	rows = append(rows, datasetstest.MathRow{Prompt: dapo.WrapperPrefix + "求 $1+1$。" + dapo.WrapperSuffix, Truth: "2"})
	orig := filepath.Join(dir, "dapo-math-17k.parquet")
	datasetstest.WriteDAPO(t, orig, rows)
	en := filepath.Join(dir, "en", "train-00000-of-00001.parquet")
	datasetstest.WriteOpenR1(t, en, rows[:10])
	root := filepath.Join(dir, "DeepCoder-Preview-Dataset")
	var code []datasetstest.CodeRow
	for i := 0; i < 6; i++ {
		code = append(code, datasetstest.CodeRow{Problem: fmt.Sprintf("Print %d.", i), Tests: fmt.Sprintf(`[{"type": "stdin_stdout", "input": "", "output": "%d\n"}]`, i), Metadata: "{}"})
	}
	code = append(code, datasetstest.CodeRow{Problem: "no tests", Tests: "[]"})
	datasetstest.WriteDeepCoder(t, filepath.Join(root, "primeintellect", "train-00000-of-00001.parquet"), code)
	specFile := filepath.Join(dir, "spec.yaml")
	spec := `experiment: d
seeds: [1]
matrix: {workflows: [voting], tasks: [dapo-math], scales: [s], conditions: [base]}
models:
  s: {tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}}
tasks:
  dapo-math: {path: dapo-math-17k.parquet, language: en, val_size: 3}
`
	if err := os.WriteFile(specFile, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.parquet")
	datasetstest.WriteDeepCoder(t, bad, code[:1])
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{name: "original", args: []string{"data", "--language", "en", orig}, stdout: []string{
			"source:      dapo-math (variant dapo-math-17k)", "rows:        21\n", "distinct:    11 problem statements",
			"duplicates:  10 rows", "wrapper:     11 stripped, 0 without it, 0 near misses", "1  not in the chosen language",
			"split:       train ", "sample (train cursor 0)", "  | [system]\n  | You are the generator. Solve the problem. The last line of your response should be of the form Answer:",
			"  | [user]\n  | Problem: Compute $"}},
		{name: "open-r1 en", args: []string{"data", en}, stdout: []string{
			"source:      dapo-math (variant dapo-math-17k-open-r1)", "rows:        10\n", "distinct:    10 problem statements", "skipped:     none"}},
		{name: "deepcoder root", args: []string{"data", "--subsets", "primeintellect", "--val-size", "2", root}, stdout: []string{
			"source:      deepcoder (variant shards)", "rows:        7\n", "1  no tests", "split:       train 4, validation 2", "  | Problem: Print "}},
		{name: "spec task", args: []string{"data", "--spec", specFile, "--task", "dapo-math"}, stdout: []string{
			"val_size 3, val_frac 0.1, language en)", "split:       train 10, validation 0"}},
		{name: "wrong schema", args: []string{"data", "--source", "dapo-math", bad}, code: 1, stderr: []string{`missing column "data_source" (expected string)`}},
		{name: "missing subset", args: []string{"data", "--subsets", "taco", root}, code: 1, stderr: []string{"subset taco: no folder"}},
		{name: "no path", args: []string{"data"}, code: 1, stderr: []string{"give a FILE or DIR"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}
