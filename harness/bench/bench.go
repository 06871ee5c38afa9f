// Package bench measures the speed of marlow's engines: tokens per second
// of a LoRA GRPO train step and of batched sampling, the GEMM of the MLP up
// projection, and peak memory. It is an application of the engine
// contract: the engine under test is opened by name from an
// engine.Registry over a random-weight checkpoint it writes itself.
package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/engine/torch"
	"github.com/marlowlab/marlow/harness/internal/procstat"
	"github.com/marlowlab/marlow/harness/model"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// Sizes are the model sizes Engine knows, by name.
var Sizes = map[string]model.Config{
	"d64l2":  sizeConfig(64, 2, 4, 2, 16, 256),
	"d128l4": sizeConfig(128, 4, 8, 4, 16, 512),
}

func sizeConfig(d, l, h, kv, hd, f int) model.Config {
	return model.Config{
		Architectures: []string{"Qwen3ForCausalLM"}, ModelType: "qwen3",
		HiddenSize: d, IntermediateSize: f, NumHiddenLayers: l, NumAttentionHeads: h, NumKeyValueHeads: kv,
		HeadDim: hd, RMSNormEps: 1e-6, RopeTheta: 1e6, VocabSize: 64, MaxPositionEmbeddings: 256,
		TieWordEmbeddings: true,
	}
}

// alphabet has 61 characters, so with the 3 special tokens the vocabulary
// is exactly 64.
const alphabet = "\n abcdefghijklmnopqrstuvwxyz0123456789+-*/=().,:;?!<>ABCDEFGH"

// The shapes measured: a train batch of 32 turns of 32 prompt and 97
// completion tokens (128 input tokens each), and 64 sampling requests of a
// 32-token chat prompt and a spread of 32 to 160 new tokens (96 on average),
// so that rows stop at different steps.
const (
	trainBatch, trainPrompt, trainComp = 32, 32, 97
	genRequests, genPrompt, genNew     = 64, 32, 96
	genNewSpread                       = 128 // request i asks for genNew - 64 + i*128/63 new tokens
)

// Options configure Engine.
type Options struct {
	Engine  string        // registered engine name (default native)
	Threads int           // engine threads (default 1)
	MinTime time.Duration // minimum time per measurement (default 2s)
	// GenBackend is the torch engine's generation backend ("" = its
	// default: slots on cuda, reference on the CPU).
	GenBackend string
	Layers     int    // layers at size RealWidth (default 2)
	Tokenizer  string // folder of the Qwen3 tokenizer.json and tokenizer_config.json, for RealWidth
}

// Result is what Engine measured.
type Result struct {
	Engine       string
	Size         string
	Threads      int
	CPU          string  // the CPU's model name (CPUModel)
	GenBackend   string  // the torch engine's generation backend when set (reference or slots)
	TrainTokS    float64 // sequence tokens per second of a LoRA GRPO step, batch 32 x T 128
	TrainSteps   int
	TrainCores   float64 // process CPU time / wall time while training (cores actually obtained)
	GenTokS      float64 // generated tokens per second, batch 64, prompt 32, 32-160 new tokens
	GenRuns      int
	GenCores     float64
	GemmShape    string  // m x k x n of the GEMM measured
	GemmGFLOPS   float64 // the engine's own GEMM on that shape (0 when it exposes none)
	BlasGFLOPS   float64 // one blas32.Gemm call on the same shape
	PeakRSSBytes int64   // getrusage max RSS of the process (0 where unsupported)
	// ServerPeakRSSBytes is the peak RSS of the engine's server process,
	// for engines that run in one (torch); 0 otherwise.
	ServerPeakRSSBytes int64
	// At RealWidth: the workload, tokens generated, the server's peak cuda
	// memory and the slot backend's pool (nil for other backends).
	GenWorkload   string
	GenTokens     int
	CUDAPeakBytes int64
	GenPool       *torch.GenPool
}

// String renders the result as a small report.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "engine %s, size %s, threads %d", r.Engine, r.Size, r.Threads)
	if r.GenBackend != "" {
		fmt.Fprintf(&b, ", generation backend %s", r.GenBackend)
	}
	fmt.Fprintf(&b, ", CPU %s\n", r.CPU)
	if r.GenWorkload != "" {
		r.realWidthString(&b)
		return b.String()
	}
	fmt.Fprintf(&b, "train (LoRA GRPO step, batch 32 x T 128): %.0f tok/s over %d steps; %.2f cores busy, %.0f tok/s per busy core\n",
		r.TrainTokS, r.TrainSteps, r.TrainCores, perCore(r.TrainTokS, r.TrainCores))
	fmt.Fprintf(&b, "generate (batch 64, prompt 32, 32-160 new): %.0f tok/s over %d runs; %.2f cores busy, %.0f tok/s per busy core\n",
		r.GenTokS, r.GenRuns, r.GenCores, perCore(r.GenTokS, r.GenCores))
	engineGemm := "not exposed by this engine"
	if r.GemmGFLOPS > 0 {
		engineGemm = fmt.Sprintf("%.2f GFLOP/s", r.GemmGFLOPS)
	}
	fmt.Fprintf(&b, "GEMM %s: engine %s, single blas32.Gemm %.2f GFLOP/s\n", r.GemmShape, engineGemm, r.BlasGFLOPS)
	fmt.Fprintf(&b, "peak RSS: %.1f MB\n", float64(r.PeakRSSBytes)/(1<<20))
	if r.ServerPeakRSSBytes > 0 {
		fmt.Fprintf(&b, "peak RSS of the engine's server process: %.1f MB (cores above include its CPU time)\n", float64(r.ServerPeakRSSBytes)/(1<<20))
	}
	return b.String()
}

