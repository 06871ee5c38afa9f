// Package torch is marlow's GPU engine: a Go client that implements
// engine.Engine by speaking to a small Python server (transformers + peft)
// over length-prefixed JSON frames on two dedicated pipes.
//
// The server script is embedded in the binary and written to a cache folder
// at start, so a GPU node needs only the marlow binary and a Python with
// torch, transformers, peft, safetensors, tokenizers and numpy. One server
// process serves one run: it loads the checkpoint once, keeps one peft LoRA
// adapter per marlow adapter over the frozen base, and has the native
// engine's semantics: the same counter-based streams for LoRA
// initialisation and sampling, the same GRPO train step with per-agent
// gradient buffers, the same AdamW and the same on-disk checkpoint layout,
// so either engine resumes the other's checkpoints.
//
// The server's stdout and stderr are kept (their tail is quoted in errors);
// a server that dies mid-call is an error naming the call, a cancelled
// context kills its process group, and a call with no progress frame for
// Options.StallTimeout is an error. A call that runs out of GPU memory is a
// ServerError of kind KindOutOfMemory (matching engine.ErrOutOfMemory) that
// names the operation, its batch and the budget to lower. A server pinned
// to GPUs (Options.VisibleDevices, from the runner's placement) sees only
// them.
package torch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
)

// Name is the torch engine's name in specs and registries.
const Name = "torch"

// Driver returns the torch engine's driver for an engine.Registry. Its
// prerequisites (the interpreter, its packages, CUDA) depend on each
// model's options, which the driver's Check receives; the version in a
// run's manifest is the opened engine's (Version).
func Driver() engine.Driver {
	return engine.Driver{
		Name:    Name,
		Version: Name + " (Python server)",
		Check: func(ctx context.Context, opt engine.Options) []error {
			device := opt.Device
			if device == "" {
				device = "auto"
			}
			_, missing := Check(ctx, opt.Python, device)
			errs := make([]error, len(missing))
			for i, m := range missing {
				errs[i] = errors.New(m)
			}
			return errs
		},
		Open: func(ctx context.Context, dir string, opt engine.Options) (engine.Engine, error) {
			var pin []string
			for _, d := range opt.Devices {
				pin = append(pin, d.ID)
			}
			e, err := Open(ctx, dir, Options{Python: opt.Python, Device: opt.Device, DType: opt.DType, Threads: opt.Threads,
				GenTokenBudget: opt.GenTokens, TrainTokenBudget: opt.TrainTokens, GenBackend: opt.GenBackend,
				KVCacheFraction: opt.KVCacheFraction, VisibleDevices: pin})
			if err != nil {
				return nil, err
			}
			return e, nil
		},
		Devices: func(ctx context.Context, opt engine.Options) ([]engine.Device, error) {
			if opt.Device == "cpu" {
				return nil, nil
			}
			return Devices(ctx, opt.Python)
		},
	}
}

// DefaultStallTimeout is how long a call may go without any frame from the
// server before it is declared stalled.
const DefaultStallTimeout = 10 * time.Minute

// Options configure the torch engine.
type Options struct {
	// Python is the interpreter (default $MARLOW_PYTHON, else python3 on
	// PATH).
	Python string
	// Device is "cuda", "cpu" or "auto" (cuda when available; default).
	Device string
	// DType is "float32", "bfloat16", "float16" or "auto" (bfloat16 on cuda,
	// float32 on cpu; default).
	DType string
	// Threads is torch's CPU thread count (default 1; fixed so CPU runs
	// are reproducible).
	Threads int
	// GenTokenBudget bounds prompt plus new tokens of one generation wave
	// (default 65536).
	GenTokenBudget int
	// TrainTokenBudget bounds the padded tokens of one training
	// micro-batch (default 16384).
	TrainTokenBudget int
	// GenBackend is the server's generation backend: "reference" (batched
	// KV-cache waves), "slots" (paged KV pool with continuous refill) or ""
	// (slots on cuda, reference on the CPU).
	GenBackend string
	// KVCacheFraction is the share of free cuda memory the slots backend's
	// KV pool takes (0 = 0.85).
	KVCacheFraction float64
	// VisibleDevices, when set, pins the server to these GPUs: its
	// CUDA_VISIBLE_DEVICES lists them (IDs as Devices gives them), so its
	// cuda device is the first of them.
	VisibleDevices []string
	// HeadDType is the dtype of the LM head whose logits feed sampling and
	// log-probs: "" or "float32" (the final hidden state cast to float32
	// times a float32 copy of the head, in every dtype) or "model" (the
	// head in the model's dtype, to measure what float32 buys; reference
	// generation backend only).
	HeadDType string
	// StallTimeout is how long a call may go without a frame from the
	// server (default DefaultStallTimeout).
	StallTimeout time.Duration
	// GradientCheckpointing forces gradient checkpointing (of the decoder
	// layers and of the LM head's chunks) on any device; it is always on
	// on cuda.
	GradientCheckpointing bool
	// Stderr, when set, receives the server's stdout and stderr as they
	// come (the client keeps their tail either way).
	Stderr io.Writer
	// argv replaces the interpreter and script (tests start fake servers).
	argv []string
}

