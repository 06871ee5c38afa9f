package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/tensorboard"
)

// The event file `marlow run --tensorboard` appends commit by commit (the
// reporter syncs after every step, also between commits, and once more at
// the end) is byte-identical to what `marlow tensorboard` writes from the
// finished logs.
func TestTensorboardLiveMatchesExport(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs", "exp")
	dir := filepath.Join(runs, "r")
	live, after := t.TempDir(), t.TempDir()
	rep := newTBReporter(runner.NewLines(io.Discard, time.Hour), live, func(id string) string { return filepath.Join(runs, id) })
	w, _, err := runlog.Open(dir, runlog.Manifest{RunID: "r", Experiment: "exp", Workflow: "voting", EvalWorkflows: []string{"voting"},
		Task: "synth-math", Scale: "s", Condition: "sp", ConfigHash: "h", TotalSteps: 6})
	if err != nil {
		t.Fatal(err)
	}
	rep.Started("r", 6, -1)
	for step := int64(0); step <= 6; step++ {
		if step > 0 {
			for _, role := range []string{"*", "generator", "aggregator"} {
				if err := w.AddSteps(runlog.StepRow{Step: step, Policy: "shared", Role: role, RewardMean: 0.1 * float64(step), GradNorm: float64(step),
					GradShare: 0.5, KL: 0.01, Entropy: 1, MeanLen: 20, AgentCosMean: math.NaN(), AgentCosMin: math.NaN()}); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.AddTiming(runlog.TimingRow{Step: step, TotalSec: 1.5}); err != nil {
				t.Fatal(err)
			}
		}
		if step%3 == 0 {
			if err := w.AddEvals(runlog.EvalRow{Step: step, Workflow: "voting", Split: "val", Role: "*", Accuracy: 0.2 + 0.01*float64(step), FormatRate: 0.9, SelectionAcc: math.NaN()}); err != nil {
				t.Fatal(err)
			}
			if err := w.Commit(step); err != nil {
				t.Fatal(err)
			}
		}
		rep.Step("r", grpo.Progress{Step: int(step), Steps: 6})
	}
	if err := w.SetStatus(runlog.StatusDone, ""); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rep.Finished("r", runner.StateDone, nil)

	if _, _, err := execCLI(t, "tensorboard", runs, after); err != nil {
		t.Fatal(err)
	}
	m, err := runlog.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join("r", tensorboard.FileName(m))
	a, err := os.ReadFile(filepath.Join(live, name))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(after, name))
	if err != nil {
		t.Fatal(err)
	}
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("live event file %d bytes, exported %d bytes; want the same bytes", len(a), len(b))
	}
	if _, _, err := execCLI(t, "tensorboard", runs, after, "--only", "nothing-*"); err == nil || !strings.Contains(err.Error(), "no runs") {
		t.Errorf("--only matching nothing: err %v", err)
	}
}
