package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/harness/internal/atomicfile"
)

// File names of a PEFT adapter directory.
const (
	AdapterConfigFile  = "adapter_config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
)

// LoRA target modules in architecture order, by their PEFT short names.
var loraTargets = []struct{ short, module string }{
	{"q_proj", "self_attn.q_proj"},
	{"k_proj", "self_attn.k_proj"},
	{"v_proj", "self_attn.v_proj"},
	{"o_proj", "self_attn.o_proj"},
	{"gate_proj", "mlp.gate_proj"},
	{"up_proj", "mlp.up_proj"},
	{"down_proj", "mlp.down_proj"},
}

// LoRATargets returns the seven linear layers LoRA may adapt, by PEFT short
// name, in architecture order (q, k, v, o, gate, up, down).
func LoRATargets() []string {
	out := make([]string, len(loraTargets))
	for i, t := range loraTargets {
		out[i] = t.short
	}
	return out
}

// TargetModule maps a PEFT short name ("q_proj") to the module path inside a
// layer ("self_attn.q_proj").
func TargetModule(short string) (string, error) {
	for _, t := range loraTargets {
		if t.short == short {
			return t.module, nil
		}
	}
	return "", fmt.Errorf("unknown LoRA target %q (want one of %s)", short, strings.Join(LoRATargets(), ", "))
}

// ModuleDims returns the input and output sizes of a layer's linear module,
// given by its module path ("self_attn.q_proj") or PEFT short name.
func ModuleDims(c Config, module string) (in, out int, err error) {
	short := module[strings.LastIndexByte(module, '.')+1:]
	if _, err := TargetModule(short); err != nil {
		return 0, 0, err
	}
	h, q, kv, inter := c.HiddenSize, c.NumAttentionHeads*c.HeadDim, c.NumKeyValueHeads*c.HeadDim, c.IntermediateSize
	switch short {
	case "q_proj":
		return h, q, nil
	case "k_proj", "v_proj":
		return h, kv, nil
	case "o_proj":
		return q, h, nil
	case "gate_proj", "up_proj":
		return h, inter, nil
	default: // down_proj
		return inter, h, nil
	}
}

// LoRAName is the PEFT tensor name of one LoRA factor: module is a layer's
// module path such as "self_attn.q_proj" or "mlp.down_proj", ab is "A" or
// "B". Example: base_model.model.model.layers.3.mlp.down_proj.lora_B.weight.
func LoRAName(layer int, module string, ab string) string {
	return fmt.Sprintf("base_model.model.model.layers.%d.%s.lora_%s.weight", layer, module, ab)
}

// AdapterFile is what adapter_config.json says about a LoRA adapter.
type AdapterFile struct {
	Rank      int
	Alpha     float64
	Targets   []string // PEFT short names (q_proj ... down_proj)
	BaseModel string   // base_model_name_or_path
}

