package runner

import (
	"fmt"
	"io"
	"math"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/harness/spec"
)

// The GPU cost model of `marlow plan`. docs/gpu-cost.md derives it in
// prose and states the same figures (TestGPUCostDocMatchesCode keeps the
// two equal); what follows is the model itself.
//
// A checkpoint run costs, on one GPU, its generated tokens at a generation
// throughput plus its trained sequence tokens (prompt and completion of
// every turn of every training rollout: GRPO trains only the groups whose
// rewards differ, so this is the upper end) at a training throughput.
// Validation rollouts are generated, not trained.
//
// Throughput. Without a node self-check file (`marlow bench node`) the figures
// are the stated ones below, for the torch engine as written (slot
// generation backend, bf16, LoRA rank 64 on every linear layer, an fp32
// head) on one H100/H200-class GPU, modelled over a paper step, not
// measured: at 0.6B generation is bound by per-step overhead (thousands
// of small kernels and serial host work a decode step, a KV pool that
// admits rows for their whole max_new_tokens reservation), not by memory
// bandwidth, so a larger model is slower by much less than its size.
// Between the stated sizes the throughput is interpolated on a log-log
// scale; below the smallest it is the smallest's (overhead does not
// shrink), above the largest it falls inversely with the parameter count
// (bandwidth- and compute-bound). With a self-check file, its measured
// figures replace the stated ones at the size it measured, and other
// sizes are scaled from there by the stated model's ratio.
//
// Turn lengths. A turn's completion is the mean completion length of its
// role in the finished base runs of the same scale and task (the base
// model's lengths: RL changes them as it trains), else the stated share of
// its max_new_tokens. A turn's prompt is the stated problem prompt plus
// every completion of the rollout's earlier role groups (the aggregator
// reads the voters', the synthesizer the workers'; an upper bound for
// turns that read only some of them). The plan also prints the upper end
// with every completion as long as max_new_tokens.
//
// Uncertainty: a central figure in hours with a band of ±StatedBand of it.

// GPUThroughput is the throughput of one model size on one GPU, in tokens
// per second.
type GPUThroughput struct {
	Params    float64 // parameters of the model
	GenTokS   float64 // generated tokens per second over a paper step
	TrainTokS float64 // trained sequence tokens per second (GRPO LoRA step)
}

// StatedGPU are the stated throughputs, smallest model first.
var StatedGPU = []GPUThroughput{
	{Params: 0.6e9, GenTokS: 3900, TrainTokS: 25000},
	{Params: 4e9, GenTokS: 2400, TrainTokS: 8000},
}

const (
	// StatedCompletionShare is the mean completion length as a share of
	// max_new_tokens when no base run has measured it: a review of the
	// engine found completions using ~25% of their reservation.
	StatedCompletionShare = 0.25
	// StatedProblemTokens is the prompt of a turn that reads no earlier
	// turn: chat template, role instructions and the problem.
	StatedProblemTokens = 300
	// StatedBand is the model's uncertainty, a share of the central
	// figure either way.
	StatedBand = 0.5
)

// statedThroughput is the stated model at params parameters.
func statedThroughput(params float64) GPUThroughput {
	first, last := StatedGPU[0], StatedGPU[len(StatedGPU)-1]
	switch {
	case params <= first.Params:
		return GPUThroughput{Params: params, GenTokS: first.GenTokS, TrainTokS: first.TrainTokS}
	case params >= last.Params:
		f := last.Params / params
		return GPUThroughput{Params: params, GenTokS: last.GenTokS * f, TrainTokS: last.TrainTokS * f}
	}
	for i := 1; i < len(StatedGPU); i++ {
		a, b := StatedGPU[i-1], StatedGPU[i]
		if params > b.Params {
			continue
		}
		x := math.Log(params/a.Params) / math.Log(b.Params/a.Params)
		lerp := func(u, v float64) float64 { return math.Exp(math.Log(u) + x*(math.Log(v)-math.Log(u))) }
		return GPUThroughput{Params: params, GenTokS: lerp(a.GenTokS, b.GenTokS), TrainTokS: lerp(a.TrainTokS, b.TrainTokS)}
	}
	return last
}

// GPUScale is the GPU cost of the runs of one checkpoint scale.
type GPUScale struct {
	Scale string
	GPUThroughput
	Runs, Trained int
	// Hours is the central estimate of all the scale's runs, TrainedHours
	// that of its trained runs alone; MaxHours is the same as Hours with
	// every completion as long as max_new_tokens.
	Hours, TrainedHours, MaxHours float64
}

