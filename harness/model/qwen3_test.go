package model

import (
	"math"
	"testing"
)

func TestQwen3Published(t *testing.T) {
	for _, tc := range []struct {
		size          string
		hidden, heads int
	}{{"0.6B", 1024, 16}, {"Qwen3-1.7b", 2048, 16}, {"4b", 2560, 32}} {
		c, err := Qwen3Published(tc.size, 2)
		if err != nil {
			t.Fatalf("%s: %v", tc.size, err)
		}
		if c.HiddenSize != tc.hidden || c.NumAttentionHeads != tc.heads || c.NumHiddenLayers != 2 || c.VocabSize != 151936 || c.HeadDim != 128 {
			t.Errorf("%s: %+v", tc.size, c)
		}
	}
	if _, err := Qwen3Published("8B", 0); err == nil {
		t.Error("8B: want an error naming the known sizes")
	}
	if got := Qwen3Sizes(); len(got) != 3 || got[0] != "0.6B" || got[2] != "4B" {
		t.Errorf("sizes %v", got)
	}
}

func TestRoundBF16(t *testing.T) {
	for _, tc := range []struct{ in, want float32 }{
		{1, 1}, {1 + 1.0/256, 1}, {1 + 3.0/256, 1 + 4.0/256}, {-2.5, -2.5}, {1 + 1.0/128, 1 + 1.0/128},
	} {
		if got := RoundBF16(tc.in); got != tc.want {
			t.Errorf("RoundBF16(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if v := RoundBF16(float32(math.NaN())); v == v {
		t.Error("NaN must stay NaN")
	}
}
