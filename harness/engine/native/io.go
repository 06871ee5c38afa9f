package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/internal/atomicfile"
	"github.com/marlowlab/marlow/harness/model"
)

// Files Save writes: dir/adapters.json lists the adapters; each adapter's
// folder dir/<name>/ holds the PEFT files (adapter_config.json,
// adapter_model.safetensors), optimizer.safetensors (AdamW moments under the
// LoRA tensor names with suffixes .exp_avg and .exp_avg_sq) and state.json;
// an adapter trained with a Coherence (the regularizer, or the
// measuring-only EMA every run keeps) also has coherence.safetensors, each
// role's gradient EMA under the LoRA tensor names with suffix
// .coherence_ema.<role>.
const (
	indexFile     = "adapters.json"
	optimizerFile = "optimizer.safetensors"
	stateFile     = "state.json"
	coherenceFile = "coherence.safetensors"
	emaSuffix     = ".coherence_ema."
)

type adapterState struct {
	Name string `json:"name"`
	Seed uint64 `json:"seed"`
	Step int    `json:"step"`
}

// loraTensors lists an adapter buffer (its weights, or a same-layout
// moment buffer) as named tensors, in layer then module order; suffix is
// appended to the names.
func (a *Adapter) loraTensors(d dims, buf []float32, suffix string) []model.Tensor {
	var ts []model.Tensor
	r := a.Cfg.Rank
	for l := 0; l < d.L; l++ {
		for m := 0; m < numMods; m++ {
			if !a.targets[m] {
				continue
			}
			in, out := d.modShape(m)
			ao, bo := a.aOff[l][m], a.bOff[l][m]
			ts = append(ts,
				model.Tensor{Name: model.LoRAName(l, modPaths[m], "A") + suffix, Shape: []int{r, in}, Data: buf[ao : ao+r*in]},
				model.Tensor{Name: model.LoRAName(l, modPaths[m], "B") + suffix, Shape: []int{out, r}, Data: buf[bo : bo+out*r]})
		}
	}
	return ts
}

// fillFrom copies named tensors into buf by the adapter's layout, checking
// that each expected tensor is present with its shape.
func (a *Adapter) fillFrom(d dims, buf []float32, ts []model.Tensor, suffix, what string) error {
	byName := make(map[string]model.Tensor, len(ts))
	for _, t := range ts {
		byName[t.Name] = t
	}
	want := a.loraTensors(d, buf, suffix)
	if len(ts) != len(want) {
		return fmt.Errorf("%s: %d tensors, expected %d", what, len(ts), len(want))
	}
	for _, w := range want {
		t, ok := byName[w.Name]
		if !ok {
			return fmt.Errorf("%s: missing tensor %q (expected shape %v)", what, w.Name, w.Shape)
		}
		if !slices.Equal(t.Shape, w.Shape) || len(t.Data) != len(w.Data) {
			return fmt.Errorf("%s: tensor %q has shape %v, expected shape %v", what, w.Name, t.Shape, w.Shape)
		}
		copy(w.Data, t.Data)
	}
	return nil
}

// Save writes every adapter, its optimizer state and step count under dir.
// The same state always gives the same bytes.
func (e *Engine) Save(ctx context.Context, dir string) error {
	if err := e.check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("native: save %s: %w", dir, err)
	}
	names := e.Adapters()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("native: save: %w", err)
	}
	for _, n := range names {
		if err := e.saveAdapter(filepath.Join(dir, n), e.adapters[n]); err != nil {
			return fmt.Errorf("native: save adapter %q: %w", n, err)
		}
	}
	b, err := json.MarshalIndent(map[string]any{"adapters": names}, "", "  ")
	if err != nil {
		return fmt.Errorf("native: save: %w", err)
	}
	return atomicfile.Write(filepath.Join(dir, indexFile), append(b, '\n'))
}

