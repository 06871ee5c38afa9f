package runner

import (
	"fmt"
	"strings"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/spec"
)

// DefaultMaxNewTokensKey is the key of spec's grpo.max_new_tokens that
// holds the budget of roles without their own entry.
const DefaultMaxNewTokensKey = "default"

// TrainerConfig maps a run's resolved spec config onto the GRPO loop's
// config. Every knob of the grpo, workflow_settings, eval and checkpoint
// sections reaches the loop; the data and model sections are used by
// OpenTask and the engine, and analysis goes to the manifest (see
// AnalysisParams).
func TrainerConfig(rc spec.RunConfig) grpo.Config {
	g := rc.GRPO
	c := grpo.Config{AdvEps: grpo.AdvEps}
	c.RunID = rc.ID
	c.Seed = rc.Seed
	c.ValSeed = rc.ValSeed
	c.Condition = rc.Condition
	c.Routing = rc.Routing
	c.Workflow = rc.Workflow
	c.EvalWorkflows = append([]string(nil), rc.EvalWorkflows...)

	c.Settings = rc.WorkflowSet

	c.Rollouts = g.Rollouts
	c.ProblemsPerStep = g.ProblemsPerStep
	c.Steps = g.Steps
	if !rc.Train {
		c.Steps = 0
	}
	c.LR = g.LR
	c.Schedule = engine.Schedule{Kind: g.Schedule, Warmup: g.WarmupSteps, Total: g.Steps, MinRatio: g.MinLRRatio}
	c.ClipLow = g.ClipLow
	c.ClipHigh = g.ClipHigh
	c.LossAgg = g.LossAgg
	c.Temperature = g.Temperature
	c.MaxNewTokens = map[string]int{}
	c.DefaultMaxNewTokens = 0
	for role, n := range g.MaxNewTokens {
		if role == DefaultMaxNewTokensKey {
			c.DefaultMaxNewTokens = n
			continue
		}
		c.MaxNewTokens[role] = n
	}
	c.Beta1 = g.Adam.Beta1
	c.Beta2 = g.Adam.Beta2
	c.AdamEps = g.Adam.Eps
	c.WeightDecay = g.Adam.WeightDecay
	c.GradClip = g.GradClip
	c.KLCoef = map[string]float64{}
	for role, k := range g.KLCoef {
		c.KLCoef[role] = k
	}
	c.Adapter = engine.AdapterConfig{Rank: g.Lora.Rank, Alpha: g.Lora.Alpha, Targets: append([]string(nil), g.Lora.Targets...)}
	c.SamplesPerStep = g.SamplesPerStep
	if g.Coherence != nil {
		c.Coherence = &engine.Coherence{Lambda: g.Coherence.Lambda, EMADecay: g.Coherence.EMADecay, Form: g.Coherence.Form}
	}

	c.EvalEvery = rc.Eval.Every
	c.EvalBeforeTraining = rc.Eval.BeforeTraining
	c.ValSize = rc.Eval.ValSize
	c.FirstValSize = rc.Eval.FirstValSize
	c.ValSamples = rc.Eval.Samples
	c.SaveEvery = rc.Checkpoint.Every
	return c
}

// AnalysisParams returns the spec's analysis parameters as the manifest's
// name -> value map, keyed by their YAML names.
func AnalysisParams(a spec.Analysis) map[string]float64 {
	return map[string]float64{
		"cliff_abs":           a.CliffAbs,
		"cliff_rel":           a.CliffRel,
		"amp_k":               a.AmpK,
		"amp_cos":             a.AmpCos,
		"early_frac":          a.EarlyFrac,
		"capture_format_drop": a.CaptureFormatDrop,
		"ngram":               float64(a.NGram),
		"bootstrap":           float64(a.Bootstrap),
		"bootstrap_seed":      float64(a.BootstrapSeed),
		"ci":                  a.CI,
	}
}

// mismatchMessage describes a run folder whose config differs from the plan.
func mismatchMessage(id, dir, oldHash, newHash string, diff []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s: %s holds config %s but the spec now gives %s", id, dir, short(oldHash), short(newHash))
	if len(diff) == 0 {
		b.WriteString(" (no key differs; the config encoding changed)")
	} else {
		fmt.Fprintf(&b, "; differing keys:")
		for _, d := range diff {
			b.WriteString("\n    ")
			b.WriteString(d)
		}
	}
	return b.String()
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
