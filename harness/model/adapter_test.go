package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoRAName(t *testing.T) {
	tests := []struct {
		layer      int
		module, ab string
		want       string
	}{
		{0, "self_attn.q_proj", "A", "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"},
		{11, "mlp.down_proj", "B", "base_model.model.model.layers.11.mlp.down_proj.lora_B.weight"},
	}
	for _, tt := range tests {
		if got := LoRAName(tt.layer, tt.module, tt.ab); got != tt.want {
			t.Errorf("LoRAName(%d, %q, %q) = %q, want %q", tt.layer, tt.module, tt.ab, got, tt.want)
		}
	}
}

func TestModuleDims(t *testing.T) {
	c := tinyConfig() // H 8, heads 4x4, kv 2x4, I 12
	tests := []struct {
		module  string
		in, out int
	}{
		{"self_attn.q_proj", 8, 16}, {"self_attn.k_proj", 8, 8}, {"v_proj", 8, 8}, {"self_attn.o_proj", 16, 8},
		{"mlp.gate_proj", 8, 12}, {"mlp.up_proj", 8, 12}, {"mlp.down_proj", 12, 8},
	}
	for _, tt := range tests {
		in, out, err := ModuleDims(c, tt.module)
		if err != nil || in != tt.in || out != tt.out {
			t.Errorf("ModuleDims(%q) = %d, %d, %v; want %d, %d", tt.module, in, out, err, tt.in, tt.out)
		}
	}
	if _, _, err := ModuleDims(c, "mlp.fc1"); err == nil || !strings.Contains(err.Error(), `unknown LoRA target "fc1"`) {
		t.Errorf("unknown module: %v", err)
	}
}

