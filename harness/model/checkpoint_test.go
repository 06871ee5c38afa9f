package model

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fillTensors makes tensors for specs with deterministic distinct values.
func fillTensors(specs []TensorSpec) []Tensor {
	ts := make([]Tensor, len(specs))
	for i, s := range specs {
		n := 1
		for _, d := range s.Shape {
			n *= d
		}
		data := make([]float32, n)
		for j := range data {
			data[j] = float32(i) + float32(j)/float32(n+1)
		}
		ts[i] = Tensor{Name: s.Name, Shape: slices.Clone(s.Shape), Data: data}
	}
	return ts
}

func TestExpectedTensors(t *testing.T) {
	c := tinyConfig()
	specs := ExpectedTensors(c)
	if got, want := len(specs), 1+11*c.NumHiddenLayers+1; got != want {
		t.Fatalf("%d tensors, want %d", got, want)
	}
	byName := map[string][]int{}
	for _, s := range specs {
		byName[s.Name] = s.Shape
	}
	want := map[string][]int{
		"model.embed_tokens.weight":                      {10, 8},
		"model.layers.1.input_layernorm.weight":          {8},
		"model.layers.1.self_attn.q_proj.weight":         {16, 8},
		"model.layers.1.self_attn.k_proj.weight":         {8, 8},
		"model.layers.0.self_attn.v_proj.weight":         {8, 8},
		"model.layers.0.self_attn.o_proj.weight":         {8, 16},
		"model.layers.0.self_attn.q_norm.weight":         {4},
		"model.layers.0.self_attn.k_norm.weight":         {4},
		"model.layers.0.post_attention_layernorm.weight": {8},
		"model.layers.0.mlp.gate_proj.weight":            {12, 8},
		"model.layers.0.mlp.up_proj.weight":              {12, 8},
		"model.layers.0.mlp.down_proj.weight":            {8, 12},
		"model.norm.weight":                              {8},
	}
	for name, shape := range want {
		if !slices.Equal(byName[name], shape) {
			t.Errorf("%s: shape %v, want %v", name, byName[name], shape)
		}
	}
	if _, ok := byName["lm_head.weight"]; ok {
		t.Error("tied config lists lm_head.weight")
	}
	c.TieWordEmbeddings = false
	last := ExpectedTensors(c)[len(specs)]
	if last.Name != "lm_head.weight" || !slices.Equal(last.Shape, []int{10, 8}) {
		t.Errorf("untied config ends with %v", last)
	}
}

func TestCheckTensors(t *testing.T) {
	c := tinyConfig()
	good := fillTensors(ExpectedTensors(c))
	drop := func(name string) []Tensor {
		return slices.DeleteFunc(slices.Clone(good), func(t Tensor) bool { return t.Name == name })
	}
	reshape := func(name string, shape []int) []Tensor {
		ts := slices.Clone(good)
		for i := range ts {
			if ts[i].Name == name {
				ts[i].Shape = shape
			}
		}
		return ts
	}
	tests := []struct {
		name    string
		ts      []Tensor
		wantErr []string
	}{
		{"complete", good, nil},
		{"missing", drop("model.layers.1.mlp.up_proj.weight"),
			[]string{`missing tensor "model.layers.1.mlp.up_proj.weight" (expected shape [12 8])`}},
		{"wrong shape", reshape("model.layers.0.self_attn.k_proj.weight", []int{8, 4}),
			[]string{`tensor "model.layers.0.self_attn.k_proj.weight" has shape [8 4], expected shape [8 8]`}},
		{"transposed", reshape("model.layers.0.mlp.down_proj.weight", []int{12, 8}),
			[]string{`tensor "model.layers.0.mlp.down_proj.weight" has shape [12 8], expected shape [8 12]`}},
		{"unexpected lm_head on tied", append(slices.Clone(good), Tensor{Name: "lm_head.weight", Shape: []int{10, 8}, Data: make([]float32, 80)}),
			[]string{`unexpected tensor "lm_head.weight" with shape [10 8]`}},
		{"duplicate", append(slices.Clone(good), good[0]), []string{`tensor "model.embed_tokens.weight" given more than once`}},
		{"all collected", append(drop("model.norm.weight"), Tensor{Name: "model.layers.2.input_layernorm.weight", Shape: []int{8}, Data: make([]float32, 8)}),
			[]string{"2 tensor problem(s)", `missing tensor "model.norm.weight" (expected shape [8])`, `unexpected tensor "model.layers.2.input_layernorm.weight"`}},
		{"short data", func() []Tensor { ts := slices.Clone(good); ts[1].Data = ts[1].Data[:3]; return ts }(),
			[]string{`tensor "model.layers.0.input_layernorm.weight": shape [8] holds 8 values but data has 3`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTensors(c, tt.ts)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("CheckTensors: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckTensors passed, want %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	c := tinyConfig()
	c.TieWordEmbeddings = false
	ts := fillTensors(ExpectedTensors(c))
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := WriteCheckpoint(dir, c, ts); err != nil {
		t.Fatal(err)
	}
	gc, gts, err := ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if gc.NumParams() != c.NumParams() || gc.TieWordEmbeddings {
		t.Errorf("config %+v", gc)
	}
	if len(gts) != len(ts) {
		t.Fatalf("%d tensors, want %d", len(gts), len(ts))
	}
	want := map[string]Tensor{}
	for _, x := range ts {
		want[x.Name] = x
	}
	for _, g := range gts {
		if !slices.Equal(g.Data, want[g.Name].Data) {
			t.Errorf("%s: data differs", g.Name)
		}
	}
	// A checkpoint whose config no longer matches its weights is refused,
	// naming the tensor and the expected shape.
	c.IntermediateSize = 16
	if err := WriteConfig(filepath.Join(dir, ConfigFile), c); err != nil {
		t.Fatal(err)
	}
	_, _, err = ReadCheckpoint(dir)
	if err == nil || !strings.Contains(err.Error(), `tensor "model.layers.0.mlp.gate_proj.weight" has shape [12 8], expected shape [16 8]`) {
		t.Errorf("mismatched checkpoint: %v", err)
	}
	if err := WriteCheckpoint(filepath.Join(t.TempDir(), "x"), c, ts); err == nil {
		t.Error("WriteCheckpoint accepted tensors that do not match the config")
	}
	if _, err := os.Stat(filepath.Join(dir, WeightsFile)); err != nil {
		t.Error(err)
	}
}