// canonicalTargets validates targets and returns them deduplicated in
// architecture order; empty means all seven.
func canonicalTargets(targets []string) ([]string, error) {
	if len(targets) == 0 {
		return LoRATargets(), nil
	}
	var errs []error
	set := map[string]bool{}
	for _, t := range targets {
		if _, err := TargetModule(t); err != nil {
			errs = append(errs, err)
		}
		set[t] = true
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var out []string
	for _, t := range loraTargets {
		if set[t.short] {
			out = append(out, t.short)
		}
	}
	return out, nil
}

// ExpectedAdapterTensors lists the LoRA factors of an adapter on c: for each
// layer and each target in architecture order, lora_A [rank, in] then
// lora_B [out, rank].
func ExpectedAdapterTensors(c Config, rank int, targets []string) ([]TensorSpec, error) {
	targets, err := canonicalTargets(targets)
	if err != nil {
		return nil, err
	}
	var specs []TensorSpec
	for l := 0; l < c.NumHiddenLayers; l++ {
		for _, short := range targets {
			module, _ := TargetModule(short)
			in, out, _ := ModuleDims(c, module)
			specs = append(specs,
				TensorSpec{LoRAName(l, module, "A"), []int{rank, in}},
				TensorSpec{LoRAName(l, module, "B"), []int{out, rank}})
		}
	}
	return specs, nil
}

// validate checks the adapter's own fields.
func (a AdapterFile) validate() error {
	var errs []error
	if a.Rank <= 0 {
		errs = append(errs, fmt.Errorf("rank r must be positive, got %d", a.Rank))
	}
	if !(a.Alpha > 0) || math.IsInf(a.Alpha, 0) {
		errs = append(errs, fmt.Errorf("lora_alpha must be positive and finite, got %v", a.Alpha))
	}
	if _, err := canonicalTargets(a.Targets); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// WriteAdapter writes a PEFT LoRA adapter into dir (created if needed):
// adapter_config.json with the keys PEFT writes (sorted, indent 2; target
// modules in architecture order, all seven when a.Targets is empty) and
// adapter_model.safetensors with PEFT tensor names. The tensor names are
// checked against the targets but their shapes, which depend on the base
// model, are checked by ReadAdapter.
func WriteAdapter(dir string, a AdapterFile, ts []Tensor) error {
	if err := a.validate(); err != nil {
		return fmt.Errorf("write adapter %s: %w", dir, err)
	}
	targets, _ := canonicalTargets(a.Targets)
	if err := checkAdapterNames(targets, a.Rank, ts); err != nil {
		return fmt.Errorf("write adapter %s: %w", dir, err)
	}
	cfg := map[string]any{
		"alpha_pattern":           map[string]any{},
		"auto_mapping":            nil,
		"base_model_name_or_path": a.BaseModel,
		"bias":                    "none",
		"fan_in_fan_out":          false,
		"inference_mode":          true,
		"init_lora_weights":       true,
		"layers_pattern":          nil,
		"layers_to_transform":     nil,
		"lora_alpha":              a.Alpha,
		"lora_dropout":            0.0,
		"modules_to_save":         nil,
		"peft_type":               "LORA",
		"r":                       a.Rank,
		"rank_pattern":            map[string]any{},
		"revision":                nil,
		"target_modules":          targets,
		"task_type":               "CAUSAL_LM",
		"use_dora":                false,
		"use_rslora":              false,
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("encode adapter config: %w", err)
	}
	b = append(b, '\n')
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write adapter: %w", err)
	}
	if err := WriteSafetensors(filepath.Join(dir, AdapterWeightsFile), ts, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("write adapter: %w", err)
	}
	return atomicfile.WriteFrom(filepath.Join(dir, AdapterConfigFile), func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// checkAdapterNames checks that every tensor is a well-formed LoRA factor of
// one of the targets, with the rank in the right dimension.
func checkAdapterNames(targets []string, rank int, ts []Tensor) error {
	modules := map[string]bool{}
	for _, t := range targets {
		m, _ := TargetModule(t)
		modules[m] = true
	}
	var errs []error
	for _, t := range ts {
		var module, ab string
		rest, ok := strings.CutPrefix(t.Name, "base_model.model.model.layers.")
		if ok {
			var layerStr string
			layerStr, rest, ok = strings.Cut(rest, ".")
			n, err := strconv.Atoi(layerStr)
			ok = ok && err == nil && n >= 0 && strconv.Itoa(n) == layerStr
		}
		if ok {
			switch {
			case strings.HasSuffix(rest, ".lora_A.weight"):
				module, ab = strings.TrimSuffix(rest, ".lora_A.weight"), "A"
			case strings.HasSuffix(rest, ".lora_B.weight"):
				module, ab = strings.TrimSuffix(rest, ".lora_B.weight"), "B"
			default:
				ok = false
			}
		}
		if !ok {
			errs = append(errs, fmt.Errorf("tensor %q is not a PEFT LoRA factor name (want %s)", t.Name, LoRAName(0, "self_attn.q_proj", "A")))
			continue
		}
		if !modules[module] {
			errs = append(errs, fmt.Errorf("tensor %q adapts %s, which is not among the targets %v", t.Name, module, targets))
			continue
		}
		if len(t.Shape) != 2 || (ab == "A" && t.Shape[0] != rank) || (ab == "B" && t.Shape[1] != rank) {
			want := "[r, in]"
			if ab == "B" {
				want = "[out, r]"
			}
			errs = append(errs, fmt.Errorf("tensor %q has shape %v, expected %s with r = %d", t.Name, t.Shape, want, rank))
		}
	}
	return errors.Join(errs...)
}

// ReadAdapter reads a PEFT LoRA adapter from dir and validates it against
// the base model config c: adapter_config.json must describe a plain LoRA
// (peft_type LORA, bias none, no DoRA, rsLoRA, rank or alpha patterns,
// layer subsets or extra saved modules) and adapter_model.safetensors must
// hold exactly the factors ExpectedAdapterTensors lists, with their shapes.
// target_modules may also be the PEFT shorthand "all-linear". Targets come
// back in architecture order; tensors sorted by name.
func ReadAdapter(dir string, c Config) (AdapterFile, []Tensor, error) {
	cfgPath := filepath.Join(dir, AdapterConfigFile)
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return AdapterFile{}, nil, fmt.Errorf("read adapter config: %w", err)
	}
	a, err := parseAdapterConfig(raw)
	if err != nil {
		return AdapterFile{}, nil, fmt.Errorf("adapter config %s: %w", cfgPath, err)
	}
	wPath := filepath.Join(dir, AdapterWeightsFile)
	ts, err := ReadSafetensors(wPath)
	if err != nil {
		return AdapterFile{}, nil, fmt.Errorf("read adapter: %w", err)
	}
	specs, err := ExpectedAdapterTensors(c, a.Rank, a.Targets)
	if err != nil {
		return AdapterFile{}, nil, fmt.Errorf("adapter config %s: %w", cfgPath, err)
	}
	if err := checkAgainst(specs, ts); err != nil {
		return AdapterFile{}, nil, fmt.Errorf("adapter %s: %w", wPath, err)
	}
	return a, ts, nil
}

func parseAdapterConfig(raw []byte) (AdapterFile, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return AdapterFile{}, fmt.Errorf("not a JSON object: %w", err)
	}
	var errs []error
	var missing []string
	for _, k := range []string{"peft_type", "r", "lora_alpha", "target_modules"} {
		if v, ok := keys[k]; !ok || string(v) == "null" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return AdapterFile{}, fmt.Errorf("missing required keys: %s", strings.Join(missing, ", "))
	}
	var cfg struct {
		PeftType      string          `json:"peft_type"`
		R             int             `json:"r"`
		Alpha         float64         `json:"lora_alpha"`
		Targets       json.RawMessage `json:"target_modules"`
		BaseModel     *string         `json:"base_model_name_or_path"`
		TaskType      *string         `json:"task_type"`
		Bias          *string         `json:"bias"`
		UseDora       bool            `json:"use_dora"`
		UseRSLoRA     bool            `json:"use_rslora"`
		FanInFanOut   bool            `json:"fan_in_fan_out"`
		RankPattern   map[string]any  `json:"rank_pattern"`
		AlphaPattern  map[string]any  `json:"alpha_pattern"`
		LayersToXform json.RawMessage `json:"layers_to_transform"`
		ModulesToSave json.RawMessage `json:"modules_to_save"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return AdapterFile{}, fmt.Errorf("decode: %w", err)
	}
	if cfg.PeftType != "LORA" {
		errs = append(errs, fmt.Errorf("peft_type is %q, want \"LORA\"", cfg.PeftType))
	}
	if cfg.TaskType != nil && *cfg.TaskType != "CAUSAL_LM" {
		errs = append(errs, fmt.Errorf("task_type is %q, want \"CAUSAL_LM\"", *cfg.TaskType))
	}
	if cfg.Bias != nil && *cfg.Bias != "none" {
		errs = append(errs, fmt.Errorf("bias is %q; only \"none\" is supported", *cfg.Bias))
	}
	for _, f := range []struct {
		key string
		on  bool
	}{{"use_dora", cfg.UseDora}, {"use_rslora", cfg.UseRSLoRA}, {"fan_in_fan_out", cfg.FanInFanOut},
		{"rank_pattern", len(cfg.RankPattern) > 0}, {"alpha_pattern", len(cfg.AlphaPattern) > 0},
		{"layers_to_transform", isSet(cfg.LayersToXform)}, {"modules_to_save", isSet(cfg.ModulesToSave)}} {
		if f.on {
			errs = append(errs, fmt.Errorf("%s is set; plain LoRA adapters only", f.key))
		}
	}
	a := AdapterFile{Rank: cfg.R, Alpha: cfg.Alpha}
	if cfg.BaseModel != nil {
		a.BaseModel = *cfg.BaseModel
	}
	var targets []string
	var all string
	if err := json.Unmarshal(cfg.Targets, &all); err == nil {
		if all != "all-linear" {
			errs = append(errs, fmt.Errorf("target_modules %q: only a list of module names or \"all-linear\" is supported", all))
		}
	} else if err := json.Unmarshal(cfg.Targets, &targets); err != nil {
		errs = append(errs, fmt.Errorf("target_modules must be a list of strings: %w", err))
	} else if len(targets) == 0 {
		errs = append(errs, fmt.Errorf("target_modules is empty"))
	}
	a.Targets = targets
	if err := a.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return AdapterFile{}, errors.Join(errs...)
	}
	a.Targets, _ = canonicalTargets(targets)
	return a, nil
}

// isSet reports whether a raw JSON value is present and not null or empty.
func isSet(v json.RawMessage) bool {
	s := strings.TrimSpace(string(v))
	return s != "" && s != "null" && s != "[]" && s != "{}"
}

// SortTargets returns targets in architecture order (an error names any
// unknown one); empty means all seven.
func SortTargets(targets []string) ([]string, error) {
	return canonicalTargets(targets)
}
