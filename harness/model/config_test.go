package model

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinyConfig is a small valid config used across the tests.
func tinyConfig() Config {
	return Config{
		Architectures:         []string{"Qwen3ForCausalLM"},
		ModelType:             "qwen3",
		HiddenSize:            8,
		IntermediateSize:      12,
		NumHiddenLayers:       2,
		NumAttentionHeads:     4,
		NumKeyValueHeads:      2,
		HeadDim:               4,
		RMSNormEps:            1e-6,
		RopeTheta:             10000,
		VocabSize:             10,
		MaxPositionEmbeddings: 64,
		TieWordEmbeddings:     true,
	}
}

// qwen3_06B is the config.json of Qwen/Qwen3-0.6B as published (abridged to
// the keys transformers reads plus a few it ignores).
const qwen3_06B = `{
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}`

func TestLoadConfig(t *testing.T) {
	edit := func(old, new string) string {
		if !strings.Contains(qwen3_06B, old) {
			panic("test edit does not apply: " + old)
		}
		return strings.Replace(qwen3_06B, old, new, 1)
	}
	tests := []struct {
		name    string
		json    string
		wantErr []string // substrings that must all appear; nil = success
		check   func(t *testing.T, c Config)
	}{
		{name: "qwen3-0.6B", json: qwen3_06B, check: func(t *testing.T, c Config) {
			if c.HiddenSize != 1024 || c.NumKeyValueHeads != 8 || c.RopeTheta != 1e6 || !c.TieWordEmbeddings || *c.EOSTokenID != 151645 {
				t.Errorf("decoded config %+v", c)
			}
		}},
		{name: "rope_parameters form", json: edit(`"rope_theta": 1000000,`, `"rope_parameters": {"rope_type": "default", "rope_theta": 500000},`),
			check: func(t *testing.T, c Config) {
				if c.RopeTheta != 500000 {
					t.Errorf("rope theta %v, want 500000", c.RopeTheta)
				}
			}},
		{name: "unknown model_type", json: edit(`"model_type": "qwen3"`, `"model_type": "llama"`), wantErr: []string{`unknown model_type "llama"`}},
		{name: "missing keys named", json: edit(`"head_dim": 128,`, ``), wantErr: []string{"missing required keys: head_dim"}},
		{name: "several missing", json: edit(`"rms_norm_eps": 1e-06,`, ``), wantErr: []string{"rms_norm_eps"}},
		{name: "null counts as missing", json: edit(`"vocab_size": 151936`, `"vocab_size": null`), wantErr: []string{"missing required keys: vocab_size"}},
		{name: "attention bias", json: edit(`"attention_bias": false`, `"attention_bias": true`), wantErr: []string{"attention_bias is true"}},
		{name: "gelu", json: edit(`"hidden_act": "silu"`, `"hidden_act": "gelu"`), wantErr: []string{`hidden_act is "gelu"`}},
		{name: "rope scaling", json: edit(`"rope_scaling": null`, `"rope_scaling": {"type": "yarn", "factor": 4}`), wantErr: []string{"rope_scaling is"}},
		{name: "sliding window", json: edit(`"use_sliding_window": false`, `"use_sliding_window": true`), wantErr: []string{"use_sliding_window"}},
		{name: "layer types", json: edit(`"vocab_size": 151936`, `"vocab_size": 151936, "layer_types": ["full_attention", "sliding_attention"]`),
			wantErr: []string{`layer_types[1] is "sliding_attention"`}},
		{name: "other architecture", json: edit(`["Qwen3ForCausalLM"]`, `["Qwen2ForCausalLM"]`), wantErr: []string{`"Qwen2ForCausalLM"`}},
		{name: "bad rope type", json: edit(`"rope_theta": 1000000,`, `"rope_parameters": {"rope_type": "yarn", "rope_theta": 5},`), wantErr: []string{`rope_type "yarn"`}},
		{name: "kv heads do not divide", json: edit(`"num_key_value_heads": 8`, `"num_key_value_heads": 6`), wantErr: []string{"num_key_value_heads 6 does not divide num_attention_heads 16"}},
		{name: "wrong type", json: edit(`"hidden_size": 1024`, `"hidden_size": "big"`), wantErr: []string{"hidden_size"}},
		{name: "not JSON", json: `{"model_type": `, wantErr: []string{"not a JSON object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(path, []byte(tt.json), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := LoadConfig(path)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("LoadConfig: %v", err)
				}
				tt.check(t, c)
				return
			}
			if err == nil {
				t.Fatalf("LoadConfig succeeded, want error containing %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(c *Config)
		wantErr []string
	}{
		{name: "valid", mutate: func(c *Config) {}},
		{name: "untied valid", mutate: func(c *Config) { c.TieWordEmbeddings = false }},
		{name: "zero hidden", mutate: func(c *Config) { c.HiddenSize = 0 }, wantErr: []string{"hidden_size must be positive, got 0"}},
		{name: "negative layers", mutate: func(c *Config) { c.NumHiddenLayers = -1 }, wantErr: []string{"num_hidden_layers must be positive, got -1"}},
		{name: "odd head dim", mutate: func(c *Config) { c.HeadDim = 3 }, wantErr: []string{"head_dim must be even"}},
		{name: "kv heads", mutate: func(c *Config) { c.NumKeyValueHeads = 3 }, wantErr: []string{"num_key_value_heads 3 does not divide num_attention_heads 4"}},
		{name: "eps", mutate: func(c *Config) { c.RMSNormEps = 0 }, wantErr: []string{"rms_norm_eps"}},
		{name: "theta", mutate: func(c *Config) { c.RopeTheta = -1 }, wantErr: []string{"rope_theta"}},
		{name: "model type", mutate: func(c *Config) { c.ModelType = "" }, wantErr: []string{`model_type is ""`}},
		{name: "all reported", mutate: func(c *Config) { c.VocabSize = 0; c.IntermediateSize = 0 },
			wantErr: []string{"vocab_size must be positive", "intermediate_size must be positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tinyConfig()
			tt.mutate(&c)
			err := c.Validate()
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate succeeded, want %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestWriteConfigRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c := tinyConfig()
	eos := 7
	c.EOSTokenID = &eos
	p1, p2 := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := WriteConfig(p1, c); err != nil {
		t.Fatal(err)
	}
	got, err := LoadConfig(p1)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteConfig(p2, got); err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b1, b2) {
		t.Errorf("rewrite differs:\n%s\n%s", b1, b2)
	}
	if !bytes.HasSuffix(b1, []byte("}\n")) || !bytes.Contains(b1, []byte("\n  \"hidden_size\": 8,\n")) {
		t.Errorf("not indented JSON with a trailing newline:\n%s", b1)
	}
	bad := c
	bad.HeadDim = 0
	if err := WriteConfig(filepath.Join(dir, "bad.json"), bad); err == nil || !strings.Contains(err.Error(), "head_dim") {
		t.Errorf("WriteConfig of an invalid config: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.json")); !os.IsNotExist(err) {
		t.Errorf("invalid config was written")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestNumParams(t *testing.T) {
	sum := func(c Config) int64 {
		var n int64
		for _, s := range ExpectedTensors(c) {
			m := int64(1)
			for _, d := range s.Shape {
				m *= int64(d)
			}
			n += m
		}
		return n
	}
	c06 := func() Config {
		path := filepath.Join(t.TempDir(), "config.json")
		os.WriteFile(path, []byte(qwen3_06B), 0o644)
		c, err := LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}()
	untied := tinyConfig()
	untied.TieWordEmbeddings = false
	tests := []struct {
		name string
		c    Config
		want int64
	}{
		// embed 10*8 + 2 layers * (norms 16 + q 128 + k,v 2*64 + o 128 + qk-norm 8 + mlp 3*96) + norm 8
		{"tiny tied", tinyConfig(), 80 + 2*(16+128+128+128+8+288) + 8},
		{"tiny untied", untied, 80 + 2*(16+128+128+128+8+288) + 8 + 80},
		// Qwen3-0.6B model card: 0.6B parameters, 0.44B non-embedding.
		{"qwen3-0.6B", c06, 596_049_920},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.NumParams(); got != tt.want {
				t.Errorf("NumParams = %d, want %d", got, tt.want)
			}
			if got := sum(tt.c); got != tt.want {
				t.Errorf("sum over ExpectedTensors = %d, want %d", got, tt.want)
			}
		})
	}
	nonEmb := c06.NumParams() - int64(c06.VocabSize*c06.HiddenSize)
	if nonEmb/10_000_000 != 44 {
		t.Errorf("Qwen3-0.6B non-embedding parameters %d, model card says 0.44B", nonEmb)
	}
}
