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
// moments the update of a component is lr·(g/(|g|+eps) + wd·x): its size is
// lr whatever |g| is, only its sign depends on the gradient. A component
// whose gradient is at the level of the two engines' rounding differences
// can therefore move by +lr in one engine and −lr in the other; there are
// more such components the wider the model, and each moves the after-step
// log-probs. The check compares the update in units of lr on every
// component whose gradient is above a noise floor, and re-scores torch's
// stepped adapter with the components below the floor taken from native's:
// those log-probs must agree within the log-prob tolerance. What remains of
// the raw after-step difference is then the sign of noise.
const (
	// DefaultNoiseFloor is the gradient noise floor, relative to the
	// largest |gradient| component of the adapter (native's first moment).
	DefaultNoiseFloor = 1e-3
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
	masked            []model.Tensor
}

// compareUpdate reads the adapter AdapterName before the step (before) and
// after it as saved by native (nd) and torch (td), with their first
// moments, and compares the updates in units of lr on the components whose
// native gradient is at least floor times the largest. masked is torch's
// stepped adapter with every component below the floor replaced by
// native's.
func compareUpdate(cfg model.Config, before, nd, td string, lr, beta1, floor float64) (updateDiff, error) {
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
	cut := floor * u.gradMax
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
			if math.Abs(float64(m.Data[i]))/(1-beta1) < cut {
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