// Engine is the torch engine client. It is not safe for concurrent use.
type Engine struct {
	c        *conn
	hello    Hello
	info     OpenInfo
	adapters map[string]bool
	closed   bool
}

var (
	_ engine.Engine    = (*Engine)(nil)
	_ engine.Versioned = (*Engine)(nil)
)

// Hello is the server's answer to the first request.
type Hello struct {
	Protocol int               `json:"protocol"`
	Versions map[string]string `json:"versions"`
	PID      int               `json:"pid"`
}

// OpenInfo is what the server reports after loading a checkpoint.
type OpenInfo struct {
	Device       string `json:"device"`
	DType        string `json:"dtype"`
	VocabSize    int    `json:"vocab_size"`
	Layers       int    `json:"layers"`
	MaxPositions int    `json:"max_positions"`
	ChatTemplate bool   `json:"chat_template"`
	CUDADevice   string `json:"cuda_device"`
	GradCkpt     bool   `json:"gradient_checkpointing"`
	GenBackend   string `json:"gen_backend"`
	HeadDType    string `json:"head_dtype"`
}

// Open starts a server and loads the Hugging Face checkpoint folder dir
// (config.json, model.safetensors, tokenizer.json). ctx bounds the start-up
// only; each later call takes its own context.
func Open(ctx context.Context, dir string, opt Options) (*Engine, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("torch engine: checkpoint %s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(abs, "config.json")); err != nil {
		return nil, fmt.Errorf("torch engine: checkpoint %s: %w", dir, err)
	}
	if opt.argv == nil {
		script, err := serverScript()
		if err != nil {
			return nil, err
		}
		opt.argv = []string{pythonOf(opt), script}
	}
	e, err := start(ctx, opt)
	if err != nil {
		return nil, err
	}
	args := map[string]any{
		"checkpoint": abs, "device": orDefault(opt.Device, "auto"), "dtype": orDefault(opt.DType, "auto"),
		"threads": max(opt.Threads, 1), "gen_token_budget": opt.GenTokenBudget, "train_token_budget": opt.TrainTokenBudget,
	}
	if opt.GradientCheckpointing {
		args["gradient_checkpointing"] = true
	}
	if opt.GenBackend != "" {
		args["gen_backend"] = opt.GenBackend
	}
	if opt.KVCacheFraction != 0 {
		args["kv_cache_fraction"] = opt.KVCacheFraction
	}
	if opt.HeadDType != "" {
		args["head_dtype"] = opt.HeadDType
	}
	if err := e.c.call(ctx, "open", args, &e.info); err != nil {
		e.c.close(5 * time.Second)
		return nil, err
	}
	return e, nil
}

func pythonOf(opt Options) string { return DefaultPython(opt.Python) }

