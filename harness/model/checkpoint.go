package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// File names of a checkpoint directory in the Hugging Face layout.
const (
	ConfigFile          = "config.json"
	WeightsFile         = "model.safetensors"
	TokenizerFile       = "tokenizer.json"
	TokenizerConfigFile = "tokenizer_config.json"
)

// TensorSpec is the name and shape of one expected tensor.
type TensorSpec struct {
	Name  string
	Shape []int
}

// LayerPrefix is the HF name prefix of layer i's tensors.
func LayerPrefix(i int) string { return fmt.Sprintf("model.layers.%d.", i) }

// ExpectedTensors lists the tensors of a Qwen3 checkpoint with their Hugging
// Face names and shapes ([out, in] for projections), in model order:
// embedding, then per layer input_layernorm, q/k/v/o projections, q_norm,
// k_norm, post_attention_layernorm, gate/up/down projections, then the final
// norm, and lm_head.weight only when the embeddings are not tied.
func ExpectedTensors(c Config) []TensorSpec {
	h, v, inter := c.HiddenSize, c.VocabSize, c.IntermediateSize
	q, kv := c.NumAttentionHeads*c.HeadDim, c.NumKeyValueHeads*c.HeadDim
	specs := []TensorSpec{{"model.embed_tokens.weight", []int{v, h}}}
	for i := 0; i < c.NumHiddenLayers; i++ {
		p := LayerPrefix(i)
		specs = append(specs,
			TensorSpec{p + "input_layernorm.weight", []int{h}},
			TensorSpec{p + "self_attn.q_proj.weight", []int{q, h}},
			TensorSpec{p + "self_attn.k_proj.weight", []int{kv, h}},
			TensorSpec{p + "self_attn.v_proj.weight", []int{kv, h}},
			TensorSpec{p + "self_attn.o_proj.weight", []int{h, q}},
			TensorSpec{p + "self_attn.q_norm.weight", []int{c.HeadDim}},
			TensorSpec{p + "self_attn.k_norm.weight", []int{c.HeadDim}},
			TensorSpec{p + "post_attention_layernorm.weight", []int{h}},
			TensorSpec{p + "mlp.gate_proj.weight", []int{inter, h}},
			TensorSpec{p + "mlp.up_proj.weight", []int{inter, h}},
			TensorSpec{p + "mlp.down_proj.weight", []int{h, inter}},
		)
	}
	specs = append(specs, TensorSpec{"model.norm.weight", []int{h}})
	if !c.TieWordEmbeddings {
		specs = append(specs, TensorSpec{"lm_head.weight", []int{v, h}})
	}
	return specs
}

// CheckTensors compares tensors with ExpectedTensors(c). Every problem is
// reported (missing, unexpected, duplicated, wrong shape, data length not
// matching the shape), each naming the tensor and, where one is expected,
// its expected shape. A checkpoint with tied embeddings that still carries
// lm_head.weight is rejected as unexpected.
func CheckTensors(c Config, ts []Tensor) error {
	return checkAgainst(ExpectedTensors(c), ts)
}

func checkAgainst(specs []TensorSpec, ts []Tensor) error {
	byName := make(map[string]Tensor, len(ts))
	var errs []error
	dups := map[string]bool{}
	for _, t := range ts {
		if _, ok := byName[t.Name]; ok && !dups[t.Name] {
			dups[t.Name] = true
			errs = append(errs, fmt.Errorf("tensor %q given more than once", t.Name))
		}
		byName[t.Name] = t
	}
	want := make(map[string]bool, len(specs))
	for _, s := range specs {
		want[s.Name] = true
		t, ok := byName[s.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("missing tensor %q (expected shape %v)", s.Name, s.Shape))
			continue
		}
		if !slices.Equal(t.Shape, s.Shape) {
			errs = append(errs, fmt.Errorf("tensor %q has shape %v, expected shape %v", s.Name, t.Shape, s.Shape))
			continue
		}
		if err := checkTensorData(t); err != nil {
			errs = append(errs, err)
		}
	}
	var extra []string
	for name := range byName {
		if !want[name] {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	for _, name := range extra {
		errs = append(errs, fmt.Errorf("unexpected tensor %q with shape %v", name, byName[name].Shape))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d tensor problem(s): %w", len(errs), errors.Join(errs...))
	}
	return nil
}

// ReadCheckpoint loads config.json and model.safetensors from dir and checks
// the tensors against the config.
func ReadCheckpoint(dir string) (Config, []Tensor, error) {
	c, err := LoadConfig(filepath.Join(dir, ConfigFile))
	if err != nil {
		return Config{}, nil, err
	}
	path := filepath.Join(dir, WeightsFile)
	ts, err := ReadSafetensors(path)
	if err != nil {
		return Config{}, nil, err
	}
	if err := CheckTensors(c, ts); err != nil {
		return Config{}, nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return c, ts, nil
}

// WriteCheckpoint checks ts against c and writes config.json and
// model.safetensors (F32, metadata format=pt) into dir, creating it.
func WriteCheckpoint(dir string, c Config, ts []Tensor) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", dir, err)
	}
	if err := CheckTensors(c, ts); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := WriteSafetensors(filepath.Join(dir, WeightsFile), ts, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	return WriteConfig(filepath.Join(dir, ConfigFile), c)
}
