package runner

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/runlog"
)

// A node self-check file prices the runs from its measured figures at the
// size it measured (twice the stated throughput: half the hours) and
// scales the other sizes by the stated model's ratios, and the plan says
// where the figures come from; a check without a generation figure for the
// runs' backend falls back to the stated model.
func TestEstimateGPUMeasured(t *testing.T) {
	t.Setenv("MARLOW_MODELS", t.TempDir())
	t.Setenv("MARLOW_DATA", t.TempDir())
	_, runs := planOf(t, filepath.Join("..", "..", "seeds", "paper.yaml"))
	stated := EstimateGPU(runs, GPUInputs{})
	s0 := StatedGPU[0]
	check := &NodeCheck{Version: NodeCheckVersion, GPU: "NVIDIA H200", Date: "2026-12-05", Checkpoint: "/m/Qwen3-0.6B", Params: 0.6e9,
		Generate: map[string]Rate{"slots": {TokS: 2 * s0.GenTokS}, "reference": {TokS: s0.GenTokS / 10}}, Train: Rate{TokS: 2 * s0.TrainTokS}}
	measured := EstimateGPU(runs, GPUInputs{Check: check})
	for i := range measured.Scales {
		if r := measured.Scales[i].Hours / stated.Scales[i].Hours; math.Abs(r-0.5) > 1e-9 {
			t.Errorf("scale %s: measured/stated hours %.4f, want 0.5", measured.Scales[i].Scale, r)
		}
	}
	var b bytes.Buffer
	writeGPUCost(&b, measured)
	if !strings.Contains(b.String(), "throughput measured on NVIDIA H200, 2026-12-05 (Qwen3-0.6B, 0.6B params;") {
		t.Errorf("the plan does not say where the throughput comes from:\n%s", b.String())
	}
	delete(check.Generate, "slots")
	if got := EstimateGPU(runs, GPUInputs{Check: check}); got.Hours != stated.Hours {
		t.Errorf("a check without the slot backend's figure priced the runs at %.0f GPU-h, the stated model at %.0f", got.Hours, stated.Hours)
	}

	// the file: written, read back, refused when it is not a check
	dir := t.TempDir()
	file := filepath.Join(dir, NodeCheckFile)
	if c, err := ReadNodeCheck(file); c != nil || err != nil {
		t.Fatalf("a missing file: %v, %v", c, err)
	}
	check.Generate["slots"] = Rate{TokS: 1234, Tokens: 5, Seconds: 1, Workload: "w"}
	if err := WriteNodeCheck(file, check); err != nil {
		t.Fatal(err)
	}
	back, err := ReadNodeCheck(file)
	if err != nil || back.GenTokS("") != 1234 || back.GPU != check.GPU {
		t.Fatalf("read back %+v, %v", back, err)
	}
	for name, text := range map[string]string{"not JSON": "{", "another version": `{"version": 99}`, "no gpu": `{"version": 1, "date": "x", "params": 1}`} {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadNodeCheck(file); err == nil || !strings.Contains(err.Error(), "run marlow bench node again") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Finished base runs give the turn lengths of their cell: the mean
// completion tokens of each role over the validation turns (not the final
// answers), and the cell's runs are priced from them; an unfinished base
// run is not read.
func TestBaseLengths(t *testing.T) {
	t.Setenv("MARLOW_MODELS", t.TempDir())
	t.Setenv("MARLOW_DATA", t.TempDir())
	s, runs := planOf(t, filepath.Join("..", "..", "seeds", "paper.yaml"))
	root := t.TempDir()
	write := func(id string, status string, tokens map[string][]int64) {
		t.Helper()
		var r0 = runs[0]
		for _, r := range runs {
			if r.ID == id {
				r0 = r
			}
		}
		w, _, err := runlog.Open(RunDir(root, s.Experiment, id), runlog.Manifest{RunID: id, Experiment: s.Experiment, Workflow: r0.Workflow,
			EvalWorkflows: r0.EvalWorkflows, Task: r0.Task, Scale: r0.Scale, Condition: r0.Condition, ConfigHash: r0.ConfigHash, Engine: "torch"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var rows []runlog.SampleRow
		for role, ts := range tokens {
			for i, n := range ts {
				rows = append(rows, runlog.SampleRow{RunID: id, Workflow: r0.Workflow, Split: "val", ProblemID: "p", Rollout: int64(i), Agent: role + "1", Role: role, Prompt: "q", Tokens: n})
			}
		}
		rows = append(rows, runlog.SampleRow{RunID: id, Workflow: r0.Workflow, Split: "val", ProblemID: "p", Agent: "final", Role: "final", Tokens: 0})
		if err := w.AddSamples(rows...); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(0); err != nil {
			t.Fatal(err)
		}
		if status != "" {
			if err := w.SetStatus(status, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("voting-base-s-dapo-math-seed1", runlog.StatusDone, map[string][]int64{"generator": {100, 300}, "aggregator": {50}})
	write("voting-base-s-deepcoder-seed1", "", map[string][]int64{"generator": {7}})
	ls, from, err := BaseLengths(root, s.Experiment, runs)
	if err != nil {
		t.Fatal(err)
	}
	cell := ls[CellKey{"s", "dapo-math"}]
	if len(ls) != 1 || cell["generator"] != (RoleLength{200, 2}) || cell["aggregator"] != (RoleLength{50, 1}) || len(cell) != 2 {
		t.Fatalf("lengths %+v", ls)
	}
	if !strings.Contains(from, "measured: mean completion of each role in 1 finished base run under") || !strings.Contains(from, "s-dapo-math") {
		t.Errorf("lengths from %q", from)
	}
	stated := EstimateGPU(runs, GPUInputs{})
	got := EstimateGPU(runs, GPUInputs{Lengths: ls, LengthsFrom: from})
	for _, id := range []string{"voting-sp-s-dapo-math-seed1", "voting-sp-s-deepcoder-seed1", "voting-sp-m-dapo-math-seed1"} {
		measuredCell := strings.HasSuffix(id, "s-dapo-math-seed1")
		if lower := got.RunHours[id] < stated.RunHours[id]; lower != measuredCell {
			t.Errorf("%s: %.1f GPU-h from the base run's lengths, %.1f stated", id, got.RunHours[id], stated.RunHours[id])
		}
	}
	if none, from, err := BaseLengths(t.TempDir(), s.Experiment, runs); none != nil || from != "" || err != nil {
		t.Errorf("no runs: %v %q %v", none, from, err)
	}
}
