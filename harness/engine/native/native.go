// Package native is marlow's pure-Go CPU engine: a Qwen3-architecture
// transformer (RMSNorm, grouped-query attention with per-head q/k RMSNorm and
// rotate-half RoPE, SwiGLU MLP, tied or untied LM head) with LoRA adapters on
// every linear layer, batched KV-cache sampling, a GRPO train step that
// keeps one gradient buffer per agent, and full-parameter supervised
// training for pretraining tiny base models.
//
// It is written the way llm.c writes GPT-2: every layer's forward next to its
// backward with shapes in comments, a finite-difference check per layer in
// the tests, and matrix products on gonum's blas32 (called in tiles small
// enough for its serial kernels, so every output element is summed in one
// fixed order). Work is split over a fixed number of goroutines
// (Options.Threads) and each output element is computed by exactly one of
// them, so results are bit-identical for any Threads value and any
// GOMAXPROCS, and a request's tokens do not depend on the batch it was
// sampled in. Training, prefill and decode share one layer forward, so the
// log-probs Generate reports are the bits TrainStep recomputes (given
// num_key_value_heads*head_dim divisible by 4, which keeps key rows at the
// same memory alignment in the KV cache and in training buffers).
//
// Shared prompts are computed once. Generate prefills a prompt prefix that
// an earlier request on the same adapter already prefilled by copying its
// keys and values (the same bits, so sampling does not change). A train
// step groups each agent's turns by their longest common input prefixes
// (voting's generators answer one prompt eight times) and lays a group's
// prefix out once, its turns' remaining tokens following as branches that
// attend to the prefix and to themselves: the forward gives the log-probs
// of the unshared layout bit for bit, and the gradients flowing into the
// prefix are summed there and backpropagated once per group, which never
// spans two agents, so per-agent gradients stay what they are up to fp32
// rounding.
//
// Built with GOEXPERIMENT=simd on amd64 with AVX2, the GEMM tiles
// (gemm_simd.go, gemm_amd64.s), attention at head dim 16 (every tiny
// model's; attn16_simd.go) and softmax (softmax_simd.go) run on SIMD
// kernels that keep blocks of outputs in registers but add each element's
// products in the order of the gonum calls and scalar loops they replace,
// so both builds give the same bits. SwiGLU (swiglu_simd.go, its sigmoid
// through an expf 8 lanes wide, 16 with AVX-512, that takes expf's
// branches lane by lane: expf_simd.go) and the elementwise loops of RMSNorm
// (rmsnorm_simd.go) run on SIMD kernels too that perform the scalar code's
// operations in its order, unfused; RMSNorm's sums stay scalar, in their
// order. Which path each kernel takes is chosen per process by timing both
// (kernels.go); no choice changes a result.
package native

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/harness/study"
)

// Options tune an Engine. They never change results.
type Options struct {
	// Threads is the number of goroutines work is split over (default 1).
	// The partition depends only on Threads, and results on neither.
	Threads int
}

// Engine is the native engine. It is not safe for concurrent use.
type Engine struct {
	cfg       model.Config
	d         dims
	tok       *model.Tokenizer
	w         *Weights
	pool      pool
	rope      rope
	attnScale float32
	imEnd     int32
	adapters  map[string]*Adapter
	baseOpt   *adamState // optimizer state of Supervised, created on first use
	scores    [][]float32
	ws        workspace
	dws       []workspace // per-goroutine buffers of a split decode (decodeSplit)
	closed    bool
	// noShare turns off the computing of shared prompt prefixes once (in
	// prefill and in train steps), so that tests can compare both paths.
	noShare bool
}

var _ engine.Engine = (*Engine)(nil)

// Name is the engine name a spec's model.engine selects.
const Name = study.Native

// Driver is the native engine's registry entry. It needs nothing beyond
// this program, so it has no prerequisites to check.
func Driver() engine.Driver {
	return engine.Driver{
		Name:    Name,
		Version: Name + "/" + runtime.Version(),
		Check: func(context.Context, engine.Options) []error {
			if fusedMultiplyAdds {
				return []error{errors.New("native: this marlow was built with GOAMD64=v3 or above, where Go fuses multiply-adds, so its logs would differ in their last bits from every other build's; rebuild with GOAMD64=v1 (make does)")}
			}
			return nil
		},
		Open: func(_ context.Context, dir string, opt engine.Options) (engine.Engine, error) {
			e, err := Open(dir, Options{Threads: opt.Threads})
			if err != nil {
				return nil, err
			}
			return e, nil
		},
	}
}

