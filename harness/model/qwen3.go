package model

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// qwen3Published holds the architecture of the published Qwen3 dense
// checkpoints of the paper (Hugging Face Qwen/Qwen3-0.6B, -1.7B and -4B
// config.json), keyed by their size suffix.
var qwen3Published = map[string]Config{
	"0.6B": {HiddenSize: 1024, IntermediateSize: 3072, NumHiddenLayers: 28, NumAttentionHeads: 16, NumKeyValueHeads: 8},
	"1.7B": {HiddenSize: 2048, IntermediateSize: 6144, NumHiddenLayers: 28, NumAttentionHeads: 16, NumKeyValueHeads: 8},
	"4B":   {HiddenSize: 2560, IntermediateSize: 9728, NumHiddenLayers: 36, NumAttentionHeads: 32, NumKeyValueHeads: 8},
}

// Qwen3Sizes lists the sizes Qwen3Published knows, smallest first.
func Qwen3Sizes() []string {
	out := make([]string, 0, len(qwen3Published))
	for k := range qwen3Published {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b string) int {
		return qwen3Published[a].HiddenSize - qwen3Published[b].HiddenSize
	})
	return out
}

// Qwen3Published returns the config of a published Qwen3 dense checkpoint
// ("0.6B", "1.7B" or "4B", case-insensitive, with or without a "Qwen3-"
// prefix): head dim 128, vocab 151,936, rope theta 1e6, RMSNorm eps 1e-6,
// tied embeddings, bf16, <|endoftext|> and <|im_end|> as BOS and EOS.
// layers > 0 replaces the published number of layers (a narrow-depth
// stand-in with the real widths).
func Qwen3Published(size string, layers int) (Config, error) {
	key := strings.TrimPrefix(strings.ToLower(size), "qwen3-")
	for k, c := range qwen3Published {
		if strings.ToLower(k) != key {
			continue
		}
		bos, eos := 151643, 151645
		c.Architectures = []string{"Qwen3ForCausalLM"}
		c.ModelType = ModelTypeQwen3
		c.HeadDim = 128
		c.RMSNormEps = 1e-6
		c.RopeTheta = 1e6
		c.VocabSize = 151936
		c.MaxPositionEmbeddings = 40960
		c.TieWordEmbeddings = true
		c.TorchDtype = "bfloat16"
		c.BOSTokenID, c.EOSTokenID = &bos, &eos
		if layers > 0 {
			c.NumHiddenLayers = layers
		}
		return c, c.Validate()
	}
	return Config{}, fmt.Errorf("Qwen3 size %q: want one of %s", size, strings.Join(Qwen3Sizes(), ", "))
}

// RoundBF16 rounds v to the nearest bfloat16 value (ties to even), kept as
// float32; NaN stays NaN.
func RoundBF16(v float32) float32 {
	if v != v {
		return v
	}
	b := math.Float32bits(v)
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}
