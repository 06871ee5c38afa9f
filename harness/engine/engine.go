// Package engine defines the contract between the GRPO harness and a model
// engine: named LoRA adapters over one frozen base checkpoint, batched
// sampling, and a policy-gradient train step that reports per-role gradient
// statistics.
//
// Implementations register a Driver (a name, a version for manifests, a
// check of their prerequisites and an Open function) in a Registry, which
// the program fills: this package depends on none of them. Two engines
// exist and the CLI registers both: native (package native, a pure-Go CPU
// transformer) and torch (package torch, a Go client of a Python
// transformers + peft server for GPU nodes). `marlow run` refuses a plan
// naming an engine that is not registered before it writes anything.
// Engines own tokenization; the harness exchanges chat messages, token ids
// and log-probs with them.
package engine

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/marlowlab/marlow/harness/study"
)

// Message is one chat message in the Qwen chat layout.
type Message struct {
	Role    string `json:"role"` // "system", "user" or "assistant"
	Content string `json:"content"`
}

// AdapterConfig describes a LoRA adapter. A new adapter has B = 0, so it is
// exactly the base policy until trained.
type AdapterConfig struct {
	Rank    int      // LoRA rank r
	Alpha   float64  // scaling is Alpha / Rank
	Targets []string // subset of q_proj k_proj v_proj o_proj gate_proj up_proj down_proj; empty = all
	Seed    uint64   // seeds the initialisation of A
}

// Request asks for one completion.
type Request struct {
	Adapter      string // adapter name; "" samples from the base (reference) policy
	Messages     []Message
	MaxNewTokens int
	Temperature  float64 // > 0
	Seed         uint64  // keys this request's own random stream
	// IgnoreEndOfTurn keeps sampling past the end-of-turn token until
	// MaxNewTokens (benchmarks use it so every sequence runs to length).
	IgnoreEndOfTurn bool
}

// Finish reasons of a Completion.
const (
	FinishStop   = "stop"   // the model emitted the end-of-turn token
	FinishLength = "length" // max new tokens reached
)

// Completion is the result of one Request.
type Completion struct {
	PromptIDs []int32   // token ids of the templated prompt (with the generation prompt)
	IDs       []int32   // completion token ids, including the end-of-turn token when emitted
	Text      string    // decoded completion without the end-of-turn token
	LogProbs  []float32 // log-prob of each IDs[i] under softmax(logits / temperature)
	Finish    string    // FinishStop or FinishLength
}

// Turn is one agent turn to train on.
type Turn struct {
	Adapter       string
	Role          string // role type, e.g. "generator"
	Agent         string // agent name, e.g. "generator1"
	PromptIDs     []int32
	CompletionIDs []int32
	OldLogProbs   []float32 // log-probs the completion was sampled with
	Advantage     float64
}

// Loss aggregation modes.
const (
	TokenMean        = study.TokenMean
	SeqMeanTokenMean = study.SeqMeanTokenMean
	SeqMeanTokenSum  = study.SeqMeanTokenSum
)

// TrainOptions are the settings of one optimizer step.
type TrainOptions struct {
	ClipLow     float64 // ratio clipped below at 1 - ClipLow
	ClipHigh    float64 // ratio clipped above at 1 + ClipHigh
	LossAgg     string  // TokenMean, SeqMeanTokenMean or SeqMeanTokenSum
	Temperature float64 // log-probs are computed under softmax(logits / Temperature)
	LR          float64 // learning rate for this step (the harness applies the schedule)
	Beta1       float64
	Beta2       float64
	Eps         float64
	WeightDecay float64
	GradClip    float64            // global L2 norm clip; 0 disables
	KLCoef      map[string]float64 // optional per-role KL-to-base penalty coefficient
	// Coherence, when non-nil, keeps an EMA of each role's past gradients
	// in this adapter, m <- EMADecay m + (1 - EMADecay) g after each step
	// (m starts as the role's first gradient), and reports each role's
	// cosine to it (RoleStats.CoherenceCos). With Lambda > 0 it is the
	// coherence regularizer (I6 of the paper's code): before the roles'
	// gradients are summed, each role's gradient g is multiplied by
	// 1 - Lambda max(0, cos(g, m)) (the first gradient is not scaled).
	// With Lambda 0 it only measures (CoherenceMonitor): every scale is 1
	// and the gradients, and so the step, are bit for bit those of a nil
	// Coherence. With Form CoherenceStep the role gradients are summed
	// unscaled and the optimizer's step is multiplied instead
	// (CoherenceStepFactor). The EMAs are adapter state: Save writes them
	// and Load restores them.
	Coherence *Coherence
}

// Coherence are the settings of the per-role gradient EMA and of the
// coherence regularizer.
type Coherence struct {
	Lambda   float64 // strength in [0, 1]: an aligned gradient is scaled by 1 - Lambda; 0 only measures
	EMADecay float64 // decay of the per-role gradient EMA in [0, 1); 0 keeps only the last gradient
	// Form is where the factors act: empty for the paper's form (so that a
	// config without the field encodes, and hashes, as before it existed):
	// each role's gradient is multiplied by its factor before the roles'
	// gradients are summed, clipped and handed to AdamW, which divides by
	// the gradient's running RMS and so normalises most of a factor that
	// changes little from step to step away; or CoherenceStep.
	Form string `json:",omitempty"`
}

