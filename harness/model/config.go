// Package model holds what both engines share about a Qwen3-architecture
// checkpoint: its Hugging Face config.json, safetensors tensors with HF
// names, PEFT adapter files, and the character-level chat tokenizer of the
// tiny CPU models.
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/marlowlab/marlow/harness/internal/atomicfile"
)

// Config is the subset of a Hugging Face Qwen3 config.json that defines the
// architecture.
type Config struct {
	Architectures         []string `json:"architectures,omitempty"`
	ModelType             string   `json:"model_type"` // "qwen3"
	HiddenSize            int      `json:"hidden_size"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      int      `json:"num_key_value_heads"`
	HeadDim               int      `json:"head_dim"`
	RMSNormEps            float64  `json:"rms_norm_eps"`
	RopeTheta             float64  `json:"rope_theta"`
	VocabSize             int      `json:"vocab_size"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	TieWordEmbeddings     bool     `json:"tie_word_embeddings"`
	TorchDtype            string   `json:"torch_dtype,omitempty"`
	BOSTokenID            *int     `json:"bos_token_id,omitempty"`
	EOSTokenID            *int     `json:"eos_token_id,omitempty"`
}

// ModelTypeQwen3 is the only model_type this package accepts.
const ModelTypeQwen3 = "qwen3"

// requiredConfigKeys are the config.json keys LoadConfig insists on, in the
// order their absence is reported.
var requiredConfigKeys = []string{
	"model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
	"num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps",
	"rope_theta", "vocab_size", "max_position_embeddings", "tie_word_embeddings",
}

// LoadConfig reads a Hugging Face config.json of a Qwen3 model. Keys the
// architecture does not depend on (transformers_version, use_cache, ...) are
// ignored, but every key of Config except the optional ones must be present,
// model_type must be "qwen3", and settings that would change the
// architecture away from what the engines implement (attention biases, an
// activation other than SiLU, RoPE scaling, sliding-window attention) are
// rejected. The result is validated with Validate.
//
// Newer transformers releases store rope_theta inside "rope_parameters";
// that form is accepted when its rope_type is "default".
func LoadConfig(path string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read model config: %w", err)
	}
	c, err := parseConfig(raw)
	if err != nil {
		return Config{}, fmt.Errorf("model config %s: %w", path, err)
	}
	return c, nil
}

func parseConfig(raw []byte) (Config, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return Config{}, fmt.Errorf("not a JSON object: %w", err)
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Config{}, fmt.Errorf("decode: %w", err)
	}
	var errs []error
	if mt, ok := keys["model_type"]; ok && c.ModelType != ModelTypeQwen3 {
		errs = append(errs, fmt.Errorf("unknown model_type %s (want %q)", mt, ModelTypeQwen3))
	}
	if _, ok := keys["rope_theta"]; !ok {
		theta, err := ropeFromParameters(keys["rope_parameters"])
		if err != nil {
			errs = append(errs, err)
		} else if theta > 0 {
			c.RopeTheta = theta
			keys["rope_theta"] = json.RawMessage("0")
		}
	}
	var missing []string
	for _, k := range requiredConfigKeys {
		if v, ok := keys[k]; !ok || string(v) == "null" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("missing required keys: %s", strings.Join(missing, ", ")))
	}
	errs = append(errs, unsupportedConfig(keys)...)
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// ropeFromParameters reads rope_theta from a transformers 5 style
// "rope_parameters" object; it returns 0 when the object is absent.
func ropeFromParameters(raw json.RawMessage) (float64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var rp struct {
		RopeType  string   `json:"rope_type"`
		RopeTheta *float64 `json:"rope_theta"`
	}
	if err := json.Unmarshal(raw, &rp); err != nil {
		return 0, fmt.Errorf("rope_parameters: %w", err)
	}
	if rp.RopeType != "" && rp.RopeType != "default" {
		return 0, fmt.Errorf("rope_parameters.rope_type %q is not supported (only \"default\")", rp.RopeType)
	}
	if rp.RopeTheta == nil {
		return 0, nil
	}
	return *rp.RopeTheta, nil
}