// DefaultPython is the interpreter the torch engine uses for setting py:
// py itself, else $MARLOW_PYTHON, else python3 on PATH.
func DefaultPython(py string) string {
	if py != "" {
		return py
	}
	return orDefault(os.Getenv("MARLOW_PYTHON"), "python3")
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Start starts a server without loading a checkpoint: enough for the
// calls that need no model (SampleRows, Usage).
func Start(ctx context.Context, opt Options) (*Engine, error) {
	if opt.argv == nil {
		script, err := serverScript()
		if err != nil {
			return nil, err
		}
		opt.argv = []string{pythonOf(opt), script}
	}
	return start(ctx, opt)
}

// SampleRows applies the server's sampling rule to given logits: row i at temperature temps[i] with the uniform keyed by
// (seeds[i], positions[i]); rows may differ in length. It exists to check that both engines pick the
// same token from the same logits.
func (e *Engine) SampleRows(ctx context.Context, logits [][]float32, temps []float64, seeds []uint64, positions []int) ([]int32, []float32, error) {
	if err := e.check(); err != nil {
		return nil, nil, err
	}
	if len(logits) == 0 {
		return nil, nil, nil
	}
	var flat []float32
	lengths := make([]int, len(logits))
	for i, r := range logits {
		if len(r) == 0 {
			return nil, nil, fmt.Errorf("torch engine: sample rows: row %d is empty", i)
		}
		lengths[i] = len(r)
		flat = append(flat, r...)
	}
	var res struct {
		Tokens   string `json:"tokens"`
		LogProbs string `json:"logprobs"`
	}
	args := map[string]any{"logits": encodeFloats(flat), "lengths": lengths, "temps": temps, "seeds": seeds, "positions": positions}
	if err := e.c.call(ctx, "sample_rows", args, &res); err != nil {
		return nil, nil, err
	}
	toks, err := decodeInts(res.Tokens)
	if err != nil {
		return nil, nil, err
	}
	lps, err := decodeFloats(res.LogProbs)
	if err != nil {
		return nil, nil, err
	}
	if len(toks) != len(logits) || len(lps) != len(logits) {
		return nil, nil, fmt.Errorf("torch engine: sample rows: %d tokens for %d rows", len(toks), len(logits))
	}
	return toks, lps, nil
}

// start launches the server and checks its hello.
func start(ctx context.Context, opt Options) (*Engine, error) {
	argv := append(slices.Clone(opt.argv), "--in-fd", "3", "--out-fd", "4")
	env := append(os.Environ(), "PYTHONUNBUFFERED=1", "TOKENIZERS_PARALLELISM=false")
	if opt.VisibleDevices != nil {
		env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(opt.VisibleDevices, ","))
	}
	if opt.Threads > 0 {
		n := fmt.Sprint(opt.Threads)
		env = append(env, "OMP_NUM_THREADS="+n, "MKL_NUM_THREADS="+n)
	}
	c, err := startConn(argv, env, opt.Stderr, opt.StallTimeout)
	if err != nil {
		return nil, err
	}
	e := &Engine{c: c, adapters: map[string]bool{}}
	if err := c.call(ctx, "hello", struct{}{}, &e.hello); err != nil {
		c.close(time.Second)
		return nil, err
	}
	if e.hello.Protocol != Protocol {
		c.close(time.Second)
		return nil, fmt.Errorf("torch engine: server speaks protocol %d, this client %d", e.hello.Protocol, Protocol)
	}
	return e, nil
}

// Hello returns the server's hello (protocol and package versions).
func (e *Engine) Hello() Hello { return e.hello }

// Info returns what the server reported when it loaded the checkpoint.
func (e *Engine) Info() OpenInfo { return e.info }

// Version names the engine's stack for run manifests, e.g.
// "torch/2.11.0 transformers/5.17.0 peft/0.17.1 cuda:0 bfloat16".
func (e *Engine) Version() string {
	v := e.hello.Versions
	s := fmt.Sprintf("torch/%s transformers/%s peft/%s %s %s", v["torch"], v["transformers"], v["peft"], e.info.Device, e.info.DType)
	if e.info.HeadDType != "" && e.info.HeadDType != "float32" {
		s += " head " + e.info.HeadDType
	}
	if e.info.CUDADevice != "" {
		s += " (" + e.info.CUDADevice + ")"
	}
	return s
}

// PID is the server's process id.
func (e *Engine) PID() int { return e.hello.PID }

// limits are what engine's checks know of the engine: its adapters and,
// once a checkpoint is loaded, the model's bounds.
func (e *Engine) limits() engine.Limits {
	return engine.Limits{Adapters: e.Adapters(), VocabSize: e.info.VocabSize, MaxPositions: e.info.MaxPositions}
}