func (e *Engine) saveAdapter(dir string, a *Adapter) error {
	af := model.AdapterFile{Rank: a.Cfg.Rank, Alpha: a.Cfg.Alpha, Targets: a.Cfg.Targets, BaseModel: "marlow-native"}
	if err := model.WriteAdapter(dir, af, a.loraTensors(e.d, a.Data, "")); err != nil {
		return err
	}
	ts := append(a.loraTensors(e.d, a.opt.M, ".exp_avg"), a.loraTensors(e.d, a.opt.V, ".exp_avg_sq")...)
	if err := model.WriteSafetensors(filepath.Join(dir, optimizerFile), ts, map[string]string{"format": "marlow-adamw"}); err != nil {
		return err
	}
	if len(a.ema) > 0 {
		var ets []model.Tensor
		for _, role := range slices.Sorted(maps.Keys(a.ema)) {
			ets = append(ets, a.loraTensors(e.d, a.ema[role], emaSuffix+role)...)
		}
		if err := model.WriteSafetensors(filepath.Join(dir, coherenceFile), ets, map[string]string{"format": "marlow-coherence-ema"}); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(adapterState{Name: a.Name, Seed: a.Cfg.Seed, Step: a.opt.Step}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, stateFile), append(b, '\n'))
}

// Load restores what Save wrote under dir, replacing adapters of the same
// name. Nothing is replaced unless every adapter loads.
func (e *Engine) Load(ctx context.Context, dir string) error {
	if err := e.check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("native: load %s: %w", dir, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, indexFile))
	if err != nil {
		return fmt.Errorf("native: load: %w", err)
	}
	var idx struct {
		Adapters []string `json:"adapters"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		return fmt.Errorf("native: load %s: %w", filepath.Join(dir, indexFile), err)
	}
	loaded := map[string]*Adapter{}
	for _, n := range idx.Adapters {
		if err := engine.ValidateAdapterName(n); err != nil {
			return fmt.Errorf("native: load %s: %w", filepath.Join(dir, indexFile), err)
		}
		a, err := e.loadAdapter(filepath.Join(dir, n), n)
		if err != nil {
			return fmt.Errorf("native: load adapter %q: %w", n, err)
		}
		loaded[n] = a
	}
	for n, a := range loaded {
		e.adapters[n] = a
	}
	return nil
}

func (e *Engine) loadAdapter(dir, name string) (*Adapter, error) {
	af, ts, err := model.ReadAdapter(dir, e.cfg)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var s adapterState
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	a, err := newAdapter(name, e.d, engine.AdapterConfig{Rank: af.Rank, Alpha: af.Alpha, Targets: af.Targets, Seed: s.Seed})
	if err != nil {
		return nil, err
	}
	if err := a.fillFrom(e.d, a.Data, ts, "", filepath.Join(dir, model.AdapterWeightsFile)); err != nil {
		return nil, err
	}
	optPath := filepath.Join(dir, optimizerFile)
	ots, err := model.ReadSafetensors(optPath)
	if err != nil {
		return nil, err
	}
	var mts, vts []model.Tensor
	for _, t := range ots {
		switch {
		case hasSuffix(t.Name, ".exp_avg_sq"):
			vts = append(vts, t)
		case hasSuffix(t.Name, ".exp_avg"):
			mts = append(mts, t)
		default:
			return nil, fmt.Errorf("%s: unexpected tensor %q", optPath, t.Name)
		}
	}
	if err := a.fillFrom(e.d, a.opt.M, mts, ".exp_avg", optPath); err != nil {
		return nil, err
	}
	if err := a.fillFrom(e.d, a.opt.V, vts, ".exp_avg_sq", optPath); err != nil {
		return nil, err
	}
	if s.Step < 0 {
		return nil, fmt.Errorf("%s: negative step %d", filepath.Join(dir, stateFile), s.Step)
	}
	a.opt.Step = s.Step
	if err := a.loadEMA(e.d, filepath.Join(dir, coherenceFile)); err != nil {
		return nil, err
	}
	return a, nil
}

// loadEMA restores the coherence EMAs Save wrote to path; an adapter saved
// without them has no file.
func (a *Adapter) loadEMA(d dims, path string) error {
	ts, err := model.ReadSafetensors(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	byRole := map[string][]model.Tensor{}
	for _, t := range ts {
		i := strings.LastIndex(t.Name, emaSuffix)
		if i < 0 || i+len(emaSuffix) == len(t.Name) {
			return fmt.Errorf("%s: unexpected tensor %q (want <lora name>%s<role>)", path, t.Name, emaSuffix)
		}
		role := t.Name[i+len(emaSuffix):]
		byRole[role] = append(byRole[role], t)
	}
	a.ema = map[string][]float32{}
	for _, role := range slices.Sorted(maps.Keys(byRole)) {
		buf := make([]float32, len(a.Data))
		if err := a.fillFrom(d, buf, byRole[role], emaSuffix+role, path); err != nil {
			return err
		}
		a.ema[role] = buf
	}
	return nil
}

// SaveBaseOptimizer writes the AdamW state of Supervised (moments under the
// base tensor names with suffixes .exp_avg and .exp_avg_sq, the step count
// in the metadata) to path, so pretraining can resume bit for bit. Before
// the first Supervised step the state is all zeros with step 0.
func (e *Engine) SaveBaseOptimizer(path string) error {
	if err := e.check(); err != nil {
		return err
	}
	st := e.baseState()
	m, v := NewWeights(e.cfg), NewWeights(e.cfg)
	copy(m.Data, st.M)
	copy(v.Data, st.V)
	var ts []model.Tensor
	for _, t := range m.Tensors() {
		t.Name += ".exp_avg"
		ts = append(ts, t)
	}
	for _, t := range v.Tensors() {
		t.Name += ".exp_avg_sq"
		ts = append(ts, t)
	}
	meta := map[string]string{"format": "marlow-adamw", "step": strconv.Itoa(st.Step)}
	if err := model.WriteSafetensors(path, ts, meta); err != nil {
		return fmt.Errorf("native: save base optimizer: %w", err)
	}
	return nil
}

// LoadBaseOptimizer restores what SaveBaseOptimizer wrote.
func (e *Engine) LoadBaseOptimizer(path string) error {
	if err := e.check(); err != nil {
		return err
	}
	ts, err := model.ReadSafetensors(path)
	if err != nil {
		return fmt.Errorf("native: load base optimizer: %w", err)
	}
	meta, err := model.ReadSafetensorsMetadata(path)
	if err != nil {
		return fmt.Errorf("native: load base optimizer: %w", err)
	}
	step, err := strconv.Atoi(meta["step"])
	if err != nil || step < 0 {
		return fmt.Errorf("native: load base optimizer %s: bad step %q in metadata", path, meta["step"])
	}
	var mts, vts []model.Tensor
	for _, t := range ts {
		switch {
		case hasSuffix(t.Name, ".exp_avg_sq"):
			t.Name = t.Name[:len(t.Name)-len(".exp_avg_sq")]
			vts = append(vts, t)
		case hasSuffix(t.Name, ".exp_avg"):
			t.Name = t.Name[:len(t.Name)-len(".exp_avg")]
			mts = append(mts, t)
		default:
			return fmt.Errorf("native: load base optimizer %s: unexpected tensor %q", path, t.Name)
		}
	}
	m, err := WeightsFromTensors(e.cfg, mts)
	if err != nil {
		return fmt.Errorf("native: load base optimizer %s (exp_avg): %w", path, err)
	}
	v, err := WeightsFromTensors(e.cfg, vts)
	if err != nil {
		return fmt.Errorf("native: load base optimizer %s (exp_avg_sq): %w", path, err)
	}
	e.baseOpt = &adamState{M: m.Data, V: v.Data, Step: step}
	return nil
}

// baseState returns the base optimizer state, creating it when needed.
func (e *Engine) baseState() *adamState {
	if e.baseOpt == nil {
		s := newAdam(len(e.w.Data))
		e.baseOpt = &s
	}
	return e.baseOpt
}
