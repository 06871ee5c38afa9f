package enginecheck

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"

	"github.com/marlowlab/marlow/harness/engine"
)

// The settings a routing gives an adapter (study.Routing) reach the engines
// as a train step's options and as the adapter a request names, so each
// engine is checked to honour them: a role routed to the frozen base model
// samples and scores with no adapter, whose log-probs and completions must
// not move however the adapters train; a learning-rate multiplier scales
// the update (the first AdamW step from zero moments is linear in the
// rate); a KL coefficient changes it (from the seeded adapter, which is not
// the base policy, so the KL term has a gradient).

// Routing checks of one run of the check.
const (
	// RoutingLRMult is the learning-rate multiplier checked.
	RoutingLRMult = 0.5
	// RoutingKLCoef is the generator's KL coefficient of the checked KL
	// step (the plain step has none for it).
	RoutingKLCoef = 1.0
	// RoutingKLMinChange is the smallest relative change of the update the
	// KL coefficient must make, |Δ_kl - Δ| / |Δ|.
	RoutingKLMinChange = 1e-3
)

// RoutingEngine holds the routing figures of one engine.
type RoutingEngine struct {
	Engine string
	// BaseLogProb is the largest |Δ log-prob| of the base policy (no
	// adapter) across the adapter's three train steps; BaseSamples the
	// base-policy completions whose tokens or log-probs changed, of
	// Samples. Both must be 0.
	BaseLogProb          float64
	BaseSamples, Samples int
	// LRRatio is the update at RoutingLRMult x lr against the plain one,
	// <Δ, Δp>/|Δp|², and LRResidual |Δ - m Δp| / |m Δp|.
	LRRatio, LRResidual float64
	// KLChange is |Δ_kl - Δp| / |Δp|, the update with the generator's KL
	// coefficient at RoutingKLCoef against the plain one.
	KLChange float64
	// KLLoss is the total loss of the KL step.
	KLLoss float64
}

// Routing holds the routing figures of both engines.
type Routing struct {
	Engines []RoutingEngine
	// KLLossRel is the relative difference of the KL step's loss, torch
	// against native.
	KLLossRel float64
}

func (r Routing) failures(fp32 bool, tol float64) []string {
	var out []string
	if len(r.Engines) == 0 {
		return []string{"routing: not checked"}
	}
	for _, e := range r.Engines {
		if e.BaseLogProb != 0 || e.BaseSamples != 0 || e.Samples == 0 {
			out = append(out, fmt.Sprintf("routing, %s: the frozen base policy moved while an adapter trained (max |Δ log-prob| %.3g, %d of %d completions changed), want none",
				e.Engine, e.BaseLogProb, e.BaseSamples, e.Samples))
		}
		if !fp32 {
			continue
		}
		if !(math.Abs(e.LRRatio-RoutingLRMult) <= tol) || !(e.LRResidual <= tol) {
			out = append(out, fmt.Sprintf("routing, %s: the update at lr x%g is %.6g of the plain one (residual %.3g), want %g within %.3g",
				e.Engine, RoutingLRMult, e.LRRatio, e.LRResidual, RoutingLRMult, tol))
		}
		if !(e.KLChange > RoutingKLMinChange) {
			out = append(out, fmt.Sprintf("routing, %s: a KL coefficient of %g changed the update by %.3g of its length, want more than %.3g",
				e.Engine, RoutingKLCoef, e.KLChange, RoutingKLMinChange))
		}
	}
	if fp32 && !(r.KLLossRel <= tol) {
		out = append(out, fmt.Sprintf("routing: the KL step's loss differs by %.3g relative between the engines, want within %.3g", r.KLLossRel, tol))
	}
	return out
}

func (r Routing) print(w io.Writer) {
	for _, e := range r.Engines {
		fmt.Fprintf(w, "  routing, %-6s frozen base: max |Δ log-prob| %.3g, %d of %d completions changed (must be 0)\n", e.Engine, e.BaseLogProb, e.BaseSamples, e.Samples)
		fmt.Fprintf(w, "  routing, %-6s lr x%g: update ratio %.6g, residual %.3g; kl_coef %g: update changed by %.3g\n",
			e.Engine, RoutingLRMult, e.LRRatio, e.LRResidual, RoutingKLCoef, e.KLChange)
	}
	fmt.Fprintf(w, "  routing, relative Δ loss of the KL step:    %.3g\n", r.KLLossRel)
}

