package native

import (
	"fmt"
	"math"
	"slices"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/keyed"
)

// Adapter is a named LoRA adapter: for each targeted linear module,
// y = W x + (alpha/r) B (A x) with A [r, in] and B [out, r] (the PEFT
// layouts), all in one contiguous buffer, plus its own AdamW state.
type Adapter struct {
	Name    string
	Cfg     engine.AdapterConfig
	targets [numMods]bool
	scale   float32
	Data    []float32
	aOff    [][numMods]int // offset of A per layer and module; -1 when not targeted
	bOff    [][numMods]int
	opt     adamState
	// ema is the EMA of each role's past gradients
	// (engine.TrainOptions.Coherence: the coherence regularizer's, or the
	// measuring-only one of Lambda 0), by role; nil until a step with a
	// Coherence.
	ema map[string][]float32
}

// parseTargets turns short module names into a mask; empty means all.
func parseTargets(ts []string) ([numMods]bool, error) {
	var mask [numMods]bool
	if len(ts) == 0 {
		for m := range mask {
			mask[m] = true
		}
		return mask, nil
	}
	for _, t := range ts {
		i := slices.Index(modNames[:], t)
		if i < 0 {
			return mask, fmt.Errorf("unknown LoRA target %q (want one of %v)", t, modNames)
		}
		mask[i] = true
	}
	return mask, nil
}

// newAdapter lays out a zero adapter for d after checking its name and
// configuration (engine.ValidateAdapter).
func newAdapter(name string, d dims, cfg engine.AdapterConfig) (*Adapter, error) {
	if err := engine.ValidateAdapter(name, cfg); err != nil {
		return nil, err
	}
	mask, err := parseTargets(cfg.Targets)
	if err != nil {
		return nil, fmt.Errorf("adapter %q: %w", name, err)
	}
	// Store targets in canonical order so saved configs are deterministic.
	var canon []string
	for m := 0; m < numMods; m++ {
		if mask[m] {
			canon = append(canon, modNames[m])
		}
	}
	cfg.Targets = canon
	a := &Adapter{Name: name, Cfg: cfg, targets: mask, scale: float32(cfg.Alpha / float64(cfg.Rank))}
	a.aOff = make([][numMods]int, d.L)
	a.bOff = make([][numMods]int, d.L)
	n := 0
	r := cfg.Rank
	for l := 0; l < d.L; l++ {
		for m := 0; m < numMods; m++ {
			a.aOff[l][m], a.bOff[l][m] = -1, -1
			if !mask[m] {
				continue
			}
			in, out := d.modShape(m)
			a.aOff[l][m] = n
			n += r * in
			a.bOff[l][m] = n
			n += out * r
		}
	}
	a.Data = make([]float32, n)
	a.opt = newAdam(n)
	return a, nil
}

// initA fills every A from the counter stream keyed by the adapter seed with
// the kaiming-uniform bound PEFT uses (1/sqrt(in)); B stays zero.
func (a *Adapter) initA(d dims) {
	for l := 0; l < d.L; l++ {
		for m := 0; m < numMods; m++ {
			if !a.targets[m] {
				continue
			}
			in, _ := d.modShape(m)
			bound := 1 / math.Sqrt(float64(in))
			key := keyed.HashKey(a.Cfg.Seed, keyed.PurposeLoRA, uint64(l), uint64(m))
			v := a.A(l, m, d)
			for i := range v {
				v[i] = float32(bound * keyed.UniformAt(key, uint64(i)))
			}
		}
	}
}

func (a *Adapter) has(m int) bool { return a != nil && a.targets[m] }

// A returns the [r, in] view of layer l, module m (nil when not targeted).
func (a *Adapter) A(l, m int, d dims) []float32 {
	if !a.targets[m] {
		return nil
	}
	in, _ := d.modShape(m)
	o := a.aOff[l][m]
	return a.Data[o : o+a.Cfg.Rank*in]
}

// B returns the [out, r] view of layer l, module m (nil when not targeted).
func (a *Adapter) B(l, m int, d dims) []float32 {
	if !a.targets[m] {
		return nil
	}
	_, out := d.modShape(m)
	o := a.bOff[l][m]
	return a.Data[o : o+out*a.Cfg.Rank]
}

// adamState is the AdamW state of one parameter buffer.
type adamState struct {
	M, V []float32
	Step int
}

func newAdam(n int) adamState { return adamState{M: make([]float32, n), V: make([]float32, n)} }

// update takes one bias-corrected AdamW step with decoupled weight decay.
func (s *adamState) update(p, g []float32, lr, b1, b2, eps, wd float64) {
	s.Step++
	bc1 := 1 - math.Pow(b1, float64(s.Step))
	bc2 := 1 - math.Pow(b2, float64(s.Step))
	for i := range p {
		gi := float64(g[i])
		m := b1*float64(s.M[i]) + (1-b1)*gi
		v := b2*float64(s.V[i]) + (1-b2)*gi*gi
		s.M[i], s.V[i] = float32(m), float32(v)
		x := float64(p[i])
		x -= lr * wd * x
		x -= lr * (m / bc1) / (math.Sqrt(v/bc2) + eps)
		p[i] = float32(x)
	}
}
