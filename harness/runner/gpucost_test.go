package runner

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/spec"
)

// The paper study's GPU cost: every checkpoint scale estimated from its
// size in the folder name, larger models costing more per run, the
// throughput and turn lengths labelled as stated, the upper end with
// completions as long as max_new_tokens above the central figure, and two
// first subsets (the base runs of one cell, then the cell) that match runs
// of the plan.
func TestEstimateGPUPaper(t *testing.T) {
	t.Setenv("MARLOW_MODELS", t.TempDir())
	t.Setenv("MARLOW_DATA", t.TempDir())
	_, runs := planOf(t, filepath.Join("..", "..", "seeds", "paper.yaml"))
	c := EstimateGPU(runs, GPUInputs{})
	if c == nil || len(c.Scales) != 3 || len(c.Unestimated) > 0 {
		t.Fatalf("cost %+v", c)
	}
	for i, sc := range c.Scales {
		if sc.Runs != 60 || sc.Trained != 42 || !(sc.Hours > sc.TrainedHours && sc.TrainedHours > 0 && sc.MaxHours > 2*sc.Hours) {
			t.Errorf("scale %s: %+v", sc.Scale, sc)
		}
		if i > 0 && sc.Hours <= c.Scales[i-1].Hours {
			t.Errorf("scale %s costs no more than %s", sc.Scale, c.Scales[i-1].Scale)
		}
	}
	if len(c.Subsets) != 2 || c.Subsets[0].Runs != 3 || c.Subsets[1].Runs != 10 || !(c.Subsets[0].Hours > 0) || c.Subsets[0].Hours >= c.Subsets[1].Hours {
		t.Errorf("subsets %+v", c.Subsets)
	}
	var b bytes.Buffer
	writeGPUCost(&b, c)
	for _, want := range []string{"throughput stated, not measured (docs/gpu-cost.md)", "turn lengths stated: 25% of max_new_tokens",
		"a trained run ", "a base run ", "first subset: --only '*-base-s-dapo-math-seed1'", "disk "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("cost lines lack %q:\n%s", want, b.String())
		}
	}
	if _, tiny := planOf(t, filepath.Join("..", "..", "seeds", "demo.yaml")); EstimateGPU(tiny, GPUInputs{}) != nil {
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

// docs/gpu-cost.md's table of figures states what the code computes: the
// stated throughputs and constants, and the hours and tokens of the
// reference runs of seeds/paper.yaml, rendered as the plan renders them.
// Every row is checked and no row is left unchecked.
func TestGPUCostDocMatchesCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "gpu-cost.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Figures\n")
	if !ok {
		t.Fatal("docs/gpu-cost.md has no Figures section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	doc := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 2 || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") || strings.TrimSpace(cells[0]) == "figure" {
			continue
		}
		doc[strings.TrimSpace(cells[0])] = strings.TrimSpace(cells[1])
	}

	want := map[string]string{
		"completion, share of max_new_tokens": fmt.Sprintf("%.0f%%", 100*StatedCompletionShare),
		"problem prompt, tokens":              fmt.Sprintf("%d", StatedProblemTokens),
		"band either way":                     fmt.Sprintf("%.0f%%", 100*StatedBand),
	}
	for _, p := range StatedGPU {
		size := fmt.Sprintf("%gB", p.Params/1e9)
		want["generated tok/s at "+size] = groupDigits(int64(p.GenTokS))
		want["trained tok/s at "+size] = groupDigits(int64(p.TrainTokS))
	}
	t.Setenv("MARLOW_MODELS", t.TempDir())
	t.Setenv("MARLOW_DATA", t.TempDir())
	_, runs := planOf(t, filepath.Join("..", "..", "seeds", "paper.yaml"))
	c := EstimateGPU(runs, GPUInputs{})
	byID := map[string]spec.Run{}
	for _, r := range runs {
		byID[r.ID] = r
	}
	const ref = "voting SP run on DAPO-Math at 0.6B (500 steps)"
	small, large := byID["voting-sp-s-dapo-math-seed1"], byID["voting-sp-l-dapo-math-seed1"]
	if small.Config.GRPO.Steps != 500 || c.Scales[0].Params != 0.6e9 || c.Scales[2].Params != 4e9 {
		t.Fatalf("the reference runs are not 500 steps at 0.6B and 4B: %d steps, scales %+v", small.Config.GRPO.Steps, c.Scales)
	}
	gen, train := checkpointRunTokens(small.Config, func(role string) float64 {
		return StatedCompletionShare * float64(small.Config.GRPO.MaxNewTokensFor(role))
	})
	want[ref+": generated tokens"] = fmt.Sprintf("%.2f G", gen/1e9)
	want[ref+": trained tokens"] = fmt.Sprintf("%.2f G", train/1e9)
	want[ref] = band(c.RunHours[small.ID])
	want["the same run at 4B"] = band(c.RunHours[large.ID])
	want[fmt.Sprintf("the paper study (seeds/paper.yaml, %d runs)", len(runs))] = band(c.Hours)

	for k, v := range want {
		if got, ok := doc[k]; !ok {
			t.Errorf("docs/gpu-cost.md's figures lack %q (the code says %s)", k, v)
		} else if got != v {
			t.Errorf("docs/gpu-cost.md says %q is %s, the code %s", k, got, v)
		}
	}
	for k := range doc {
		if _, ok := want[k]; !ok {
			t.Errorf("docs/gpu-cost.md states %q, which no code figure checks", k)
		}
	}
	// The model: ~130 h per 500-step 0.6B run with training and
	// ~250 h at 4B, each within the model's band.
	for _, r := range []struct {
		id    string
		hours float64
	}{{small.ID, 130}, {large.ID, 250}} {
		if h := c.RunHours[r.id]; math.Abs(h-r.hours) > StatedBand*r.hours {
			t.Errorf("%s: %.0f GPU-h, outside %.0f h +-%.0f%%", r.id, h, r.hours, 100*StatedBand)
		}
	}
}
