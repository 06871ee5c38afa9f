package runner

import (
	"fmt"
	"io"
	"path"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/harness/spec"
)

// Stated throughput of a checkpoint model on one GPU, for the cost
// estimate of `marlow plan` when nothing was measured: these are
// assumptions, not measurements (no paper run has been made), for the
// torch engine's transformers generation loop and LoRA training on a
// 0.6B model, and scale inversely with the parameter count.
const (
	StatedGenTokS   = 1000  // generated tokens per second, 0.6B
	StatedTrainTokS = 10000 // trained sequence tokens per second, 0.6B
	statedParams    = 0.6e9
)

// GPUScale is the GPU cost of the runs of one checkpoint scale.
type GPUScale struct {
	Scale              string
	Params             float64 // parameters of the base model
	GenTokS, TrainTokS float64 // the throughput assumed
	Runs               int
	// Low and High are GPU-hours of all the scale's runs: generation
	// alone, and every turn trained too.
	Low, High float64
}

// GPUCost is the GPU-hour estimate of a plan's checkpoint runs, one run
// per GPU, with every turn as long as max_new_tokens allows (an upper
// bound on generation; prompts are not counted).
type GPUCost struct {
	Source      string // how the throughput was obtained
	Scales      []GPUScale
	Low, High   float64 // GPU-hours, all runs
	Unestimated []string
	TotalBytes  int64
	// Subsets are the first --only globs suggested, smallest first.
	Subsets []Subset
}

// Subset is a suggested --only glob with its cost.
type Subset struct {
	Glob, What string
	Runs       int
	Low, High  float64 // GPU-hours
	Bytes      int64
}

// subset costs the runs matching glob.
func (c *GPUCost) subset(runs []spec.Run, idx map[string]int, glob, what string) Subset {
	sub := Subset{Glob: glob, What: what}
	for _, r := range runs {
		if ok, _ := path.Match(glob, r.ID); !ok {
			continue
		}
		sub.Runs++
		sub.Bytes += EstimateFootprint(r).Bytes()
		if i, ok := idx[r.Scale]; ok && i >= 0 && r.Config.Model.Tiny == nil {
			sc := c.Scales[i]
			gen, train := runTokens(r.Config, nil)
			sub.Low += gen / sc.GenTokS / 3600
			sub.High += gen/sc.GenTokS/3600 + train/sc.TrainTokS/3600
		}
	}
	return sub
}

var paramsInName = regexp.MustCompile(`(\d+(?:\.\d+)?)B$`)

// checkpointParams counts a checkpoint's parameters from its config.json,
// or from a size in its folder name such as Qwen3-0.6B.
func checkpointParams(dir string) (float64, bool) {
	if c, err := model.LoadConfig(filepath.Join(dir, model.ConfigFile)); err == nil {
		h, inter, l := float64(c.HiddenSize), float64(c.IntermediateSize), float64(c.NumHiddenLayers)
		att := h*float64(c.NumAttentionHeads*c.HeadDim)*2 + h*float64(c.NumKeyValueHeads*c.HeadDim)*2
		return l*(att+3*h*inter) + float64(c.VocabSize)*h, true
	}
	if m := paramsInName.FindStringSubmatch(filepath.Base(dir)); m != nil {
		if v, err := strconv.ParseFloat(m[1], 64); err == nil {
			return v * 1e9, true
		}
	}
	return 0, false
}

// EstimateGPU estimates the GPU-hours of the plan's checkpoint runs at the
// stated throughput, and suggests first subsets: the base runs of the
// first cell (first task, first scale, seed 1), then every run of that
// cell. It returns nil when no run uses
// a checkpoint model.
func EstimateGPU(runs []spec.Run) *GPUCost {
	c := &GPUCost{Source: fmt.Sprintf("stated, not measured: %d generated and %d trained tok/s on one GPU for a 0.6B model, inversely with size", StatedGenTokS, StatedTrainTokS)}
	idx := map[string]int{}
	for _, r := range runs {
		c.TotalBytes += EstimateFootprint(r).Bytes()
		m := r.Config.Model
		if m.Tiny != nil {
			continue
		}
		i, ok := idx[r.Scale]
		if !ok {
			p, found := checkpointParams(m.Checkpoint)
			if !found {
				idx[r.Scale] = -1
				c.Unestimated = append(c.Unestimated, fmt.Sprintf("%s (size of %s unknown)", r.Scale, m.Checkpoint))
				continue
			}
			f := statedParams / p
			c.Scales = append(c.Scales, GPUScale{Scale: r.Scale, Params: p, GenTokS: StatedGenTokS * f, TrainTokS: StatedTrainTokS * f})
			i = len(c.Scales) - 1
			idx[r.Scale] = i
		}
		if i < 0 {
			continue
		}
		sc := &c.Scales[i]
		gen, train := runTokens(r.Config, nil)
		lo := gen / sc.GenTokS / 3600
		hi := lo + train/sc.TrainTokS/3600
		sc.Runs++
		sc.Low, sc.High = sc.Low+lo, sc.High+hi
		c.Low, c.High = c.Low+lo, c.High+hi
	}
	if len(c.Scales) == 0 && len(c.Unestimated) == 0 {
		return nil
	}
	if len(runs) > 0 {
		first := runs[0]
		cell := fmt.Sprintf("%s-%s-seed%d", first.Scale, first.Task, first.SeedIndex)
		for _, g := range []struct{ glob, what string }{
			{"*-base-" + cell, "the base runs of one cell, seed 1 (validation only: checks the pipeline)"},
			{"*-" + cell, "every workflow and condition of that cell"},
		} {
			c.Subsets = append(c.Subsets, c.subset(runs, idx, g.glob, g.what))
		}
	}
	return c
}

// writeGPUCost writes the cost lines of `marlow plan`.
func writeGPUCost(w io.Writer, c *GPUCost) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\nestimated GPU cost (one run per GPU; turns as long as max_new_tokens allows; throughput %s):\n", c.Source)
	for _, sc := range c.Scales {
		fmt.Fprintf(w, "  %s (%.1fB params): %d runs, %s to %s GPU-h per run, %s to %s GPU-h in all\n", sc.Scale, sc.Params/1e9, sc.Runs,
			gpuHours(sc.Low/float64(sc.Runs)), gpuHours(sc.High/float64(sc.Runs)), gpuHours(sc.Low), gpuHours(sc.High))
	}
	fmt.Fprintf(w, "  total: %s to %s GPU-h (generation alone to every turn trained), disk %s\n", gpuHours(c.Low), gpuHours(c.High), HumanBytes(c.TotalBytes))
	for _, u := range c.Unestimated {
		fmt.Fprintf(w, "  not estimated: %s\n", u)
	}
	for i, sub := range c.Subsets {
		lead := "  first subset:"
		if i > 0 {
			lead = "  then:"
		}
		fmt.Fprintf(w, "%s --only '%s', %s: %d runs, %s to %s GPU-h, %s\n",
			lead, sub.Glob, sub.What, sub.Runs, gpuHours(sub.Low), gpuHours(sub.High), HumanBytes(sub.Bytes))
	}
}

// gpuHours renders GPU-hours with two significant digits and thousands
// separators.
func gpuHours(h float64) string {
	switch {
	case h >= 100:
		return groupDigits(int64(h + 0.5))
	case h >= 10:
		return fmt.Sprintf("%.0f", h)
	}
	return fmt.Sprintf("%.2g", h)
}

func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