func (e *Engine) check() error {
	if e.closed {
		return errors.New("torch engine: engine is closed")
	}
	return nil
}

// NewAdapter creates a named adapter over the base: B = 0 and A drawn from
// the same stream as the native engine's, so both engines start from the
// same weights.
func (e *Engine) NewAdapter(ctx context.Context, name string, cfg engine.AdapterConfig) error {
	if err := e.check(); err != nil {
		return err
	}
	if err := engine.ValidateAdapter(name, cfg); err != nil {
		return fmt.Errorf("torch engine: %w", err)
	}
	args := map[string]any{"name": name, "rank": cfg.Rank, "alpha": cfg.Alpha, "targets": cfg.Targets, "seed": cfg.Seed}
	if err := e.c.call(ctx, "add_adapter", args, nil); err != nil {
		return err
	}
	e.adapters[name] = true
	return nil
}

type wireRequest struct {
	Adapter      string           `json:"adapter"`
	Messages     []engine.Message `json:"messages"`
	MaxNewTokens int              `json:"max_new_tokens"`
	Temperature  float64          `json:"temperature"`
	Seed         uint64           `json:"seed"`
	NoStop       bool             `json:"ignore_end_of_turn,omitempty"`
}

type wireCompletion struct {
	PromptIDs string `json:"prompt_ids"`
	IDs       string `json:"ids"`
	Text      string `json:"text"`
	LogProbs  string `json:"logprobs"`
	Finish    string `json:"finish"`
}

// Generate samples one completion per request. Token k of a request is
// drawn from the uniform keyed by (Request.Seed, k) by inverting the
// float64 CDF of softmax(logits / T) in id order, as the native engine
// does; generation stops at <|im_end|> or <|endoftext|>.
func (e *Engine) Generate(ctx context.Context, reqs []engine.Request) ([]engine.Completion, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if err := engine.ValidateRequests(reqs, e.limits()); err != nil {
		return nil, fmt.Errorf("torch engine: %w", err)
	}
	wr := make([]wireRequest, len(reqs))
	for i, r := range reqs {
		wr[i] = wireRequest{Adapter: r.Adapter, Messages: r.Messages, MaxNewTokens: r.MaxNewTokens, Temperature: r.Temperature, Seed: r.Seed, NoStop: r.IgnoreEndOfTurn}
	}
	var res struct {
		Completions []wireCompletion `json:"completions"`
	}
	if err := e.c.call(ctx, "generate", map[string]any{"requests": wr}, &res); err != nil {
		return nil, err
	}
	if len(res.Completions) != len(reqs) {
		return nil, fmt.Errorf("torch engine: generate: %d completions for %d requests", len(res.Completions), len(reqs))
	}
	out := make([]engine.Completion, len(reqs))
	for i, w := range res.Completions {
		var c engine.Completion
		var err error
		if c.PromptIDs, err = decodeInts(w.PromptIDs); err != nil {
			return nil, fmt.Errorf("torch engine: generate: completion %d: %w", i, err)
		}
		if c.IDs, err = decodeInts(w.IDs); err != nil {
			return nil, fmt.Errorf("torch engine: generate: completion %d: %w", i, err)
		}
		if c.LogProbs, err = decodeFloats(w.LogProbs); err != nil {
			return nil, fmt.Errorf("torch engine: generate: completion %d: %w", i, err)
		}
		if len(c.LogProbs) != len(c.IDs) {
			return nil, fmt.Errorf("torch engine: generate: completion %d has %d log-probs for %d tokens", i, len(c.LogProbs), len(c.IDs))
		}
		if w.Finish != engine.FinishStop && w.Finish != engine.FinishLength {
			return nil, fmt.Errorf("torch engine: generate: completion %d has finish reason %q", i, w.Finish)
		}
		c.Text, c.Finish = w.Text, w.Finish
		out[i] = c
	}
	return out, nil
}