// serverUsage is an engine that runs in a process of its own (torch) and
// reports that process's CPU time and peak RSS.
type serverUsage interface {
	ProcessUsage(ctx context.Context) (cpuSeconds float64, peakRSSBytes int64, err error)
}

// cpuTime is the CPU time of this process plus that of the engine's
// server process, if it has one.
func cpuTime(ctx context.Context, e engine.Engine) float64 {
	t := procstat.CPUTime()
	if su, ok := e.(serverUsage); ok {
		if c, _, err := su.ProcessUsage(ctx); err == nil {
			t += c
		}
	}
	return t
}

// linearer is an engine that exposes its linear-layer GEMM (native does).
type linearer interface {
	Linear(y, x, w []float32, n, in, out int)
}

// Engine measures the engine opt.Engine of reg at a named size (see Sizes)
// on random weights: a LoRA GRPO train step on 32 sequences of 128 tokens
// (prompt 32, completion 97), sampling of 96 tokens for 64 prompts of 32
// tokens (IgnoreEndOfTurn, so every sequence runs to length), and the GEMM
// of the MLP up projection in training ([32*128, D] x [D, F]) next to one
// blas32.Gemm.
func Engine(ctx context.Context, reg *engine.Registry, size string, opt Options) (Result, error) {
	cfg, ok := Sizes[size]
	if !ok && size != RealWidth {
		return Result{}, fmt.Errorf("bench: unknown size %q (want d64l2, d128l4 or %s)", size, RealWidth)
	}
	if opt.Engine == "" {
		opt.Engine = native.Name
	}
	opt.Threads = max(opt.Threads, 1)
	if opt.MinTime <= 0 {
		opt.MinTime = 2 * time.Second
	}
	res := Result{Engine: opt.Engine, Size: size, Threads: opt.Threads, CPU: CPUModel(), GenBackend: opt.GenBackend}
	if size == RealWidth {
		return engineRealWidth(ctx, reg, opt, res)
	}
	if err := reg.Check(ctx, engine.Options{Threads: opt.Threads}, opt.Engine); err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	e, tok, err := openRandom(ctx, reg, opt.Engine, cfg, engine.Options{Threads: opt.Threads, GenBackend: opt.GenBackend})
	if err != nil {
		return res, err
	}
	defer e.Close()
	if err := measureTrain(ctx, e, opt.MinTime, &res); err != nil {
		return res, err
	}
	if err := measureGenerate(ctx, e, tok, opt.MinTime, &res); err != nil {
		return res, err
	}
	measureGemm(e, cfg, opt.MinTime/4, &res)
	res.PeakRSSBytes = procstat.PeakRSS()
	if su, ok := e.(serverUsage); ok {
		if _, rss, err := su.ProcessUsage(ctx); err == nil {
			res.ServerPeakRSSBytes = rss
		}
	}
	return res, nil
}

