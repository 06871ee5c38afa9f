package analysis

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// Params are the analysis parameters of an experiment. They come from the
// spec through each run manifest's Analysis map; absent keys take the
// defaults of DefaultParams.
type Params struct {
	CliffAbs          float64 // cliff_abs: absolute drop that always counts as a cliff
	CliffRel          float64 // cliff_rel: drop relative to the gain (ceiling - base)
	AmpK              float64 // amp_k: gradient-norm factor over the early median
	AmpCos            float64 // amp_cos: same-role gradient cosine threshold
	EarlyFrac         float64 // early_frac: fraction of training that is "early"
	CaptureFormatDrop float64 // capture_format_drop: fall of format compliance that counts as collapse
	NGram             int     // ngram: character n-gram length for output similarity
	Bootstrap         int     // bootstrap: number of bootstrap replicates
	BootstrapSeed     uint64  // bootstrap_seed: seed of the bootstrap streams
	CI                float64 // ci: confidence level of the intervals
}

// DefaultParams returns the parameters used when the spec sets none.
func DefaultParams() Params {
	return Params{
		CliffAbs: 0.10, CliffRel: 0.5, AmpK: 3.0, AmpCos: 0.5, EarlyFrac: 0.2,
		CaptureFormatDrop: 0.2, NGram: 3, Bootstrap: 1000, BootstrapSeed: 1, CI: 0.95,
	}
}

// paramKeys lists the manifest keys in the order they are printed.
var paramKeys = []string{
	"cliff_abs", "cliff_rel", "amp_k", "amp_cos", "early_frac",
	"capture_format_drop", "ngram", "bootstrap", "bootstrap_seed", "ci",
}

// ParamsFromMap reads parameters from a manifest's Analysis map, filling
// defaults for absent keys. Unknown keys and out-of-range values are errors.
func ParamsFromMap(m map[string]float64) (Params, error) {
	p := DefaultParams()
	keys := slices.Sorted(maps.Keys(m))
	for _, k := range keys {
		v := m[k]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return p, fmt.Errorf("analysis parameter %s: value %v is not finite", k, v)
		}
		switch k {
		case "cliff_abs":
			p.CliffAbs = v
		case "cliff_rel":
			p.CliffRel = v
		case "amp_k":
			p.AmpK = v
		case "amp_cos":
			p.AmpCos = v
		case "early_frac":
			p.EarlyFrac = v
		case "capture_format_drop":
			p.CaptureFormatDrop = v
		case "ngram":
			p.NGram = int(v)
			if float64(p.NGram) != v {
				return p, fmt.Errorf("analysis parameter ngram: %v is not an integer", v)
			}
		case "bootstrap":
			p.Bootstrap = int(v)
			if float64(p.Bootstrap) != v {
				return p, fmt.Errorf("analysis parameter bootstrap: %v is not an integer", v)
			}
		case "bootstrap_seed":
			if v < 0 || v != math.Trunc(v) {
				return p, fmt.Errorf("analysis parameter bootstrap_seed: %v is not a non-negative integer", v)
			}
			p.BootstrapSeed = uint64(v)
		case "ci":
			p.CI = v
		default:
			return p, fmt.Errorf("unknown analysis parameter %q (known: %v)", k, paramKeys)
		}
	}
	return p, p.Validate()
}

// Validate checks that every parameter is in its range.
func (p Params) Validate() error {
	switch {
	case p.CliffAbs < 0 || p.CliffAbs > 1:
		return fmt.Errorf("analysis parameter cliff_abs: %v not in [0,1]", p.CliffAbs)
	case p.CliffRel < 0:
		return fmt.Errorf("analysis parameter cliff_rel: %v is negative", p.CliffRel)
	case p.AmpK <= 0:
		return fmt.Errorf("analysis parameter amp_k: %v must be positive", p.AmpK)
	case p.AmpCos < -1 || p.AmpCos > 1:
		return fmt.Errorf("analysis parameter amp_cos: %v not in [-1,1]", p.AmpCos)
	case p.EarlyFrac <= 0 || p.EarlyFrac > 1:
		return fmt.Errorf("analysis parameter early_frac: %v not in (0,1]", p.EarlyFrac)
	case p.CaptureFormatDrop < 0 || p.CaptureFormatDrop > 1:
		return fmt.Errorf("analysis parameter capture_format_drop: %v not in [0,1]", p.CaptureFormatDrop)
	case p.NGram < 1 || p.NGram > 16:
		return fmt.Errorf("analysis parameter ngram: %d not in [1,16]", p.NGram)
	case p.Bootstrap < 1 || p.Bootstrap > 1000000:
		return fmt.Errorf("analysis parameter bootstrap: %d not in [1,1000000]", p.Bootstrap)
	case p.CI <= 0 || p.CI >= 1:
		return fmt.Errorf("analysis parameter ci: %v not in (0,1)", p.CI)
	}
	return nil
}

// Entries returns the parameters as (manifest key, value) pairs in a fixed
// order, for printing.
func (p Params) Entries() [][2]string {
	f := func(v float64) string { return fmt.Sprintf("%g", v) }
	vals := []string{
		f(p.CliffAbs), f(p.CliffRel), f(p.AmpK), f(p.AmpCos), f(p.EarlyFrac),
		f(p.CaptureFormatDrop), fmt.Sprint(p.NGram), fmt.Sprint(p.Bootstrap),
		fmt.Sprint(p.BootstrapSeed), f(p.CI),
	}
	out := make([][2]string, len(paramKeys))
	for i, k := range paramKeys {
		out[i] = [2]string{k, vals[i]}
	}
	return out
}
