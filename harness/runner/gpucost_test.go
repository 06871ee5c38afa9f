package runner

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// The paper study's GPU cost: every checkpoint scale estimated from its
// size in the folder name, larger models costing more per run, the
// throughput labelled as stated, and two first subsets (the base runs of
// one cell, then the cell) that match runs of the plan.
func TestEstimateGPUPaper(t *testing.T) {
	t.Setenv("MARLOW_MODELS", t.TempDir())
	t.Setenv("MARLOW_DATA", t.TempDir())
	_, runs := planOf(t, filepath.Join("..", "..", "seeds", "paper.yaml"))
	c := EstimateGPU(runs)
	if c == nil || len(c.Scales) != 3 || len(c.Unestimated) > 0 {
		t.Fatalf("cost %+v", c)
	}
	for i, sc := range c.Scales {
		if sc.Runs != 60 || !(sc.Low > 0 && sc.High >= sc.Low) {
			t.Errorf("scale %s: %+v", sc.Scale, sc)
		}
		if i > 0 && sc.High/float64(sc.Runs) <= c.Scales[i-1].High/float64(c.Scales[i-1].Runs) {
			t.Errorf("scale %s costs no more per run than %s", sc.Scale, c.Scales[i-1].Scale)
		}
	}
	if len(c.Subsets) != 2 || c.Subsets[0].Runs != 3 || c.Subsets[1].Runs != 10 || c.Subsets[0].High >= c.Subsets[1].High {
		t.Errorf("subsets %+v", c.Subsets)
	}
	var b bytes.Buffer
	writeGPUCost(&b, c)
	for _, want := range []string{"stated, not measured", "GPU-h per run", "first subset: --only '*-base-s-dapo-math-seed1'", "disk "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("cost lines lack %q:\n%s", want, b.String())
		}
	}
	if _, tiny := planOf(t, filepath.Join("..", "..", "seeds", "demo.yaml")); EstimateGPU(tiny) != nil {
		t.Error("a tiny-model plan has a GPU cost")
	}
}

// What the preflight lists as missing for the paper study comes with the
// command that fetches it.
func TestNeedsSayHowToFetch(t *testing.T) {
	t.Setenv("MARLOW_MODELS", t.TempDir())
	t.Setenv("MARLOW_DATA", t.TempDir())
	_, runs := planOf(t, filepath.Join("..", "..", "seeds", "paper.yaml"))
	lines := Needs(t.Context(), runs)
	if len(lines) != 5 {
		t.Fatalf("%d missing, want 3 checkpoints and 2 data sets: %q", len(lines), lines)
	}
	for _, l := range lines {
		if !strings.Contains(l, "; download it: huggingface-cli download ") || !strings.Contains(l, "--local-dir ") {
			t.Errorf("no download command: %s", l)
		}
	}
}
