package native

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/keyed"
)

func toyEngine(t *testing.T) *Engine {
	t.Helper()
	cfg := testConfig(true)
	cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim = 32, 64, 8
	tok, err := model.NewCharTokenizer(model.DefaultAlphabet())
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg, tok, InitWeights(cfg, 3), Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestSupervisedToyCorpus: full-parameter training on a fixed corpus drives
// the mean next-token loss from ln(99) ≈ 4.6 to below 0.3 in 80 steps.
func TestSupervisedToyCorpus(t *testing.T) {
	e := toyEngine(t)
	text := strings.Repeat("the cat sat on the mat. ", 6)
	var batch []Example
	for i := 0; i < 8; i++ {
		ids, err := e.tok.Encode(text[i*3 : i*3+40])
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, Example{IDs: ids, LossMask: mask(len(ids))})
	}
	opt := defaultTrainOptions()
	opt.LR, opt.WeightDecay, opt.GradClip = 1e-2, 0, 1
	var first, last float64
	for step := 0; step < 80; step++ {
		st, err := e.Supervised(context.Background(), batch, opt)
		if err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			first = st.Loss
		}
		last = st.Loss
	}
	t.Logf("supervised loss %.3f -> %.3f", first, last)
	if math.Abs(first-math.Log(99)) > 0.3 || last > 0.3 {
		t.Errorf("supervised loss %.3f -> %.3f, want from about ln(99) to below 0.3", first, last)
	}
}

// TestGRPOToyReward: a base model pretrained on random strings over
// "abcdx" (so 'x' is a likely token but, after 60 steps, still a rare
// one) is trained with GRPO on the reward "fraction of completion tokens
// that are 'x'"; the reward of fresh samples must rise from below 0.35 to
// above 0.5 in 15 steps.
func TestGRPOToyReward(t *testing.T) {
	e := toyEngine(t)
	ctx := context.Background()
	var corpus []Example
	for i := 0; i < 8; i++ {
		var b strings.Builder
		b.WriteString("<|im_start|>user\n" + string(rune('a'+i%4)) + "<|im_end|>\n<|im_start|>assistant\n")
		for j := 0; j < 12; j++ {
			b.WriteByte("abcdx"[keyed.Mix64(uint64(i*100+j))%5])
		}
		ids, err := e.tok.Encode(b.String())
		if err != nil {
			t.Fatal(err)
		}
		corpus = append(corpus, Example{IDs: ids, LossMask: mask(len(ids))})
	}
	sopt := defaultTrainOptions()
	sopt.LR, sopt.WeightDecay = 1e-2, 0
	for step := 0; step < 60; step++ {
		if _, err := e.Supervised(ctx, corpus, sopt); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.NewAdapter(ctx, "p", engine.AdapterConfig{Rank: 4, Alpha: 8, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	x, _ := e.tok.Encode("x")
	reward := func(ids []int32) float64 {
		n := 0
		for _, id := range ids {
			if id == x[0] {
				n++
			}
		}
		return float64(n) / float64(len(ids))
	}
	const groups, g = 4, 8
	sample := func(seedBase uint64) ([]engine.Completion, float64) {
		var reqs []engine.Request
		for p := 0; p < groups; p++ {
			for k := 0; k < g; k++ {
				reqs = append(reqs, engine.Request{Adapter: "p", Messages: chat(string(rune('a' + p))), MaxNewTokens: 6, Temperature: 1, Seed: seedBase + uint64(p*g+k)})
			}
		}
		comps, err := e.Generate(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		mean := 0.0
		for _, c := range comps {
			mean += reward(c.IDs)
		}
		return comps, mean / float64(len(comps))
	}
	_, before := sample(1 << 40)
	opt := defaultTrainOptions()
	opt.LR, opt.Temperature = 2e-2, 1
	for step := 0; step < 15; step++ {
		comps, _ := sample(uint64(step) * 1000)
		var turns []engine.Turn
		for p := 0; p < groups; p++ {
			grp := comps[p*g : (p+1)*g]
			var mu, sd float64
			for _, c := range grp {
				mu += reward(c.IDs) / g
			}
			for _, c := range grp {
				sd += (reward(c.IDs) - mu) * (reward(c.IDs) - mu) / g
			}
			sd = math.Sqrt(sd)
			for k, c := range grp {
				turns = append(turns, engine.Turn{Adapter: "p", Role: "generator", Agent: "generator" + string(rune('0'+k%2)),
					PromptIDs: c.PromptIDs, CompletionIDs: c.IDs, OldLogProbs: c.LogProbs, Advantage: (reward(c.IDs) - mu) / (sd + 1e-6)})
			}
		}
		if _, err := e.TrainStep(ctx, "p", turns, opt); err != nil {
			t.Fatal(err)
		}
	}
	_, after := sample(1 << 40)
	t.Logf("reward %.3f -> %.3f", before, after)
	if before > 0.35 || after < 0.5 {
		t.Errorf("reward %.3f -> %.3f, want from below 0.35 to above 0.5", before, after)
	}
}
