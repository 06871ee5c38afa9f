package enginecheck

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/engine/torch"
	"github.com/marlowlab/marlow/harness/model"
)

// History is the check of both forms of the coherence regularizer on a
// constructed gradient history: the seeded adapter with each role's
// gradient EMA set to that role's own gradient at the seeded weights (native
// computes it with the check's turns), so that the next step's cosines are
// about 1 on any checkpoint and every factor is about 1 - lambda. Both
// engines load that history and take one step in the paper's form
// (CoherenceOptions) and one in the step form (StepCoherenceOptions); the
// roles' cosines and factors are compared as the other coherence steps are
// (Report.CoherenceCos, CoherenceScale). The step form's update must be its
// step factor times the update of the plain step from the same weights
// (the check's first train step, which had no regularizer), in each
// engine; the paper's form's update against the plain one is printed: AdamW
// normalises most of its factor away.
type History struct {
	Roles          int     // role-steps compared, both forms
	StepFactor     float64 // the step factor native applied in the step form (engine.CoherenceStepFactor)
	StepFactorDiff float64 // |Δ step factor|, torch against native
	// StepResidual is the larger, over the two engines, of
	// |Δθ_step - f Δθ_plain| / |f Δθ_plain|: how far the step form's update
	// is from its factor f times the plain step's.
	StepResidual float64
	// The fitted ratio <Δθ, Δθ_plain> / |Δθ_plain|² of each form's update
	// to the plain one, native's and torch's.
	GradientRatio [2]float64
	StepRatio     [2]float64
}

// failures lists what the constructed history found wrong: no role
// compared, a step form that did not scale the step, or an update that is
// not the factor times the plain step (in every dtype: each engine against
// itself); in float32 also a step factor that differs between the engines.
func (h History) failures(fp32 bool, tol float64) []string {
	var out []string
	if h.Roles == 0 {
		out = append(out, "coherence regularizer, constructed history: no role-step compared")
		return out
	}
	if !(h.StepFactor < 1) {
		out = append(out, fmt.Sprintf("coherence regularizer, step form: step factor %.3g on the constructed history, want below 1: the step was not scaled", h.StepFactor))
	}
	if !(h.StepResidual <= tol) {
		out = append(out, fmt.Sprintf("coherence regularizer, step form: the update is not the step factor times the plain step's (relative residual %.3g > %.3g)", h.StepResidual, tol))
	}
	if fp32 && !(h.StepFactorDiff <= tol) {
		out = append(out, fmt.Sprintf("coherence regularizer, step form: |Δ step factor| %.3g > %.3g", h.StepFactorDiff, tol))
	}
	return out
}

// print writes the history's figures.
func (h History) print(w io.Writer, tol float64) {
	fmt.Fprintf(w, "  coherence, constructed history:             %d role-steps; step form's factor %.4g (|Δ| %.3g, tolerance %.3g)\n", h.Roles, h.StepFactor, h.StepFactorDiff, tol)
	fmt.Fprintf(w, "  coherence, update / plain update:           step form native %.4g torch %.4g (relative residual to the factor %.3g); paper's form native %.4g torch %.4g (not judged)\n",
		h.StepRatio[0], h.StepRatio[1], h.StepResidual, h.GradientRatio[0], h.GradientRatio[1])
}

// compareHistory writes the constructed history (writeHistory) and takes
// one step from it in each form in both engines, recording the
// differences and the updates against the plain step's in r. The plain
// step's adapters are the ones compareCrossLoad saved under work/native and
// work/torch, stepped from seeded with the same turns.
func compareHistory(ctx context.Context, ne *native.Engine, te *torch.Engine, cfg model.Config, turns []engine.Turn, seeded, work string, r *Report) error {
	hist, err := writeHistory(ctx, ne, turns, seeded, work)
	if err != nil {
		return err
	}
	before, err := readFlat(cfg, seeded)
	if err != nil {
		return err
	}
	var plain [2][]float64
	for i, d := range []string{filepath.Join(work, "native"), filepath.Join(work, "torch")} {
		if plain[i], err = readFlat(cfg, d); err != nil {
			return err
		}
	}
	r.CoherenceMinScale = math.Inf(1)
	for _, form := range []struct {
		name string
		opt  engine.TrainOptions
	}{{"gradient", CoherenceOptions()}, {"step", StepCoherenceOptions()}} {
		if err := ne.Load(ctx, hist); err != nil {
			return err
		}
		if err := te.Load(ctx, hist); err != nil {
			return err
		}
		ns, err := ne.TrainStep(ctx, AdapterName, turns, form.opt)
		if err != nil {
			return err
		}
		ts, err := te.TrainStep(ctx, AdapterName, turns, form.opt)
		if err != nil {
			return err
		}
		if len(ns.Roles) != len(ts.Roles) || len(ns.Roles) == 0 {
			return fmt.Errorf("%s form: native has %d roles, torch %d", form.name, len(ns.Roles), len(ts.Roles))
		}
		for i, nr := range ns.Roles {
			tr := ts.Roles[i]
			if math.IsNaN(nr.CoherenceCos) || math.IsNaN(tr.CoherenceCos) {
				return fmt.Errorf("%s form, role %s: cosine native %v torch %v, want defined (the history has an EMA for every role)", form.name, nr.Role, nr.CoherenceCos, tr.CoherenceCos)
			}
			r.History.Roles++
			r.CoherenceRoles++
			r.CoherenceCos = math.Max(r.CoherenceCos, absDiff(tr.CoherenceCos, nr.CoherenceCos))
			r.CoherenceScale = math.Max(r.CoherenceScale, absDiff(tr.CoherenceScale, nr.CoherenceScale))
			if form.opt.Coherence.Form == "" {
				r.CoherenceMinScale = math.Min(r.CoherenceMinScale, nr.CoherenceScale)
			}
		}
		r.CoherenceGradRel = math.Max(r.CoherenceGradRel, rel(ts.Total.GradNorm, ns.Total.GradNorm))
		var factor [2]float64
		ratio := &r.History.GradientRatio
		if form.opt.Coherence.Form == engine.CoherenceStep {
			factor = [2]float64{ns.Total.CoherenceScale, ts.Total.CoherenceScale}
			if math.IsNaN(factor[0]) || math.IsNaN(factor[1]) {
				return fmt.Errorf("step form: step factor native %v torch %v, want defined", factor[0], factor[1])
			}
			r.History.StepFactor = factor[0]
			r.History.StepFactorDiff = math.Abs(factor[1] - factor[0])
			r.CoherenceMinScale = math.Min(r.CoherenceMinScale, factor[0])
			ratio = &r.History.StepRatio
		}
		for i, e := range []engine.Engine{ne, te} {
			dir := filepath.Join(work, "history-"+form.name+"-"+[]string{"native", "torch"}[i])
			if err := e.Save(ctx, dir); err != nil {
				return err
			}
			after, err := readFlat(cfg, dir)
			if err != nil {
				return err
			}
			var res float64
			ratio[i], res = updateAgainst(before, plain[i], after, factor[i])
			if form.opt.Coherence.Form == engine.CoherenceStep {
				r.History.StepResidual = math.Max(r.History.StepResidual, res)
			}
		}
	}
	return nil
}

