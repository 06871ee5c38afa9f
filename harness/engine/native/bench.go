package native

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/model"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// BenchSizes are the model sizes Bench knows, by name.
var BenchSizes = map[string]model.Config{
	"d64l2":  benchConfig(64, 2, 4, 2, 16, 256),
	"d128l4": benchConfig(128, 4, 8, 4, 16, 512),
}

func benchConfig(d, l, h, kv, hd, f int) model.Config {
	return model.Config{
		Architectures: []string{"Qwen3ForCausalLM"}, ModelType: "qwen3",
		HiddenSize: d, IntermediateSize: f, NumHiddenLayers: l, NumAttentionHeads: h, NumKeyValueHeads: kv,
		HeadDim: hd, RMSNormEps: 1e-6, RopeTheta: 1e6, VocabSize: 64, MaxPositionEmbeddings: 256,
		TieWordEmbeddings: true,
	}
}

// benchAlphabet has 61 characters, so with the 3 special tokens the
// vocabulary is exactly 64.
const benchAlphabet = "\n abcdefghijklmnopqrstuvwxyz0123456789+-*/=().,:;?!<>ABCDEFGH"

// BenchOptions configure Bench.
type BenchOptions struct {
	Threads int           // engine threads (default 1)
	MinTime time.Duration // minimum time per measurement (default 2s)
}

// BenchResult is what Bench measured.
type BenchResult struct {
	Size         string
	Threads      int
	TrainTokS    float64 // sequence tokens per second of a LoRA GRPO step, batch 32 x T 128
	TrainSteps   int
	TrainCores   float64 // process CPU time / wall time while training (cores actually obtained)
	GenTokS      float64 // generated tokens per second, batch 64, prompt 32, 96 new tokens
	GenRuns      int
	GenCores     float64
	GemmShape    string  // m x k x n of the GEMM measured
	GemmGFLOPS   float64 // the engine's tiled GEMM on that shape
	BlasGFLOPS   float64 // one blas32.Gemm call on the same shape
	PeakRSSBytes int64   // getrusage max RSS of the process (0 where unsupported)
}

// String renders the result as a small report.
func (r BenchResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "size %s, threads %d\n", r.Size, r.Threads)
	fmt.Fprintf(&b, "train (LoRA GRPO step, batch 32 x T 128): %.0f tok/s over %d steps; %.2f cores busy, %.0f tok/s per busy core\n",
		r.TrainTokS, r.TrainSteps, r.TrainCores, perCore(r.TrainTokS, r.TrainCores))
	fmt.Fprintf(&b, "generate (batch 64, prompt 32, 96 new):   %.0f tok/s over %d runs; %.2f cores busy, %.0f tok/s per busy core\n",
		r.GenTokS, r.GenRuns, r.GenCores, perCore(r.GenTokS, r.GenCores))
	fmt.Fprintf(&b, "GEMM %s: engine %.2f GFLOP/s, single blas32.Gemm %.2f GFLOP/s\n", r.GemmShape, r.GemmGFLOPS, r.BlasGFLOPS)
	fmt.Fprintf(&b, "peak RSS: %.1f MB\n", float64(r.PeakRSSBytes)/(1<<20))
	return b.String()
}