// openRandom writes a checkpoint of cfg with random weights and a character
// tokenizer to a temporary folder, opens engine name over it and creates
// the adapter "bench" (rank 8, alpha 16).
func openRandom(ctx context.Context, reg *engine.Registry, name string, cfg model.Config, opt engine.Options) (engine.Engine, *model.Tokenizer, error) {
	tok, err := model.NewCharTokenizer(alphabet)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	dir, err := os.MkdirTemp("", "marlow-bench-")
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	w, err := native.New(cfg, tok, native.InitWeights(cfg, 1), native.Options{Threads: 1})
	if err != nil {
		return nil, nil, fmt.Errorf("bench: random weights: %w", err)
	}
	err = w.SaveBase(dir)
	w.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	e, _, err := reg.Open(ctx, name, dir, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	if err := e.NewAdapter(ctx, "bench", engine.AdapterConfig{Rank: 8, Alpha: 16, Seed: 1}); err != nil {
		e.Close()
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	return e, tok, nil
}

// trainBatchTurns is the GRPO batch of the train measurement.
func trainBatchTurns() ([]engine.Turn, engine.TrainOptions) {
	rng := rand.New(rand.NewPCG(1, 2))
	turns := make([]engine.Turn, trainBatch)
	for i := range turns {
		t := engine.Turn{Adapter: "bench", Role: []string{"generator", "evaluator"}[i%2], Agent: fmt.Sprintf("agent%d", i%4),
			PromptIDs: make([]int32, trainPrompt), CompletionIDs: make([]int32, trainComp), OldLogProbs: make([]float32, trainComp),
			Advantage: float64(i%3) - 1.1}
		for j := range t.PromptIDs {
			t.PromptIDs[j] = int32(rng.IntN(len(alphabet)))
		}
		for j := range t.CompletionIDs {
			t.CompletionIDs[j] = int32(rng.IntN(len(alphabet)))
			t.OldLogProbs[j] = -4
		}
		turns[i] = t
	}
	topt := engine.TrainOptions{ClipLow: 0.2, ClipHigh: 0.28, LossAgg: engine.SeqMeanTokenMean, Temperature: 0.7,
		LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, GradClip: 1}
	return turns, topt
}

// genRequestsOf are the sampling requests of the generate measurement:
// half on the base policy, half on the adapter.
func genRequestsOf() []engine.Request {
	rng := rand.New(rand.NewPCG(3, 4))
	reqs := make([]engine.Request, genRequests)
	for i := range reqs {
		content := make([]byte, 13)
		for j := range content {
			content[j] = "abcdefghijklmnopqrstuvwxyz"[rng.IntN(26)]
		}
		reqs[i] = engine.Request{Adapter: []string{"", "bench"}[i%2], Messages: []engine.Message{{Role: "user", Content: string(content)}},
			MaxNewTokens: genNew, Temperature: 0.7, Seed: uint64(i), IgnoreEndOfTurn: true}
	}
	return reqs
}

func measureTrain(ctx context.Context, e engine.Engine, minTime time.Duration, res *Result) error {
	turns, topt := trainBatchTurns()
	start, cpu0 := time.Now(), cpuTime(ctx, e)
	for res.TrainSteps == 0 || time.Since(start) < minTime {
		if _, err := e.TrainStep(ctx, "bench", turns, topt); err != nil {
			return fmt.Errorf("bench: train: %w", err)
		}
		res.TrainSteps++
	}
	wall := time.Since(start).Seconds()
	res.TrainTokS = float64(res.TrainSteps*trainBatch*(trainPrompt+trainComp-1)) / wall
	res.TrainCores = (cpuTime(ctx, e) - cpu0) / wall
	return nil
}

func measureGenerate(ctx context.Context, e engine.Engine, tok *model.Tokenizer, minTime time.Duration, res *Result) error {
	reqs := genRequestsOf()
	for i := range reqs {
		reqs[i].MaxNewTokens = genNew - genNewSpread/2 + i*genNewSpread/(genRequests-1)
	}
	if p, err := tok.EncodeChat(reqs[0].Messages, true); err != nil || len(p) != genPrompt {
		return fmt.Errorf("bench: prompt has %d tokens, want %d (%v)", len(p), genPrompt, err)
	}
	generated := 0
	start, cpu0 := time.Now(), cpuTime(ctx, e)
	for res.GenRuns == 0 || time.Since(start) < minTime {
		comps, err := e.Generate(ctx, reqs)
		if err != nil {
			return fmt.Errorf("bench: generate: %w", err)
		}
		for _, c := range comps {
			generated += len(c.IDs)
		}
		res.GenRuns++
	}
	wall := time.Since(start).Seconds()
	res.GenTokS = float64(generated) / wall
	res.GenCores = (cpuTime(ctx, e) - cpu0) / wall
	return nil
}

// measureGemm times the MLP up projection of training on the engine's own
// GEMM (when it exposes one) and as one blas32.Gemm call.
func measureGemm(e engine.Engine, cfg model.Config, minTime time.Duration, res *Result) {
	m, k, n := trainBatch*(trainPrompt+trainComp-1), cfg.HiddenSize, cfg.IntermediateSize
	res.GemmShape = fmt.Sprintf("%dx%dx%d", m, k, n)
	rng := rand.New(rand.NewPCG(5, 6))
	x, w, y := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
	for i := range x {
		x[i] = 2*rng.Float32() - 1
	}
	for i := range w {
		w[i] = 2*rng.Float32() - 1
	}
	flops := 2 * float64(m) * float64(k) * float64(n)
	if l, ok := e.(linearer); ok {
		res.GemmGFLOPS = timeGFLOPS(flops, minTime, func() { l.Linear(y, x, w, m, k, n) })
	}
	xa := blas32.General{Rows: m, Cols: k, Stride: k, Data: x}
	wa := blas32.General{Rows: n, Cols: k, Stride: k, Data: w}
	ya := blas32.General{Rows: m, Cols: n, Stride: n, Data: y}
	res.BlasGFLOPS = timeGFLOPS(flops, minTime, func() { blas32.Gemm(blas.NoTrans, blas.Trans, 1, xa, wa, 0, ya) })
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