// GPUCost is the GPU-hour estimate of a plan's checkpoint runs, one run
// per GPU.
type GPUCost struct {
	Throughput string // where the throughput comes from, in words
	Lengths    string // where the turn lengths come from, in words
	Scales     []GPUScale
	// Hours is the central estimate of every run, MaxHours with every
	// completion as long as max_new_tokens.
	Hours, MaxHours float64
	// RunHours is the central estimate of each run, by id.
	RunHours    map[string]float64
	Unestimated []string
	TotalBytes  int64
	// Subsets are the first --only globs suggested, smallest first.
	Subsets []Subset
}

// Subset is a suggested --only glob with its cost.
type Subset struct {
	Glob, What string
	Runs       int
	Hours      float64 // central estimate, GPU-hours
	Bytes      int64
}

var paramsInName = regexp.MustCompile(`(\d+(?:\.\d+)?)B$`)

// CheckpointParams counts a checkpoint's parameters from its config.json,
// or from a size in its folder name such as Qwen3-0.6B.
func CheckpointParams(dir string) (float64, bool) {
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

// GPUInputs are what EstimateGPU prices with beyond the plan: a node
// self-check's measurements and the turn lengths of finished base runs.
// The zero value prices from the stated model alone.
type GPUInputs struct {
	Check *NodeCheck // nil: stated throughput
	// Lengths are the measured mean completion tokens per role, by scale
	// and task (BaseLengths); a cell without them uses the stated share.
	Lengths map[CellKey]RoleLengths
	// LengthsFrom says where Lengths were read ("" when none were).
	LengthsFrom string
}

// CellKey names the runs of one scale and task.
type CellKey struct{ Scale, Task string }

// RoleLengths are mean completion tokens by role.
type RoleLengths map[string]RoleLength

// RoleLength is a role's mean completion tokens over N turns.
type RoleLength struct {
	Mean float64
	N    int
}

// throughputFor is the throughput of a run's scale at params parameters:
// the self-check's when it measured this model's size, else scaled from
// it by the stated model, else the stated model.
func (in GPUInputs) throughputFor(m spec.ModelConfig, params float64) GPUThroughput {
	st := statedThroughput(params)
	c := in.Check
	if c == nil {
		return st
	}
	gen, train := c.GenTokS(m.GenBackend), c.Train.TokS
	if gen <= 0 || train <= 0 {
		return st
	}
	ref := statedThroughput(c.Params)
	return GPUThroughput{Params: params, GenTokS: gen * st.GenTokS / ref.GenTokS, TrainTokS: train * st.TrainTokS / ref.TrainTokS}
}

// EstimateGPU estimates the GPU-hours of the plan's checkpoint runs (see
// the model above) and suggests first subsets: the base runs of the first
// cell (first task, first scale, seed 1), then every run of that cell. It
// returns nil when no run uses a checkpoint model.
func EstimateGPU(runs []spec.Run, in GPUInputs) *GPUCost {
	c := &GPUCost{Throughput: "stated, not measured (docs/gpu-cost.md)",
		Lengths: fmt.Sprintf("stated: %.0f%% of max_new_tokens (no finished base run to measure them)", 100*StatedCompletionShare)}
	if ch := in.Check; ch != nil {
		c.Throughput = fmt.Sprintf("measured on %s, %s (%s, %.2gB params; other sizes scaled by the stated model of docs/gpu-cost.md)",
			ch.GPU, ch.Date, filepath.Base(ch.Checkpoint), ch.Params/1e9)
	}
	if in.LengthsFrom != "" {
		c.Lengths = in.LengthsFrom
	}
	idx := map[string]int{}
	hours := map[string]float64{}
	c.RunHours = hours
	for _, r := range runs {
		c.TotalBytes += EstimateFootprint(r).Bytes()
		m := r.Config.Model
		if m.Tiny != nil {
			continue
		}
		i, ok := idx[r.Scale]
		if !ok {
			p, found := CheckpointParams(m.Checkpoint)
			if !found {
				idx[r.Scale] = -1
				c.Unestimated = append(c.Unestimated, fmt.Sprintf("%s (size of %s unknown)", r.Scale, m.Checkpoint))
				continue
			}
			c.Scales = append(c.Scales, GPUScale{Scale: r.Scale, GPUThroughput: in.throughputFor(m, p)})
			i = len(c.Scales) - 1
			idx[r.Scale] = i
		}
		if i < 0 {
			continue
		}
		sc := &c.Scales[i]
		h := runHours(r.Config, sc.GPUThroughput, in.Lengths[CellKey{r.Scale, r.Config.Data.Task}], StatedCompletionShare)
		hmax := runHours(r.Config, sc.GPUThroughput, nil, 1)
		hours[r.ID] = h
		sc.Runs++
		sc.Hours += h
		sc.MaxHours += hmax
		if r.Config.Train {
			sc.Trained++
			sc.TrainedHours += h
		}
		c.Hours += h
		c.MaxHours += hmax
	}
	if len(c.Scales) == 0 && len(c.Unestimated) == 0 {
		return nil
	}
	if len(runs) > 0 {
		first := runs[0]
		cell := fmt.Sprintf("%s-%s-seed%d", first.Scale, first.Task, first.SeedIndex)
		for _, g := range []struct{ glob, what string }{
			{"*-base-" + cell, "the base runs of one cell, seed 1 (validation only: checks the pipeline and measures the turn lengths)"},
			{"*-" + cell, "every workflow and condition of that cell"},
		} {
			sub := Subset{Glob: g.glob, What: g.what}
			for _, r := range runs {
				if ok, _ := path.Match(g.glob, r.ID); ok {
					sub.Runs++
					sub.Bytes += EstimateFootprint(r).Bytes()
					sub.Hours += hours[r.ID]
				}
			}
			c.Subsets = append(c.Subsets, sub)
		}
	}
	return c
}

// runHours is the GPU-hours of one run at throughput tp: completions of
// the measured mean length of their role where ls has it, else share of
// their max_new_tokens.
func runHours(c spec.RunConfig, tp GPUThroughput, ls RoleLengths, share float64) float64 {
	gen, train := checkpointRunTokens(c, func(role string) float64 {
		maxNew := float64(c.GRPO.MaxNewTokensFor(role))
		if l, ok := ls[role]; ok && l.N > 0 {
			return min(l.Mean, maxNew)
		}
		return share * maxNew
	})
	return (gen/tp.GenTokS + train/tp.TrainTokS) / 3600
}

// checkpointRunTokens is the generated tokens and the trained sequence
// tokens of one run of a checkpoint model, with completions of comp(role)
// tokens and prompts of StatedProblemTokens plus the completions of the
// rollout's earlier role groups.
func checkpointRunTokens(c spec.RunConfig, comp func(role string) float64) (gen, train float64) {
	rollout := func(w string) (gen, seq float64) {
		earlier := 0.0
		for _, t := range workflowTurns(w, c.WorkflowSet) {
			n, l := float64(t.N), comp(t.Role)
			gen += n * l
			seq += n * (StatedProblemTokens + earlier + l)
			earlier += n * l
		}
		return gen, seq
	}
	return runTotals(c, rollout)
}

// band renders a central figure in GPU-hours with the model's band.
func band(h float64) string {
	return fmt.Sprintf("%s GPU-h (%s to %s)", gpuHours(h), gpuHours(h*(1-StatedBand)), gpuHours(h*(1+StatedBand)))
}

// writeGPUCost writes the cost lines of `marlow plan`.
func writeGPUCost(w io.Writer, c *GPUCost) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\nestimated GPU cost (one run per GPU, every turn trained, +-%.0f%%; model: docs/gpu-cost.md):\n", 100*StatedBand)
	fmt.Fprintf(w, "  throughput %s\n  turn lengths %s\n", c.Throughput, c.Lengths)
	for _, sc := range c.Scales {
		var per []string
		if sc.Trained > 0 {
			per = append(per, "a trained run "+band(sc.TrainedHours/float64(sc.Trained)))
		}
		if n := sc.Runs - sc.Trained; n > 0 {
			per = append(per, "a base run "+band((sc.Hours-sc.TrainedHours)/float64(n)))
		}
		fmt.Fprintf(w, "  %s (%.2gB params; %s generated and %s trained tok/s): %d runs; %s; in all %s, up to %s GPU-h with every completion as long as max_new_tokens\n",
			sc.Scale, sc.Params/1e9, groupDigits(int64(sc.GenTokS+0.5)), groupDigits(int64(sc.TrainTokS+0.5)), sc.Runs,
			strings.Join(per, ", "), band(sc.Hours), gpuHours(sc.MaxHours))
	}
	fmt.Fprintf(w, "  total: %s, up to %s GPU-h with every completion as long as max_new_tokens; disk %s\n", band(c.Hours), gpuHours(c.MaxHours), HumanBytes(c.TotalBytes))
	for _, u := range c.Unestimated {
		fmt.Fprintf(w, "  not estimated: %s\n", u)
	}
	for i, sub := range c.Subsets {
		lead := "  first subset:"
		if i > 0 {
			lead = "  then:"
		}
		fmt.Fprintf(w, "%s --only '%s', %s: %d runs, %s, %s\n", lead, sub.Glob, sub.What, sub.Runs, band(sub.Hours), HumanBytes(sub.Bytes))
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