// Bench measures the engine at a named size (see BenchSizes) on random
// weights: a LoRA GRPO train step on 32 sequences of 128 tokens (prompt 32,
// completion 97), sampling of 96 tokens for 64 prompts of 32 tokens (stops
// disabled so every sequence runs to length), and the GEMM of the MLP up
// projection in training ([32*128, D] x [D, F]) next to one blas32.Gemm.
func Bench(ctx context.Context, size string, opt BenchOptions) (BenchResult, error) {
	cfg, ok := BenchSizes[size]
	if !ok {
		return BenchResult{}, fmt.Errorf("native: unknown bench size %q (want d64l2 or d128l4)", size)
	}
	if opt.Threads <= 0 {
		opt.Threads = 1
	}
	if opt.MinTime <= 0 {
		opt.MinTime = 2 * time.Second
	}
	res := BenchResult{Size: size, Threads: opt.Threads}
	e, turns, topt, err := newBenchTrain(cfg, opt.Threads)
	if err != nil {
		return res, err
	}
	defer e.Close()
	const batch, prompt, comp = 32, 32, 97
	tok := e.tok
	start, cpu0 := time.Now(), cpuTime()
	for res.TrainSteps == 0 || time.Since(start) < opt.MinTime {
		if _, err := e.TrainStep(ctx, "bench", turns, topt); err != nil {
			return res, err
		}
		res.TrainSteps++
	}
	wall := time.Since(start).Seconds()
	res.TrainTokS = float64(res.TrainSteps*batch*(prompt+comp-1)) / wall
	res.TrainCores = (cpuTime() - cpu0) / wall
	// Generate: 64 requests whose chat prompt is 32 tokens.
	const nreq, newTok = 64, 96
	reqs := make([]engine.Request, nreq)
	for i := range reqs {
		content := make([]byte, 13)
		for j := range content {
			content[j] = "abcdefghijklmnopqrstuvwxyz"[mix64(uint64(i*100+j))%26]
		}
		ad := ""
		if i%2 == 1 {
			ad = "bench"
		}
		reqs[i] = engine.Request{Adapter: ad, Messages: []engine.Message{{Role: "user", Content: string(content)}},
			MaxNewTokens: newTok, Temperature: 0.7, Seed: uint64(i)}
	}
	if p, err := tok.EncodeChat(reqs[0].Messages, true); err != nil || len(p) != 32 {
		return res, fmt.Errorf("native: bench prompt has %d tokens, want 32 (%v)", len(p), err)
	}
	e.noStop = true
	generated := 0
	start, cpu0 = time.Now(), cpuTime()
	for res.GenRuns == 0 || time.Since(start) < opt.MinTime {
		comps, err := e.Generate(ctx, reqs)
		if err != nil {
			return res, err
		}
		for _, c := range comps {
			generated += len(c.IDs)
		}
		res.GenRuns++
	}
	wall = time.Since(start).Seconds()
	res.GenTokS = float64(generated) / wall
	res.GenCores = (cpuTime() - cpu0) / wall
	// GEMM of the MLP up projection in training.
	m, k, n := batch*(prompt+comp-1), cfg.HiddenSize, cfg.IntermediateSize
	res.GemmShape = fmt.Sprintf("%dx%dx%d", m, k, n)
	x, w, y := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
	for i := range x {
		x[i] = float32(uniformAt(3, uint64(i)))
	}
	for i := range w {
		w[i] = float32(uniformAt(4, uint64(i)))
	}
	flops := 2 * float64(m) * float64(k) * float64(n)
	res.GemmGFLOPS = timeGFLOPS(flops, opt.MinTime/4, func() { e.pool.linear(y, x, w, m, k, n) })
	xa := blas32.General{Rows: m, Cols: k, Stride: k, Data: x}
	wa := blas32.General{Rows: n, Cols: k, Stride: k, Data: w}
	ya := blas32.General{Rows: m, Cols: n, Stride: n, Data: y}
	res.BlasGFLOPS = timeGFLOPS(flops, opt.MinTime/4, func() { blas32.Gemm(blas.NoTrans, blas.Trans, 1, xa, wa, 0, ya) })
	res.PeakRSSBytes = peakRSS()
	return res, nil
}

func perCore(rate, cores float64) float64 {
	if cores <= 0 {
		return 0
	}
	return rate / cores
}

func timeGFLOPS(flops float64, minTime time.Duration, fn func()) float64 {
	fn()
	n := 0
	start := time.Now()
	for n == 0 || time.Since(start) < minTime {
		fn()
		n++
	}
	return flops * float64(n) / time.Since(start).Seconds() / 1e9
}

// newBenchTrain builds the engine, adapter and GRPO batch of Bench: 32 turns
// with a 32-token prompt and a 97-token completion (128 input tokens each).
func newBenchTrain(cfg model.Config, threads int) (*Engine, []engine.Turn, engine.TrainOptions, error) {
	var topt engine.TrainOptions
	tok, err := model.NewCharTokenizer(benchAlphabet)
	if err != nil {
		return nil, nil, topt, err
	}
	e, err := New(cfg, tok, InitWeights(cfg, 1), Options{Threads: threads})
	if err != nil {
		return nil, nil, topt, err
	}
	if err := e.NewAdapter("bench", engine.AdapterConfig{Rank: 8, Alpha: 16, Seed: 1}); err != nil {
		return nil, nil, topt, err
	}
	const batch, prompt, comp = 32, 32, 97
	turns := make([]engine.Turn, batch)
	for i := range turns {
		t := engine.Turn{Adapter: "bench", Role: []string{"generator", "evaluator"}[i%2], Agent: fmt.Sprintf("agent%d", i%4),
			PromptIDs: make([]int32, prompt), CompletionIDs: make([]int32, comp), OldLogProbs: make([]float32, comp),
			Advantage: float64(i%3) - 1.1}
		for j := range t.PromptIDs {
			t.PromptIDs[j] = int32(mix64(uint64(i*1000+j)) % 61)
		}
		for j := range t.CompletionIDs {
			t.CompletionIDs[j] = int32(mix64(uint64(i*1000+500+j)) % 61)
			t.OldLogProbs[j] = -4
		}
		turns[i] = t
	}
	topt = engine.TrainOptions{ClipLow: 0.2, ClipHigh: 0.28, LossAgg: engine.SeqMeanTokenMean, Temperature: 0.7,
		LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, GradClip: 1}
	return e, turns, topt, nil
}