// New builds an engine over weights w (not copied: the engine owns them from
// now on) and tokenizer tok, whose vocabulary must fit the model.
func New(cfg model.Config, tok *model.Tokenizer, w *Weights, opt Options) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	if err := selectKernels(); err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, errors.New("native: nil tokenizer")
	}
	if w == nil {
		return nil, errors.New("native: nil weights")
	}
	if tok.VocabSize() > cfg.VocabSize {
		return nil, fmt.Errorf("native: tokenizer has %d ids but the model's vocab_size is %d", tok.VocabSize(), cfg.VocabSize)
	}
	if dimsOf(w.Cfg) != dimsOf(cfg) || w.Cfg.TieWordEmbeddings != cfg.TieWordEmbeddings || len(w.Data) != len(NewWeights(cfg).Data) {
		return nil, errors.New("native: weights were built for a different config")
	}
	d := dimsOf(cfg)
	if d.HD%2 != 0 {
		return nil, fmt.Errorf("native: head_dim %d must be even for rotary embeddings", d.HD)
	}
	if d.H%d.KV != 0 {
		return nil, fmt.Errorf("native: num_attention_heads %d is not a multiple of num_key_value_heads %d", d.H, d.KV)
	}
	imEnd := tok.ID("<|im_end|>")
	if imEnd < 0 {
		return nil, errors.New("native: tokenizer has no <|im_end|> token")
	}
	t := opt.Threads
	if t <= 0 {
		t = 1
	}
	e := &Engine{
		cfg: cfg, d: d, tok: tok, w: w, pool: pool{threads: t},
		rope:      newRope(d.MaxPos, d.HD, cfg.RopeTheta),
		attnScale: float32(1 / math.Sqrt(float64(d.HD))),
		imEnd:     imEnd,
		adapters:  map[string]*Adapter{},
		scores:    make([][]float32, t),
	}
	for i := range e.scores {
		e.scores[i] = make([]float32, d.MaxPos)
	}
	return e, nil
}

// Open loads a Hugging Face checkpoint folder: config.json,
// model.safetensors and tokenizer.json.
func Open(dir string, opt Options) (*Engine, error) {
	cfg, ts, err := model.ReadCheckpoint(dir)
	if err != nil {
		return nil, fmt.Errorf("native: open %s: %w", dir, err)
	}
	w, err := WeightsFromTensors(cfg, ts)
	if err != nil {
		return nil, fmt.Errorf("native: open %s: %w", dir, err)
	}
	tok, err := model.LoadTokenizer(filepath.Join(dir, model.TokenizerFile))
	if err != nil {
		return nil, fmt.Errorf("native: open %s: %w", dir, err)
	}
	return New(cfg, tok, w, opt)
}

// Config returns the model configuration.
func (e *Engine) Config() model.Config { return e.cfg }

// Tokenizer returns the engine's tokenizer.
func (e *Engine) Tokenizer() *model.Tokenizer { return e.tok }

// Weights returns the base weights (shared, not a copy).
func (e *Engine) Weights() *Weights { return e.w }

// SaveBase writes the base model in the Hugging Face layout: config.json,
// model.safetensors, tokenizer.json and tokenizer_config.json. The same
// weights always give the same bytes.
func (e *Engine) SaveBase(dir string) error {
	if err := model.WriteCheckpoint(dir, e.cfg, e.w.Tensors()); err != nil {
		return fmt.Errorf("native: save base: %w", err)
	}
	if err := e.tok.Save(filepath.Join(dir, model.TokenizerFile)); err != nil {
		return fmt.Errorf("native: save base: %w", err)
	}
	if err := e.tok.SaveConfig(filepath.Join(dir, model.TokenizerConfigFile)); err != nil {
		return fmt.Errorf("native: save base: %w", err)
	}
	return nil
}

// NewAdapter creates a named adapter over the base: B = 0 (so it is exactly
// the base policy) and A drawn from the stream keyed by cfg.Seed.
func (e *Engine) NewAdapter(ctx context.Context, name string, cfg engine.AdapterConfig) error {
	if err := e.check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("native: new adapter %q: %w", name, err)
	}
	if _, ok := e.adapters[name]; ok {
		return fmt.Errorf("native: adapter %q already exists", name)
	}
	a, err := newAdapter(name, e.d, cfg)
	if err != nil {
		return fmt.Errorf("native: %w", err)
	}
	a.initA(e.d)
	e.adapters[name] = a
	return nil
}

// Adapters returns the names of the adapters, sorted.
func (e *Engine) Adapters() []string {
	names := make([]string, 0, len(e.adapters))
	for n := range e.adapters {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Close releases the engine's buffers; later calls fail.
func (e *Engine) Close() error {
	e.closed = true
	e.adapters = nil
	e.ws = workspace{}
	return nil
}

// limits are what engine's checks need to know of the engine.
func (e *Engine) limits() engine.Limits {
	return engine.Limits{Adapters: e.Adapters(), VocabSize: e.d.V, MaxPositions: e.d.MaxPos}
}

func (e *Engine) check() error {
	if e.closed {
		return errors.New("native: engine is closed")
	}
	return nil
}

// Linear computes y[n, out] = x[n, in] · w[out, in]ᵀ with the engine's
// threads and tiling: the GEMM every linear layer runs, exposed so that
// benchmarks can measure it on its own.
func (e *Engine) Linear(y, x, w []float32, n, in, out int) {
	e.pool.linear(y, x, w, n, in, out)
}