// baseRequests are sampled with no adapter before and after the steps.
func baseRequests() []engine.Request {
	var out []engine.Request
	for i, q := range []string{"What is 3+4?", "Candidates: 1) 7 2) 8. Select one.", "Is 12 correct for 5+7?"} {
		out = append(out, engine.Request{Messages: []engine.Message{{Role: "user", Content: q}}, MaxNewTokens: 16, Temperature: 0.7, Seed: uint64(100 + i)})
	}
	return out
}

// routing runs routingOne on each engine and compares their KL steps.
func (c *check) routing(ctx context.Context, r *Report) error {
	before, err := readFlat(c.cfg, c.seeded)
	if err != nil {
		return fmt.Errorf("routing: %w", err)
	}
	for _, e := range []struct {
		name string
		eng  engine.Engine
	}{{"native", c.ne}, {"torch", c.te}} {
		re, err := c.routingOne(ctx, e.name, e.eng, before)
		if err != nil {
			return fmt.Errorf("routing, %s: %w", e.name, err)
		}
		r.Routing.Engines = append(r.Routing.Engines, re)
	}
	r.Routing.KLLossRel = rel(r.Routing.Engines[1].KLLoss, r.Routing.Engines[0].KLLoss)
	return nil
}

// routingOne takes three steps of the seeded adapter in one engine (plain,
// at RoutingLRMult x lr, with the generator's KL coefficient), each from the
// seeded adapter, and measures the base policy before and after them.
func (c *check) routingOne(ctx context.Context, name string, e engine.Engine, before []float64) (RoutingEngine, error) {
	re := RoutingEngine{Engine: name}
	reqs := baseRequests()
	base0, err := e.LogProbs(ctx, "", c.turns, c.temp)
	if err != nil {
		return re, err
	}
	gen0, err := e.Generate(ctx, reqs)
	if err != nil {
		return re, err
	}
	plain := TrainOptions()
	slow := TrainOptions()
	slow.LR *= RoutingLRMult
	kl := TrainOptions()
	kl.KLCoef = map[string]float64{"generator": RoutingKLCoef, "evaluator": plain.KLCoef["evaluator"]}
	flat := map[string][]float64{}
	for _, s := range []struct {
		what string
		opt  engine.TrainOptions
	}{{"plain", plain}, {"slow", slow}, {"kl", kl}} {
		if err := e.Load(ctx, c.seeded); err != nil {
			return re, err
		}
		st, err := e.TrainStep(ctx, AdapterName, c.turns, s.opt)
		if err != nil {
			return re, fmt.Errorf("%s step: %w", s.what, err)
		}
		if s.what == "kl" {
			re.KLLoss = st.Total.Loss
		}
		dir := filepath.Join(c.work, "routing-"+name+"-"+s.what)
		if err := e.Save(ctx, dir); err != nil {
			return re, err
		}
		if flat[s.what], err = readFlat(c.cfg, dir); err != nil {
			return re, err
		}
	}
	base1, err := e.LogProbs(ctx, "", c.turns, c.temp)
	if err != nil {
		return re, err
	}
	re.BaseLogProb = maxAbs(base0, base1)
	gen1, err := e.Generate(ctx, reqs)
	if err != nil {
		return re, err
	}
	re.Samples = len(reqs)
	for i := range reqs {
		if !slices.Equal(gen0[i].IDs, gen1[i].IDs) || !slices.Equal(gen0[i].LogProbs, gen1[i].LogProbs) {
			re.BaseSamples++
		}
	}
	re.LRRatio, re.LRResidual = updateAgainst(before, flat["plain"], flat["slow"], RoutingLRMult)
	_, re.KLChange = updateAgainst(before, flat["plain"], flat["kl"], 1)
	return re, nil
}
