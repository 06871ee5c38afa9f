package native

import (
	"fmt"
	"math"

	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/keyed"
)

// dims are the derived sizes of a Qwen3 configuration.
type dims struct {
	D, H, KV, HD int // hidden size, query heads, key/value heads, head dim
	Q, KVD, F    int // H*HD, KV*HD, intermediate size
	V, L, MaxPos int // vocab, layers, max positions
	Eps          float32
}

func dimsOf(c model.Config) dims {
	return dims{
		D: c.HiddenSize, H: c.NumAttentionHeads, KV: c.NumKeyValueHeads, HD: c.HeadDim,
		Q: c.NumAttentionHeads * c.HeadDim, KVD: c.NumKeyValueHeads * c.HeadDim,
		F: c.IntermediateSize, V: c.VocabSize, L: c.NumHiddenLayers,
		MaxPos: c.MaxPositionEmbeddings, Eps: float32(c.RMSNormEps),
	}
}

// Linear modules of a layer, in the order used throughout the package.
const (
	modQ = iota
	modK
	modV
	modO
	modGate
	modUp
	modDown
	numMods
)

// modNames are the short (PEFT target) names of the linear modules.
var modNames = [numMods]string(study.LoRATargets)

// modPaths are the module paths inside a layer, as HF names them.
var modPaths = [numMods]string{
	"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
	"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
}

// modShape returns (in, out) of linear module m.
func (d dims) modShape(m int) (in, out int) {
	switch m {
	case modQ:
		return d.D, d.Q
	case modK, modV:
		return d.D, d.KVD
	case modO:
		return d.Q, d.D
	case modGate, modUp:
		return d.D, d.F
	default:
		return d.F, d.D
	}
}

// LayerWeights are views into Weights.Data for one decoder layer. Linear
// weights use the HF layout [out, in], row-major.
type LayerWeights struct {
	AttnNorm []float32 // [D] input_layernorm
	QNorm    []float32 // [HD]
	KNorm    []float32 // [HD]
	MLPNorm  []float32 // [D] post_attention_layernorm
	Lin      [numMods][]float32
}

// Weights hold all base parameters in one contiguous buffer, laid out in the
// order of model.ExpectedTensors, with typed views into it. A gradient buffer
// is a Weights of the same configuration.
type Weights struct {
	Cfg    model.Config
	Data   []float32
	Embed  []float32 // [V, D]
	Norm   []float32 // [D] final norm
	LMHead []float32 // [V, D]; the same memory as Embed when tied
	Layers []LayerWeights
	specs  []model.TensorSpec
	offs   []int // offset of specs[i] in Data
}

// NewWeights allocates zeroed weights for cfg.
func NewWeights(cfg model.Config) *Weights {
	specs := model.ExpectedTensors(cfg)
	w := &Weights{Cfg: cfg, specs: specs, offs: make([]int, len(specs))}
	n := 0
	for i, s := range specs {
		w.offs[i] = n
		n += numel(s.Shape)
	}
	w.Data = make([]float32, n)
	d := dimsOf(cfg)
	w.Layers = make([]LayerWeights, d.L)
	for i, s := range specs {
		v := w.Data[w.offs[i] : w.offs[i]+numel(s.Shape)]
		w.bind(s.Name, v)
	}
	if cfg.TieWordEmbeddings {
		w.LMHead = w.Embed
	}
	return w
}

func numel(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

// bind points the typed view named by an HF tensor name at v.
func (w *Weights) bind(name string, v []float32) {
	switch name {
	case "model.embed_tokens.weight":
		w.Embed = v
		return
	case "model.norm.weight":
		w.Norm = v
		return
	case "lm_head.weight":
		w.LMHead = v
		return
	}
	for i := range w.Layers {
		p := model.LayerPrefix(i)
		if len(name) <= len(p) || name[:len(p)] != p {
			continue
		}
		lw := &w.Layers[i]
		switch rest := name[len(p):]; rest {
		case "input_layernorm.weight":
			lw.AttnNorm = v
		case "post_attention_layernorm.weight":
			lw.MLPNorm = v
		case "self_attn.q_norm.weight":
			lw.QNorm = v
		case "self_attn.k_norm.weight":
			lw.KNorm = v
		default:
			for m := 0; m < numMods; m++ {
				if rest == modPaths[m]+".weight" {
					lw.Lin[m] = v
				}
			}
		}
		return
	}
}

// InitWeights returns deterministic initial weights for pretraining from
// scratch: norms at 1, every other tensor normal with std 0.02 (output
// projections scaled by 1/sqrt(2 layers), as GPT-2 does), each element drawn
// from a counter stream keyed by (seed, tensor index, element index).
func InitWeights(cfg model.Config, seed uint64) *Weights {
	w := NewWeights(cfg)
	nl := cfg.NumHiddenLayers
	if nl < 1 {
		nl = 1
	}
	for i, s := range w.specs {
		v := w.Data[w.offs[i] : w.offs[i]+numel(s.Shape)]
		if len(s.Shape) == 1 {
			for j := range v {
				v[j] = 1
			}
			continue
		}
		std := 0.02
		if hasSuffix(s.Name, "o_proj.weight") || hasSuffix(s.Name, "down_proj.weight") {
			std /= math.Sqrt(2 * float64(nl))
		}
		key := keyed.HashKey(seed, keyed.PurposeInit, uint64(i))
		for j := range v {
			v[j] = float32(std * keyed.NormalAt(key, uint64(j)))
		}
	}
	return w
}

func hasSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }

// Tensors returns the weights as named tensors in checkpoint order. The data
// slices alias the weights.
func (w *Weights) Tensors() []model.Tensor {
	ts := make([]model.Tensor, len(w.specs))
	for i, s := range w.specs {
		ts[i] = model.Tensor{Name: s.Name, Shape: append([]int(nil), s.Shape...), Data: w.Data[w.offs[i] : w.offs[i]+numel(s.Shape)]}
	}
	return ts
}

// WeightsFromTensors checks ts against cfg (names, shapes, missing and
// unexpected tensors) and copies them into new Weights.
func WeightsFromTensors(cfg model.Config, ts []model.Tensor) (*Weights, error) {
	if err := model.CheckTensors(cfg, ts); err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	w := NewWeights(cfg)
	idx := make(map[string]int, len(w.specs))
	for i, s := range w.specs {
		idx[s.Name] = i
	}
	for _, t := range ts {
		i := idx[t.Name]
		dst := w.Data[w.offs[i] : w.offs[i]+numel(w.specs[i].Shape)]
		if len(t.Data) != len(dst) {
			return nil, fmt.Errorf("weights: tensor %q has %d values, expected shape %v", t.Name, len(t.Data), w.specs[i].Shape)
		}
		for j, x := range t.Data {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("weights: tensor %q (expected shape %v) holds a non-finite value at index %d", t.Name, w.specs[i].Shape, j)
			}
		}
		copy(dst, t.Data)
	}
	return w, nil
}