type wireTurn struct {
	Adapter       string  `json:"adapter"`
	Role          string  `json:"role"`
	Agent         string  `json:"agent"`
	PromptIDs     string  `json:"prompt_ids"`
	CompletionIDs string  `json:"completion_ids"`
	OldLogProbs   string  `json:"old_logprobs,omitempty"`
	Advantage     float64 `json:"advantage"`
}

type wireOptions struct {
	ClipLow     float64            `json:"clip_low"`
	ClipHigh    float64            `json:"clip_high"`
	LossAgg     string             `json:"loss_agg"`
	Temperature float64            `json:"temperature"`
	LR          float64            `json:"lr"`
	Beta1       float64            `json:"beta1"`
	Beta2       float64            `json:"beta2"`
	Eps         float64            `json:"eps"`
	WeightDecay float64            `json:"weight_decay"`
	GradClip    float64            `json:"grad_clip"`
	KLCoef      map[string]float64 `json:"kl_coef"`
	Coherence   *wireCoherence     `json:"coherence,omitempty"`
}

// wireCoherence are the settings of the per-role gradient EMA and the
// coherence regularizer (lambda 0: measured only; absent: no EMA); form is
// engine.Coherence.Form (absent: the paper's form on the gradient).
type wireCoherence struct {
	Lambda   float64 `json:"lambda"`
	EMADecay float64 `json:"ema_decay"`
	Form     string  `json:"form,omitempty"`
}

type wireStats struct {
	Role         string         `json:"role"`
	Loss         num            `json:"loss"`
	GradNorm     num            `json:"grad_norm"`
	GradShare    num            `json:"grad_share"`
	AgentCosMean num            `json:"agent_cos_mean"`
	AgentCosMin  num            `json:"agent_cos_min"`
	RoleCos      map[string]num `json:"role_cos"`
	// AgentCos is engine.RoleStats.AgentCos; absent from a server without
	// it and for roles with one agent.
	AgentCos   map[string]num `json:"agent_cos,omitempty"`
	Tokens     int            `json:"tokens"`
	Seqs       int            `json:"seqs"`
	MeanLen    num            `json:"mean_len"`
	Entropy    num            `json:"entropy"`
	Perplexity num            `json:"perplexity"`
	RatioMean  num            `json:"ratio_mean"`
	RatioMax   num            `json:"ratio_max"`
	ClipFrac   num            `json:"clip_frac"`
	KL         num            `json:"kl"`
	// The coherence regularizer's cosine and scale; absent from a server
	// without it (NaN then, as null).
	CoherenceCos   *num `json:"coherence_cos"`
	CoherenceScale *num `json:"coherence_scale"`
}

// optNum is a number that may be absent (NaN).
func optNum(n *num) float64 {
	if n == nil {
		return math.NaN()
	}
	return float64(*n)
}

func (w wireStats) stats() engine.RoleStats {
	s := engine.RoleStats{Role: w.Role, Loss: float64(w.Loss), GradNorm: float64(w.GradNorm), GradShare: float64(w.GradShare),
		AgentCosMean: float64(w.AgentCosMean), AgentCosMin: float64(w.AgentCosMin), Tokens: w.Tokens, Seqs: w.Seqs,
		MeanLen: float64(w.MeanLen), Entropy: float64(w.Entropy), Perplexity: float64(w.Perplexity),
		RatioMean: float64(w.RatioMean), RatioMax: float64(w.RatioMax), ClipFrac: float64(w.ClipFrac), KL: float64(w.KL),
		CoherenceCos: optNum(w.CoherenceCos), CoherenceScale: optNum(w.CoherenceScale)}
	if w.RoleCos != nil {
		s.RoleCos = map[string]float64{}
		for k, v := range w.RoleCos {
			s.RoleCos[k] = float64(v)
		}
	}
	if len(w.AgentCos) > 0 {
		s.AgentCos = make(map[string]float64, len(w.AgentCos))
		for k, v := range w.AgentCos {
			s.AgentCos[k] = float64(v)
		}
	}
	return s
}

func wireTurns(turns []engine.Turn, old bool) []wireTurn {
	wt := make([]wireTurn, len(turns))
	for i, t := range turns {
		wt[i] = wireTurn{Adapter: t.Adapter, Role: t.Role, Agent: t.Agent, PromptIDs: encodeInts(t.PromptIDs),
			CompletionIDs: encodeInts(t.CompletionIDs), Advantage: t.Advantage}
		if old {
			wt[i].OldLogProbs = encodeFloats(t.OldLogProbs)
		}
	}
	return wt
}