func TestAdapterRoundTrip(t *testing.T) {
	c := tinyConfig()
	a := AdapterFile{Rank: 2, Alpha: 4, Targets: []string{"down_proj", "q_proj", "v_proj"}, BaseModel: "tiny-d8"}
	specs, err := ExpectedAdapterTensors(c, a.Rank, a.Targets)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2*3*c.NumHiddenLayers {
		t.Fatalf("%d specs", len(specs))
	}
	ts := fillTensors(specs)
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := WriteAdapter(dir, a, ts); err != nil {
		t.Fatal(err)
	}
	got, gts, err := ReadAdapter(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rank != 2 || got.Alpha != 4 || got.BaseModel != "tiny-d8" || !slices.Equal(got.Targets, []string{"q_proj", "v_proj", "down_proj"}) {
		t.Errorf("adapter %+v", got)
	}
	if len(gts) != len(ts) {
		t.Fatalf("%d tensors", len(gts))
	}
	byName := map[string]Tensor{}
	for _, x := range gts {
		byName[x.Name] = x
	}
	for _, x := range ts {
		if g := byName[x.Name]; !slices.Equal(g.Shape, x.Shape) || !slices.Equal(g.Data, x.Data) {
			t.Errorf("%s differs", x.Name)
		}
	}
	if g := byName["base_model.model.model.layers.1.mlp.down_proj.lora_A.weight"]; !slices.Equal(g.Shape, []int{2, 12}) {
		t.Errorf("down_proj lora_A shape %v, want [2 12]", g.Shape)
	}
	if g := byName["base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight"]; !slices.Equal(g.Shape, []int{16, 2}) {
		t.Errorf("q_proj lora_B shape %v, want [16 2]", g.Shape)
	}
	raw, err := os.ReadFile(filepath.Join(dir, AdapterConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"peft_type": "LORA", "r": 2.0, "lora_alpha": 4.0, "task_type": "CAUSAL_LM", "bias": "none", "base_model_name_or_path": "tiny-d8"} {
		if cfg[k] != v {
			t.Errorf("adapter_config.json %s = %v, want %v", k, cfg[k], v)
		}
	}
	// Writing the same adapter again gives the same bytes.
	dir2 := filepath.Join(t.TempDir(), "again")
	if err := WriteAdapter(dir2, got, gts); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{AdapterConfigFile, AdapterWeightsFile} {
		b1, _ := os.ReadFile(filepath.Join(dir, f))
		b2, _ := os.ReadFile(filepath.Join(dir2, f))
		if string(b1) != string(b2) {
			t.Errorf("%s not byte-identical on rewrite", f)
		}
	}
}

func TestReadAdapterErrors(t *testing.T) {
	c := tinyConfig()
	a := AdapterFile{Rank: 2, Alpha: 8, Targets: []string{"q_proj", "k_proj"}}
	specs, _ := ExpectedAdapterTensors(c, a.Rank, a.Targets)
	good := fillTensors(specs)
	other := tinyConfig()
	other.NumKeyValueHeads = 4
	tests := []struct {
		name    string
		cfg     func(m map[string]any)
		ts      []Tensor
		base    Config
		wantErr []string
	}{
		{name: "other base model", base: other,
			wantErr: []string{`tensor "base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight" has shape [8 2], expected shape [16 2]`}},
		{name: "missing factor", ts: good[1:], wantErr: []string{`missing tensor "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" (expected shape [2 8])`}},
		{name: "all-linear needs all modules", cfg: func(m map[string]any) { m["target_modules"] = "all-linear" },
			wantErr: []string{`missing tensor "base_model.model.model.layers.0.mlp.gate_proj.lora_A.weight"`}},
		{name: "regex targets", cfg: func(m map[string]any) { m["target_modules"] = ".*proj" }, wantErr: []string{`target_modules ".*proj"`}},
		{name: "unknown target", cfg: func(m map[string]any) { m["target_modules"] = []string{"q_proj", "lm_head"} }, wantErr: []string{`unknown LoRA target "lm_head"`}},
		{name: "dora", cfg: func(m map[string]any) { m["use_dora"] = true }, wantErr: []string{"use_dora is set"}},
		{name: "rslora", cfg: func(m map[string]any) { m["use_rslora"] = true }, wantErr: []string{"use_rslora is set"}},
		{name: "rank pattern", cfg: func(m map[string]any) { m["rank_pattern"] = map[string]int{"q_proj": 4} }, wantErr: []string{"rank_pattern is set"}},
		{name: "layer subset", cfg: func(m map[string]any) { m["layers_to_transform"] = []int{0} }, wantErr: []string{"layers_to_transform is set"}},
		{name: "prefix tuning", cfg: func(m map[string]any) { m["peft_type"] = "PREFIX_TUNING" }, wantErr: []string{`peft_type is "PREFIX_TUNING"`}},
		{name: "missing r", cfg: func(m map[string]any) { delete(m, "r") }, wantErr: []string{"missing required keys: r"}},
		{name: "zero rank", cfg: func(m map[string]any) { m["r"] = 0 }, wantErr: []string{"rank r must be positive"}},
		{name: "bias", cfg: func(m map[string]any) { m["bias"] = "all" }, wantErr: []string{`bias is "all"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ts := good
			if tt.ts != nil {
				ts = tt.ts
			}
			if err := WriteSafetensors(filepath.Join(dir, AdapterWeightsFile), ts, nil); err != nil {
				t.Fatal(err)
			}
			m := map[string]any{"peft_type": "LORA", "r": 2, "lora_alpha": 8, "target_modules": []string{"k_proj", "q_proj"},
				"task_type": "CAUSAL_LM", "bias": "none", "use_dora": false, "rank_pattern": map[string]int{}, "layers_to_transform": nil}
			if tt.cfg != nil {
				tt.cfg(m)
			}
			raw, _ := json.Marshal(m)
			if err := os.WriteFile(filepath.Join(dir, AdapterConfigFile), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			base := c
			if tt.base.ModelType != "" {
				base = tt.base
			}
			_, _, err := ReadAdapter(dir, base)
			if err == nil {
				t.Fatalf("ReadAdapter succeeded, want %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestWriteAdapterErrors(t *testing.T) {
	c := tinyConfig()
	specs, _ := ExpectedAdapterTensors(c, 2, []string{"q_proj"})
	good := fillTensors(specs)
	tests := []struct {
		name    string
		a       AdapterFile
		ts      []Tensor
		wantErr string
	}{
		{"bad rank", AdapterFile{Rank: 0, Alpha: 1, Targets: []string{"q_proj"}}, good, "rank r must be positive"},
		{"bad alpha", AdapterFile{Rank: 2, Alpha: -1, Targets: []string{"q_proj"}}, good, "lora_alpha must be positive"},
		{"untargeted module", AdapterFile{Rank: 2, Alpha: 1, Targets: []string{"v_proj"}}, good, "not among the targets"},
		{"bad name", AdapterFile{Rank: 2, Alpha: 1, Targets: []string{"q_proj"}},
			[]Tensor{{Name: "model.layers.0.self_attn.q_proj.weight", Shape: []int{1}, Data: []float32{0}}}, "not a PEFT LoRA factor name"},
		{"rank in wrong place", AdapterFile{Rank: 3, Alpha: 1, Targets: []string{"q_proj"}}, good, "expected [r, in] with r = 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WriteAdapter(filepath.Join(t.TempDir(), "a"), tt.a, tt.ts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