// writeHistory writes work/history: the seeded adapter (weights, zero
// optimizer state, step 0) with, as its coherence EMAs, native's gradient
// EMAs after one step from seeded with the measuring-only EMA, which are
// the roles' first gradients, unscaled, at the seeded weights. It returns
// the folder.
func writeHistory(ctx context.Context, ne *native.Engine, turns []engine.Turn, seeded, work string) (string, error) {
	if err := ne.Load(ctx, seeded); err != nil {
		return "", err
	}
	if _, err := ne.TrainStep(ctx, AdapterName, turns, MonitorOptions()); err != nil {
		return "", err
	}
	src := filepath.Join(work, "history-source")
	if err := ne.Save(ctx, src); err != nil {
		return "", err
	}
	hist := filepath.Join(work, "history")
	if err := copyFiles(seeded, hist); err != nil {
		return "", err
	}
	if err := copyFiles(filepath.Join(seeded, AdapterName), filepath.Join(hist, AdapterName)); err != nil {
		return "", err
	}
	const ema = "coherence.safetensors"
	b, err := os.ReadFile(filepath.Join(src, AdapterName, ema))
	if err != nil {
		return "", fmt.Errorf("constructed history: native saved no gradient EMA: %w", err)
	}
	if err := os.WriteFile(filepath.Join(hist, AdapterName, ema), b, 0o644); err != nil {
		return "", fmt.Errorf("constructed history: %w", err)
	}
	return hist, nil
}

// copyFiles copies the regular files of folder src (not its folders) into
// dst, which it creates.
func copyFiles(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("constructed history: %w", err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("constructed history: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return fmt.Errorf("constructed history: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return fmt.Errorf("constructed history: %w", err)
		}
	}
	return nil
}

// readFlat reads the adapter AdapterName saved in dir, its tensors
// flattened in the order model.ExpectedAdapterTensors gives them.
func readFlat(cfg model.Config, dir string) ([]float64, error) {
	f, ts, err := model.ReadAdapter(filepath.Join(dir, AdapterName), cfg)
	if err != nil {
		return nil, fmt.Errorf("adapter in %s: %w", dir, err)
	}
	specs, err := model.ExpectedAdapterTensors(cfg, f.Rank, f.Targets)
	if err != nil {
		return nil, err
	}
	byName := make(map[string][]float32, len(ts))
	for _, t := range ts {
		byName[t.Name] = t.Data
	}
	var out []float64
	for _, sp := range specs {
		d, ok := byName[sp.Name]
		if !ok {
			return nil, fmt.Errorf("adapter in %s lacks tensor %s", dir, sp.Name)
		}
		for _, x := range d {
			out = append(out, float64(x))
		}
	}
	return out, nil
}

// updateAgainst compares the update after - before with the plain update
// plain - before: ratio is <Δ, Δp> / |Δp|², and residual is
// |Δ - factor Δp| / |factor Δp| (NaN when factor is 0 or NaN, or the plain
// update is zero).
func updateAgainst(before, plain, after []float64, factor float64) (ratio, residual float64) {
	var dp, pp, rr float64
	for i, b := range before {
		d, p := after[i]-b, plain[i]-b
		dp += d * p
		pp += p * p
		e := d - factor*p
		rr += e * e
	}
	if !(pp > 0) {
		return math.NaN(), math.NaN()
	}
	ratio = dp / pp
	if !(factor > 0) {
		return ratio, math.NaN()
	}
	return ratio, math.Sqrt(rr) / (factor * math.Sqrt(pp))
}
