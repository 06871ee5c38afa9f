package enginecheck

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/marlowlab/marlow/harness/model"
)

// The rule for the optimizer step. On the first AdamW step from zero
// moments the update of a component is −lr·(g/(|g|+eps) + wd·x): about lr
// whatever |g| is, and steep in g where |g| is near eps (its slope is
// eps/(|g|+eps)²). The two engines' gradients differ by fp32 rounding, about
// 1e-5 of the largest component (measured on the paper widths), so a
// component whose gradient is within a few hundred eps moves by a visibly
// different fraction of lr in each engine (up to 0.27 lr at Qwen3-4B
// widths); there are more such components the wider the model, and the
// after-step log-probs are sensitive to them because a near-zero gradient
// is a sum of large per-token terms that cancel. The check therefore
// compares the update in units of lr on every component whose gradient is
// above a noise floor, and re-scores torch's stepped adapter with the
// components below the floor taken from native's: those log-probs must
// agree within the log-prob tolerance. What remains of the raw after-step
// difference is rounding amplified by eps.
const (
	// DefaultNoiseFloor is the gradient noise floor, relative to the
	// largest |gradient| component of the adapter (native's first moment);
	// the floor is at least FloorEps times AdamW's eps.
	DefaultNoiseFloor = 1e-4
	// FloorEps is the smallest noise floor, in units of AdamW's eps.
	FloorEps = 100
	// DefaultUpdateTol is the largest difference of a component's update
	// above the noise floor accepted, in units of lr.
	DefaultUpdateTol = 1e-2
)

// updateDiff holds the comparison of both engines' stepped adapters.
type updateDiff struct {
	components, below int
	maxAbove          float64 // max |Δ update| / lr above the floor
	maxBelow          float64 // max |Δ update| / lr below the floor
	flipped           int     // components whose updates differ by more than lr (opposite signs)
	flippedAbove      int
	gradMax           float64 // largest |g| component (native)
	cut               float64 // the noise floor of |g|
	masked            []model.Tensor
}

// compareUpdate reads the adapter AdapterName before the step (before) and
// after it as saved by native (nd) and torch (td), with their first
// moments, and compares the updates in units of lr on the components whose
// native gradient is at least floor times the largest and FloorEps·eps.
// masked is torch's
// stepped adapter with every component below the floor replaced by
// native's.
func compareUpdate(cfg model.Config, before, nd, td string, lr, beta1, eps, floor float64) (updateDiff, error) {
	var u updateDiff
	read := func(dir string) (map[string]model.Tensor, []model.Tensor, error) {
		_, ts, err := model.ReadAdapter(filepath.Join(dir, AdapterName), cfg)
		if err != nil {
			return nil, nil, err
		}
		m := make(map[string]model.Tensor, len(ts))
		for _, t := range ts {
			m[t.Name] = t
		}
		return m, ts, nil
	}
	moments := func(dir string) (map[string]model.Tensor, error) {
		ts, err := model.ReadSafetensors(filepath.Join(dir, AdapterName, "optimizer.safetensors"))
		if err != nil {
			return nil, err
		}
		m := make(map[string]model.Tensor, len(ts))
		for _, t := range ts {
			m[t.Name] = t
		}
		return m, nil
	}
	x0, _, err := read(before)
	if err != nil {
		return u, fmt.Errorf("adapter before the step: %w", err)
	}
	xn, _, err := read(nd)
	if err != nil {
		return u, fmt.Errorf("native's stepped adapter: %w", err)
	}
	_, tts, err := read(td)
	if err != nil {
		return u, fmt.Errorf("torch's stepped adapter: %w", err)
	}
	mn, err := moments(nd)
	if err != nil {
		return u, fmt.Errorf("native's optimizer state: %w", err)
	}
	for _, t := range mn {
		for _, v := range t.Data {
			u.gradMax = math.Max(u.gradMax, math.Abs(float64(v))/(1-beta1))
		}
	}
	u.cut = math.Max(floor*u.gradMax, FloorEps*eps)
	for _, t := range tts {
		a, b, m := x0[t.Name], xn[t.Name], mn[t.Name+".exp_avg"]
		if len(a.Data) != len(t.Data) || len(b.Data) != len(t.Data) || len(m.Data) != len(t.Data) {
			return u, fmt.Errorf("stepped adapters: tensor %s is missing or has another size in one of them", t.Name)
		}
		out := model.Tensor{Name: t.Name, Shape: t.Shape, Data: append([]float32(nil), t.Data...)}
		for i, xt := range t.Data {
			d := math.Abs(float64(xt)-float64(b.Data[i])) / lr
			if math.IsNaN(d) {
				d = math.Inf(1)
			}
			u.components++
			if d > 1 {
				u.flipped++
			}
			if math.Abs(float64(m.Data[i]))/(1-beta1) < u.cut {
				u.below++
				u.maxBelow = math.Max(u.maxBelow, d)
				out.Data[i] = b.Data[i]
				continue
			}
			if d > 1 {
				u.flippedAbove++
			}
			u.maxAbove = math.Max(u.maxAbove, d)
		}
		u.masked = append(u.masked, out)
	}
	return u, nil
}

// writeMasked writes ts as the only adapter, AdapterName, of a checkpoint
// folder dir, with torch's optimizer state and step from td.
func writeMasked(dir, td string, cfg model.Config, ts []model.Tensor) error {
	af, _, err := model.ReadAdapter(filepath.Join(td, AdapterName), cfg)
	if err != nil {
		return err
	}
	ad := filepath.Join(dir, AdapterName)
	if err := model.WriteAdapter(ad, af, ts); err != nil {
		return err
	}
	for _, f := range []string{filepath.Join(AdapterName, "optimizer.safetensors"), filepath.Join(AdapterName, "state.json")} {
		b, err := os.ReadFile(filepath.Join(td, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	idx, _ := json.MarshalIndent(map[string]any{"adapters": []string{AdapterName}}, "", "  ")
	return os.WriteFile(filepath.Join(dir, "adapters.json"), append(idx, '\n'), 0o644)
}