// CoherenceStep is the coherence regularizer's form that acts on the
// update: the roles' gradients are summed unscaled (AdamW's moments are
// those of the unregularised run) and the optimizer's step, weight decay
// included, is multiplied by CoherenceStepFactor, which AdamW cannot undo:
// a one-role adapter moves by exactly its role's factor times the
// unregularised step.
const CoherenceStep = study.CoherenceStep

// CoherenceStepFactor is the factor the CoherenceStep form multiplies an
// adapter's optimizer step by: its roles' factors (CoherenceScale) weighted
// by their shares of the squared gradient norm (RoleStats.GradShare),
// sum_r share_r scale_r, summed in role order. With one role it is that
// role's factor; it is 1 when no share is defined (a zero gradient).
func CoherenceStepFactor(roles []RoleStats) float64 {
	f, w := 0.0, 0.0
	for _, rs := range roles {
		if math.IsNaN(rs.GradShare) || math.IsNaN(rs.CoherenceScale) {
			continue
		}
		f += rs.GradShare * rs.CoherenceScale
		w += rs.GradShare
	}
	if !(w > 0) {
		return 1
	}
	return f
}

// DefaultCoherenceEMADecay is the EMA decay of the coherence regularizer
// when a spec sets none, and of the measuring-only EMA every run keeps
// without the regularizer (a window of about 10 steps).
const DefaultCoherenceEMADecay = 0.9

// CoherenceMonitor is the Coherence of a run without the regularizer: the
// per-role gradient EMA at DefaultCoherenceEMADecay, measured (the cosine
// the gradient-amplification detector reads) and never applied.
func CoherenceMonitor() *Coherence {
	return &Coherence{Lambda: 0, EMADecay: DefaultCoherenceEMADecay}
}

// Validate checks the regularizer's settings.
func (c Coherence) Validate() error {
	if !(c.Lambda >= 0 && c.Lambda <= 1) {
		return fmt.Errorf("coherence lambda %v is out of range (want 0 <= lambda <= 1)", c.Lambda)
	}
	if !(c.EMADecay >= 0 && c.EMADecay < 1) {
		return fmt.Errorf("coherence ema_decay %v is out of range (want 0 <= ema_decay < 1)", c.EMADecay)
	}
	if c.Form != "" && c.Form != CoherenceStep {
		return fmt.Errorf("coherence form %q is unknown (want empty, the paper's form on the gradient, or %q)", c.Form, CoherenceStep)
	}
	return nil
}

// CoherenceScale is the factor the coherence regularizer multiplies a
// role's gradient by when its cosine to the role's gradient EMA is cos:
// 1 - lambda max(0, cos). An undefined cosine (NaN: no EMA yet, or a zero
// gradient) gives 1.
func CoherenceScale(lambda, cos float64) float64 {
	if math.IsNaN(cos) || cos <= 0 {
		return 1
	}
	return 1 - lambda*cos
}

// Validate checks the settings every engine's train step relies on: a
// known loss aggregation, a positive finite temperature, a clip range,
// optimizer settings in range and finite KL coefficients. The error names
// the setting; engines prefix their own name.
func (o TrainOptions) Validate() error {
	switch o.LossAgg {
	case TokenMean, SeqMeanTokenMean, SeqMeanTokenSum:
	default:
		return fmt.Errorf("unknown loss aggregation %q (want %s, %s or %s)", o.LossAgg, TokenMean, SeqMeanTokenMean, SeqMeanTokenSum)
	}
	if err := ValidateTemperature(o.Temperature); err != nil {
		return err
	}
	if o.ClipLow < 0 || o.ClipLow >= 1 || o.ClipHigh < 0 {
		return fmt.Errorf("clip range low %v high %v is invalid (want 0 <= low < 1, high >= 0)", o.ClipLow, o.ClipHigh)
	}
	if o.LR < 0 || o.Beta1 < 0 || o.Beta1 >= 1 || o.Beta2 < 0 || o.Beta2 >= 1 || o.Eps <= 0 || o.WeightDecay < 0 || o.GradClip < 0 {
		return fmt.Errorf("invalid optimizer settings lr %v betas (%v, %v) eps %v weight decay %v grad clip %v", o.LR, o.Beta1, o.Beta2, o.Eps, o.WeightDecay, o.GradClip)
	}
	for _, role := range slices.Sorted(maps.Keys(o.KLCoef)) {
		if c := o.KLCoef[role]; math.IsNaN(c) || math.IsInf(c, 0) {
			return fmt.Errorf("KL coefficient of role %q is %v (want a finite number)", role, c)
		}
	}
	if o.Coherence != nil {
		return o.Coherence.Validate()
	}
	return nil
}