// TrainStep takes one GRPO step of adapter name with the native engine's
// semantics (see native.Engine.TrainStep).
func (e *Engine) TrainStep(ctx context.Context, name string, turns []engine.Turn, opt engine.TrainOptions) (engine.StepStats, error) {
	st := engine.StepStats{Adapter: name}
	if err := e.check(); err != nil {
		return st, err
	}
	if err := engine.ValidateTrainStep(name, turns, opt, e.limits()); err != nil {
		return st, fmt.Errorf("torch engine: %w", err)
	}
	wo := wireOptions{ClipLow: opt.ClipLow, ClipHigh: opt.ClipHigh, LossAgg: opt.LossAgg, Temperature: opt.Temperature,
		LR: opt.LR, Beta1: opt.Beta1, Beta2: opt.Beta2, Eps: opt.Eps, WeightDecay: opt.WeightDecay, GradClip: opt.GradClip, KLCoef: opt.KLCoef}
	if c := opt.Coherence; c != nil {
		wo.Coherence = &wireCoherence{Lambda: c.Lambda, EMADecay: c.EMADecay, Form: c.Form}
	}
	var res struct {
		Total       *wireStats  `json:"total"`
		Roles       []wireStats `json:"roles"`
		GradNormPre num         `json:"grad_norm_pre"`
		Skipped     int         `json:"skipped"`
	}
	if err := e.c.call(ctx, "train_step", map[string]any{"adapter": name, "turns": wireTurns(turns, true), "options": wo}, &res); err != nil {
		return st, err
	}
	st.SkippedTurns = res.Skipped
	st.GradNormPre = float64(res.GradNormPre)
	if res.Total == nil {
		st.Total = engine.UndefinedStats("*")
		st.Total.GradNorm = 0
		return st, nil
	}
	st.Total = res.Total.stats()
	for _, r := range res.Roles {
		st.Roles = append(st.Roles, r.stats())
	}
	return st, nil
}

// LogProbs implements engine.Engine: the server scores each turn's
// completion under adapter (or the base when adapter is "") at
// temperature, as the native engine does.
func (e *Engine) LogProbs(ctx context.Context, adapter string, turns []engine.Turn, temperature float64) ([][]float32, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if err := engine.ValidateLogProbs(adapter, turns, temperature, e.limits()); err != nil {
		return nil, fmt.Errorf("torch engine: logprobs: %w", err)
	}
	var res struct {
		LogProbs []string `json:"logprobs"`
	}
	args := map[string]any{"adapter": adapter, "temperature": temperature, "turns": wireTurns(turns, false)}
	if err := e.c.call(ctx, "logprobs", args, &res); err != nil {
		return nil, err
	}
	if len(res.LogProbs) != len(turns) {
		return nil, fmt.Errorf("torch engine: logprobs: %d answers for %d turns", len(res.LogProbs), len(turns))
	}
	out := make([][]float32, len(turns))
	for i, s := range res.LogProbs {
		v, err := decodeFloats(s)
		if err != nil {
			return nil, fmt.Errorf("torch engine: logprobs: turn %d: %w", i, err)
		}
		if len(v) != len(turns[i].CompletionIDs) {
			return nil, fmt.Errorf("torch engine: logprobs: turn %d: %d log-probs for %d tokens", i, len(v), len(turns[i].CompletionIDs))
		}
		out[i] = v
	}
	return out, nil
}

// Save writes every adapter, its optimizer state and step count under dir,
// in the native engine's layout.
func (e *Engine) Save(ctx context.Context, dir string) error {
	if err := e.check(); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("torch engine: save %s: %w", dir, err)
	}
	return e.c.call(ctx, "save", map[string]any{"dir": abs}, nil)
}

// Load restores what Save (of either engine) wrote under dir, replacing
// adapters of the same name.
func (e *Engine) Load(ctx context.Context, dir string) error {
	if err := e.check(); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("torch engine: load %s: %w", dir, err)
	}
	var res struct {
		Adapters []string `json:"adapters"`
	}
	if err := e.c.call(ctx, "load", map[string]any{"dir": abs}, &res); err != nil {
		return err
	}
	for _, n := range res.Adapters {
		e.adapters[n] = true
	}
	return nil
}

