package native

import (
	"math"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/keyed"
)

// testConfig is a tiny Qwen3 over the default character alphabet.
func testConfig(tied bool) model.Config {
	tok, _ := model.NewCharTokenizer(model.DefaultAlphabet())
	return model.Config{
		Architectures: []string{"Qwen3ForCausalLM"}, ModelType: "qwen3",
		HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 2,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 4,
		RMSNormEps: 1e-6, RopeTheta: 10000, VocabSize: tok.VocabSize(),
		MaxPositionEmbeddings: 96, TieWordEmbeddings: tied,
	}
}

func testEngine(t testing.TB, tied bool, threads int) *Engine {
	t.Helper()
	cfg := testConfig(tied)
	tok, err := model.NewCharTokenizer(model.DefaultAlphabet())
	if err != nil {
		t.Fatal(err)
	}
	w := InitWeights(cfg, 7)
	// Larger-than-default weights so that gradients are not tiny.
	for i := range w.Data {
		w.Data[i] *= 5
	}
	for _, lw := range w.Layers {
		for _, v := range [][]float32{lw.AttnNorm, lw.MLPNorm, lw.QNorm, lw.KNorm} {
			for j := range v {
				v[j] = 1 + 0.1*float32(keyed.UniformAt(11, uint64(j)))
			}
		}
	}
	for j := range w.Norm {
		w.Norm[j] = 1 + 0.1*float32(keyed.UniformAt(12, uint64(j)))
	}
	e, err := New(cfg, tok, w, Options{Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// randVec is a deterministic vector with entries in [-s, s).
func randVec(n int, key uint64, s float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(s * keyed.UniformAt(key, uint64(i)))
	}
	return v
}

// fdCheck compares analytic gradient g of loss with central differences in
// p at (up to) 24 indices spread over p.
func fdCheck(t *testing.T, name string, p, g []float32, loss func() float64) {
	t.Helper()
	const h = 1e-3
	n := len(p)
	step := max(1, n/24)
	worst := 0.0
	scale := 0.0
	for _, v := range g {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	if scale == 0 {
		t.Errorf("%s: analytic gradient is identically zero", name)
	}
	for i := 0; i < n; i += step {
		orig := p[i]
		p[i] = orig + h
		lp := loss()
		p[i] = orig - h
		lm := loss()
		p[i] = orig
		fd := (lp - lm) / (2 * h)
		an := float64(g[i])
		err := math.Abs(fd-an) / math.Max(1e-2, math.Abs(fd)+math.Abs(an))
		worst = math.Max(worst, err)
		if math.Abs(fd-an) > 1e-5+2e-3*scale+2e-2*math.Abs(fd) {
			t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g", name, i, an, fd)
		}
	}
	t.Logf("%s: worst relative error %.2e", name, worst)
}

func weighted(y, r []float32) float64 {
	var s float64
	for i, v := range y {
		s += float64(v) * float64(r[i])
	}
	return s
}

func defaultTrainOptions() engine.TrainOptions {
	return engine.TrainOptions{ClipLow: 0.2, ClipHigh: 0.28, LossAgg: engine.SeqMeanTokenMean, Temperature: 0.7,
		LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, GradClip: 1}
}

func adapterCfg(rank int) engine.AdapterConfig {
	return engine.AdapterConfig{Rank: rank, Alpha: float64(2 * rank), Seed: 5}
}