// RoleStats are the statistics of one role's share of a train step (or of
// the whole step when Role is "*"). Undefined values are NaN.
type RoleStats struct {
	Role         string
	Loss         float64 // this role's share of the aggregated loss
	GradNorm     float64 // L2 norm of the gradient of the role's share alone
	GradShare    float64 // |g_role|^2 / sum over roles of |g_role|^2
	AgentCosMean float64 // mean pairwise cosine between same-role agents' gradients
	AgentCosMin  float64 // min pairwise cosine between same-role agents' gradients
	// AgentCos is, for each agent of a role with two or more agents in the
	// step (voting's generator0..2), the mean cosine between its gradient
	// and each other same-role agent's, keyed by agent; nil with one agent
	// and on "*". Its mean over the agents is AgentCosMean.
	AgentCos   map[string]float64
	RoleCos    map[string]float64 // cosine to each other role's gradient in the same adapter
	Tokens     int                // completion tokens
	Seqs       int                // turns
	MeanLen    float64            // mean completion length in tokens
	Entropy    float64            // mean per-token entropy of the current policy
	Perplexity float64            // exp(mean per-token negative log-likelihood)
	RatioMean  float64            // mean importance ratio
	RatioMax   float64
	ClipFrac   float64 // fraction of tokens whose ratio was clipped
	KL         float64 // mean k3 estimate of KL(current || base)
	// CoherenceCos is the cosine between the role's gradient and its EMA
	// (TrainOptions.Coherence), CoherenceScale the role's factor
	// 1 - Lambda max(0, cos) (1 with Lambda 0), which the paper's form
	// multiplies its gradient by; both NaN without a Coherence, and the
	// cosine NaN (scale 1) at the role's first step. For "*" the cosine is
	// NaN and the scale is the factor the CoherenceStep form multiplied
	// the optimizer's step by (CoherenceStepFactor), NaN in the other forms.
	CoherenceCos   float64
	CoherenceScale float64
}

// UndefinedStats are the statistics of a role with nothing measured: every
// float NaN (Tokens and Seqs 0, RoleCos nil).
func UndefinedStats(role string) RoleStats {
	n := math.NaN()
	return RoleStats{Role: role, Loss: n, GradNorm: n, GradShare: n, AgentCosMean: n, AgentCosMin: n,
		MeanLen: n, Entropy: n, Perplexity: n, RatioMean: n, RatioMax: n, ClipFrac: n, KL: n,
		CoherenceCos: n, CoherenceScale: n}
}

// StepStats is the result of one TrainStep.
type StepStats struct {
	Adapter      string
	Total        RoleStats   // Role "*"
	Roles        []RoleStats // sorted by role
	GradNormPre  float64     // global gradient norm before clipping
	SkippedTurns int         // turns with zero advantage, not trained on
}

// Engine is a model engine. Every call but Close takes a context; a call
// whose context is cancelled returns an error wrapping ctx.Err() (long
// calls also check it while they run). Each call first checks its arguments
// with this package's Validate functions (ValidateAdapter,
// ValidateRequests, ValidateLogProbs, ValidateTrainStep), so a bad call
// fails the same way on every engine. Implementations are not required to
// be safe for concurrent use.
type Engine interface {
	// NewAdapter creates a named adapter over the base checkpoint, with its
	// own optimizer state.
	NewAdapter(ctx context.Context, name string, cfg AdapterConfig) error
	// Generate samples one completion per request.
	Generate(ctx context.Context, reqs []Request) ([]Completion, error)
	// LogProbs scores each turn's completion under adapter (or the base
	// when adapter is "") at temperature: the log-prob of CompletionIDs[j]
	// under softmax(logits / temperature) given the prompt and the
	// completion before it. Only PromptIDs and CompletionIDs are used.
	LogProbs(ctx context.Context, adapter string, turns []Turn, temperature float64) ([][]float32, error)
	// TrainStep takes one optimizer step of one adapter on the turns
	// (all turns must name that adapter).
	TrainStep(ctx context.Context, adapter string, turns []Turn, opt TrainOptions) (StepStats, error)
	// Save writes every adapter and its optimizer state under dir.
	Save(ctx context.Context, dir string) error
	// Load restores what Save wrote, replacing adapters of the same name.
	Load(ctx context.Context, dir string) error
	// Close releases the engine's resources.
	Close() error
}

// Schedule is a learning-rate schedule: linear warmup then cosine decay
// (to MinRatio x peak) or constant.
type Schedule struct {
	Kind     string // "cosine" or "constant"
	Warmup   int    // warmup steps
	Total    int    // total steps
	MinRatio float64
}

// LR returns the learning rate at step (0-based) for peak learning rate base.
func (s Schedule) LR(base float64, step int) float64 {
	if s.Warmup > 0 && step < s.Warmup {
		return base * float64(step+1) / float64(s.Warmup)
	}
	if s.Kind != "cosine" || s.Total <= s.Warmup {
		return base
	}
	p := float64(step-s.Warmup) / float64(s.Total-s.Warmup)
	if p > 1 {
		p = 1
	}
	c := 0.5 * (1 + math.Cos(math.Pi*p))
	return base * (s.MinRatio + (1-s.MinRatio)*c)
}
