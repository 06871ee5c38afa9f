package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
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
	c.Workflow = rc.Workflow
	c.EvalWorkflows = append([]string(nil), rc.EvalWorkflows...)

	c.NVotes = rc.WorkflowSet.NVotes
	c.MaxIterations = rc.WorkflowSet.MaxIterations
	c.MaxSubtasks = rc.WorkflowSet.MaxSubtasks

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

	c.EvalEvery = rc.Eval.Every
	c.EvalBeforeTraining = rc.Eval.BeforeTraining
	c.ValSize = rc.Eval.ValSize
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

// ConfigDiff compares two run configs (a decoded manifest config, a
// spec.RunConfig, or anything that encodes to a JSON object) and returns one
// line per differing key path, sorted, as "path: old -> new" (a key present
// on one side only reads "(absent)" on the other).
func ConfigDiff(old, cur any) ([]string, error) {
	a, err := flatten(old)
	if err != nil {
		return nil, fmt.Errorf("config diff: old config: %w", err)
	}
	b, err := flatten(cur)
	if err != nil {
		return nil, fmt.Errorf("config diff: new config: %w", err)
	}
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	sorted := slices.Sorted(maps.Keys(keys))
	var out []string
	for _, k := range sorted {
		va, oka := a[k]
		vb, okb := b[k]
		if oka && okb && va == vb {
			continue
		}
		if !oka {
			va = "(absent)"
		}
		if !okb {
			vb = "(absent)"
		}
		out = append(out, fmt.Sprintf("%s: %s -> %s", k, va, vb))
	}
	return out, nil
}

// flatten encodes v as JSON and returns its leaves keyed by dotted path
// (array elements as path[i]); each value is its canonical JSON text.
func flatten(v any) (map[string]string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func(prefix string, x any) error
	walk = func(prefix string, x any) error {
		switch t := x.(type) {
		case map[string]any:
			if len(t) == 0 && prefix != "" {
				out[prefix] = "{}"
			}
			for k, v := range t {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				if err := walk(p, v); err != nil {
					return err
				}
			}
		case []any:
			if len(t) == 0 {
				out[prefix] = "[]"
			}
			for i, v := range t {
				if err := walk(fmt.Sprintf("%s[%d]", prefix, i), v); err != nil {
					return err
				}
			}
		default:
			b, err := spec.CanonicalJSON(t)
			if err != nil {
				return err
			}
			out[prefix] = string(b)
		}
		return nil
	}
	if err := walk("", generic); err != nil {
		return nil, err
	}
	return out, nil
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