// unsupportedConfig reports optional config.json settings whose values would
// change the architecture.
func unsupportedConfig(keys map[string]json.RawMessage) []error {
	var errs []error
	check := func(key string, ok func(json.RawMessage) bool, want string) {
		v, present := keys[key]
		if present && !ok(v) {
			errs = append(errs, fmt.Errorf("%s is %s; only %s is supported", key, v, want))
		}
	}
	isLit := func(lits ...string) func(json.RawMessage) bool {
		return func(v json.RawMessage) bool {
			s := strings.TrimSpace(string(v))
			for _, l := range lits {
				if s == l {
					return true
				}
			}
			return false
		}
	}
	check("attention_bias", isLit("false"), "false")
	check("mlp_bias", isLit("false"), "false")
	check("hidden_act", isLit(`"silu"`), `"silu"`)
	check("rope_scaling", isLit("null", "{}"), "null")
	check("use_sliding_window", isLit("false"), "false")
	if v, ok := keys["layer_types"]; ok && string(v) != "null" {
		var types []string
		if err := json.Unmarshal(v, &types); err != nil {
			errs = append(errs, fmt.Errorf("layer_types: %w", err))
		}
		for i, lt := range types {
			if lt != "full_attention" {
				errs = append(errs, fmt.Errorf("layer_types[%d] is %q; only \"full_attention\" is supported", i, lt))
			}
		}
	}
	if v, ok := keys["architectures"]; ok {
		var archs []string
		if err := json.Unmarshal(v, &archs); err != nil {
			errs = append(errs, fmt.Errorf("architectures: %w", err))
		}
		for _, a := range archs {
			if a != "Qwen3ForCausalLM" {
				errs = append(errs, fmt.Errorf("architectures lists %q; only Qwen3ForCausalLM is supported", a))
			}
		}
	}
	return errs
}

// Validate checks that the configuration describes a buildable Qwen3 model:
// positive sizes, an even head_dim (rotate-half RoPE), num_key_value_heads
// dividing num_attention_heads, and a positive finite rms_norm_eps and
// rope_theta. All problems are reported together.
func (c Config) Validate() error {
	var errs []error
	if c.ModelType != ModelTypeQwen3 {
		errs = append(errs, fmt.Errorf("model_type is %q, want %q", c.ModelType, ModelTypeQwen3))
	}
	positive := []struct {
		key string
		v   int
	}{
		{"hidden_size", c.HiddenSize},
		{"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads},
		{"head_dim", c.HeadDim},
		{"vocab_size", c.VocabSize},
		{"max_position_embeddings", c.MaxPositionEmbeddings},
	}
	for _, p := range positive {
		if p.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", p.key, p.v))
		}
	}
	if c.HeadDim > 0 && c.HeadDim%2 != 0 {
		errs = append(errs, fmt.Errorf("head_dim must be even for rotary embeddings, got %d", c.HeadDim))
	}
	if c.NumAttentionHeads > 0 && c.NumKeyValueHeads > 0 && c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		errs = append(errs, fmt.Errorf("num_key_value_heads %d does not divide num_attention_heads %d",
			c.NumKeyValueHeads, c.NumAttentionHeads))
	}
	if !(c.RMSNormEps > 0) || math.IsInf(c.RMSNormEps, 0) {
		errs = append(errs, fmt.Errorf("rms_norm_eps must be positive and finite, got %v", c.RMSNormEps))
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		errs = append(errs, fmt.Errorf("rope_theta must be positive and finite, got %v", c.RopeTheta))
	}
	for _, a := range c.Architectures {
		if a != "Qwen3ForCausalLM" {
			errs = append(errs, fmt.Errorf("architectures lists %q; only Qwen3ForCausalLM is supported", a))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid model config: %w", errors.Join(errs...))
	}
	return nil
}

// WriteConfig validates c and writes it as config.json: indented by two
// spaces, fields in struct order, a trailing newline, through a temporary
// file and a rename. The same Config always gives the same bytes.
func WriteConfig(path string, c Config) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("write model config %s: %w", path, err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode model config: %w", err)
	}
	b = append(b, '\n')
	return atomicfile.WriteFrom(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// NumParams is the number of base-model parameters: embeddings, every
// layer's projections and norms, the final norm, and the LM head unless it
// is tied to the embedding (tied weights are counted once).
func (c Config) NumParams() int64 {
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	nh, nkv, hd := int64(c.NumAttentionHeads), int64(c.NumKeyValueHeads), int64(c.HeadDim)
	inter := int64(c.IntermediateSize)
	perLayer := 2*h + // input and post-attention RMSNorm
		nh*hd*h + 2*nkv*hd*h + h*nh*hd + // q, k, v, o
		2*hd + // q_norm, k_norm
		3*inter*h // gate, up, down
	n := v*h + int64(c.NumHiddenLayers)*perLayer + h
	if !c.TieWordEmbeddings {
		n += v * h
	}
	return n
}
