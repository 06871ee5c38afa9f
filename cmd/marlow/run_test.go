package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marlowlab/marlow/harness/runner"
)

func TestRunExit(t *testing.T) {
	out := func(states ...string) *runner.Summary {
		s := &runner.Summary{}
		for i, st := range states {
			o := runner.Outcome{ID: "r" + string(rune('a'+i)), State: st}
			if st == runner.StateFailed || st == runner.StateDamaged || st == runner.StateHeld {
				o.Err = errors.New("boom")
			}
			s.Outcomes = append(s.Outcomes, o)
		}
		return s
	}
	many := make([]string, 120)
	for i := range many {
		many[i] = runner.StateFailed
	}
	cases := []struct {
		name    string
		sum     *runner.Summary
		code    int
		printed string
	}{
		{"all done", out(runner.StateDone, runner.StateSkipped), 0, "2 runs: done 1, skipped 1"},
		{"two failed", out(runner.StateDone, runner.StateFailed, runner.StateFailed), 2, "failed: rc: boom"},
		{"failures capped", out(many...), maxFailExit, "120 runs: failed 120"},
		{"damaged counts", out(runner.StateSkipped, runner.StateDamaged, runner.StateFailed), 2, "damaged: rb: boom"},
		{"held is no failure", out(runner.StateDone, runner.StateHeld), 0, "held: rb: boom"},
		{"interrupted wins", out(runner.StateFailed, runner.StateInterrupted, runner.StateNotStarted), exitInterrupted, "interrupted 1, not-started 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := runExit(&buf, c.sum)
			if got := codeOf(err); got != c.code {
				t.Errorf("exit %d, want %d (err %v)", got, c.code, err)
			}
			if !strings.Contains(buf.String(), c.printed) {
				t.Errorf("output lacks %q:\n%s", c.printed, buf.String())
			}
		})
	}
}

func codeOf(err error) int {
	if err == nil {
		return 0
	}
	return exitCode(err)
}

func TestNewReporterModes(t *testing.T) {
	var buf bytes.Buffer
	for _, m := range []string{"auto", "bars", "lines", "none"} {
		r, err := newReporter(m, &buf, 0)
		if err != nil || r == nil {
			t.Errorf("%s: %v", m, err)
			continue
		}
		r.Close()
	}
	if _, err := newReporter("fancy", &buf, 0); err == nil || !strings.Contains(err.Error(), `--progress "fancy"`) {
		t.Errorf("unknown mode: %v", err)
	}
}

// TestRunPaperWithoutModels: `marlow run seeds/paper.yaml` on a machine
// without the Qwen3 checkpoints, the data files or the torch engine's
// interpreter refuses quickly with one message listing all of them, and
// creates no run folder.
func TestRunPaperWithoutModels(t *testing.T) {
	empty := t.TempDir()
	runs := filepath.Join(t.TempDir(), "runs")
	env := []string{"MARLOW_MODELS=" + empty, "MARLOW_DATA=" + empty, "MARLOW_PYTHON=/nonexistent/python3"}
	t0 := time.Now()
	_, stderr, code := runCLI(t, env, "run", filepath.Join("..", "..", "seeds", "paper.yaml"), "--runs", runs, "--progress", "none")
	took := time.Since(t0)
	if code == 0 {
		t.Fatalf("run succeeded:\n%s", stderr)
	}
	if took > 5*time.Second {
		t.Errorf("refusal took %v, over 5 s", took)
	}
	for _, want := range []string{
		"nothing was run",
		filepath.Join(empty, "Qwen3-0.6B") + " (models.s): not found",
		filepath.Join(empty, "Qwen3-1.7B") + " (models.m): not found",
		filepath.Join(empty, "Qwen3-4B") + " (models.l): not found",
		filepath.Join(empty, "DAPO-Math-17k-Processed", "en", "train-00000-of-00001.parquet") + " not found",
		filepath.Join(empty, "DeepCoder-Preview-Dataset"),
		`Python interpreter "/nonexistent/python3"`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("message lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Count(stderr, "marlow:") > 1 {
		t.Errorf("more than one message:\n%s", stderr)
	}
	if _, err := os.Stat(runs); !os.IsNotExist(err) {
		t.Errorf("runs folder %s exists after the refusal (%v)", runs, err)
	}
}