// Adapters returns the names of the adapters, sorted.
func (e *Engine) Adapters() []string {
	var names []string
	for n := range e.adapters {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Close stops the server; later calls fail.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	return e.c.close(30 * time.Second)
}

// Usage is the resource use of the server process so far.
type Usage struct {
	CPUSeconds    float64 `json:"cpu_seconds"` // user + system
	PeakRSSBytes  int64   `json:"peak_rss_bytes"`
	CUDAPeakBytes int64   `json:"cuda_peak_bytes"` // torch.cuda.max_memory_allocated; 0 on the CPU
	// GenPool is the slot backend's KV pool over the generate calls so
	// far (nil when no call ran on the slot backend).
	GenPool *GenPool `json:"gen_pool,omitempty"`
}

// GenPool is what the slot generation backend did with its paged KV pool,
// summed over generate calls (Blocks, PoolBytes, PeakBlocks and PeakRows:
// the largest of any call).
type GenPool struct {
	Blocks         int64 `json:"blocks"` // blocks of the pool
	BlockTokens    int64 `json:"block_tokens"`
	PoolBytes      int64 `json:"pool_bytes"`
	PeakBlocks     int64 `json:"peak_blocks"` // most blocks held at once (taken as rows grow)
	PeakRows       int64 `json:"peak_rows"`
	Calls          int64 `json:"calls"`
	Requests       int64 `json:"requests"`
	Prefills       int64 `json:"prefills"`         // prompts run (identical prompts of one adapter run once)
	SharedRows     int64 `json:"shared_rows"`      // requests that took an earlier prefill's blocks
	Steps          int64 `json:"steps"`            // decode steps
	RowSteps       int64 `json:"row_steps"`        // rows decoded, summed over steps
	UsedTokenSteps int64 `json:"used_token_steps"` // cached tokens of the live rows, summed over steps
	BlockReuses    int64 `json:"block_reuses"`
	Preemptions    int64 `json:"preemptions"` // rows preempted when the pool ran dry (and recomputed)
}

// Since is g's counters less those of an earlier reading (the calls made
// after it); the pool's size and the peaks stay g's, which cover the whole
// process.
func (g GenPool) Since(before GenPool) GenPool {
	g.Calls -= before.Calls
	g.Requests -= before.Requests
	g.Prefills -= before.Prefills
	g.SharedRows -= before.SharedRows
	g.Steps -= before.Steps
	g.RowSteps -= before.RowSteps
	g.UsedTokenSteps -= before.UsedTokenSteps
	g.BlockReuses -= before.BlockReuses
	g.Preemptions -= before.Preemptions
	return g
}

// MeanOccupancy is the mean share of the pool's token slots that held a
// live row's cached tokens during a decode step.
func (g GenPool) MeanOccupancy() float64 {
	if g.Steps == 0 || g.Blocks == 0 || g.BlockTokens == 0 {
		return 0
	}
	return float64(g.UsedTokenSteps) / float64(g.Steps) / float64(g.Blocks*g.BlockTokens)
}

// MeanBatch is the mean number of rows of a decode step.
func (g GenPool) MeanBatch() float64 {
	if g.Steps == 0 {
		return 0
	}
	return float64(g.RowSteps) / float64(g.Steps)
}

// Usage asks the server for its CPU time and peak memory.
func (e *Engine) Usage(ctx context.Context) (Usage, error) {
	var m Usage
	if err := e.check(); err != nil {
		return m, err
	}
	err := e.c.call(ctx, "stats", struct{}{}, &m)
	return m, err
}

// ProcessUsage is Usage's CPU time and peak RSS (benchmarks).
func (e *Engine) ProcessUsage(ctx context.Context) (float64, int64, error) {
	u, err := e.Usage(ctx)
	return u.CPUSeconds, u.PeakRSSBytes, err
}

// Kill ends the server's process group at once (tests and interrupted
// runs); later calls fail.
func (e *Engine) Kill() { e.c.kill() }
