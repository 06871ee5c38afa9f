package grpo

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

// Config is everything the training loop needs besides the engine, the task
// and the log. It has no defaults of its own: the settings of GRPO and
// their defaults are the spec's grpo section (spec.GRPO), and the runner
// maps a run's resolved config onto this (runner.TrainerConfig).
type Config struct {
	RunID string `json:"run_id"`
	Seed  uint64 `json:"seed"` // the run's seed; keys every request, sample and adapter init
	// ValSeed keys validation sampling in place of Seed when non-zero; the
	// runner gives every run of a cell the same one (common random numbers).
	ValSeed   uint64 `json:"val_seed,omitempty"`
	Condition string `json:"condition"` // study.Base, study.SARL, study.SP or study.IP
	// Routing is a declared routing of an sp or ip run (its From is
	// Condition); nil (the condition's own routing) leaves the JSON
	// encoding, and so Hash, as before routings existed.
	Routing *study.Routing `json:"routing,omitempty"`
	// Workflow is the workflow trained in (Single for sa-rl), or evaluated
	// in for base.
	Workflow string `json:"workflow"`
	// EvalWorkflows are the workflows validated in; empty means Workflow
	// only. The first one's accuracy is reported to Progress.
	EvalWorkflows []string `json:"eval_workflows"`

	// Settings are the workflow settings, encoded (and hashed) as the
	// fields n_votes, max_iterations and max_subtasks.
	study.Settings

	Rollouts        int             `json:"rollouts"`          // G, rollouts per problem
	ProblemsPerStep int             `json:"problems_per_step"` // problems per training step
	Steps           int             `json:"steps"`             // training steps (ignored for base: 0)
	LR              float64         `json:"lr"`                // peak learning rate
	Schedule        engine.Schedule `json:"schedule"`          // Total 0 = Steps
	ClipLow         float64         `json:"clip_low"`
	ClipHigh        float64         `json:"clip_high"`
	LossAgg         string          `json:"loss_agg"`
	Temperature     float64         `json:"temperature"` // sampling and log-prob temperature, train and validation
	// MaxNewTokens caps each role's completions; roles absent from the map
	// use DefaultMaxNewTokens.
	MaxNewTokens        map[string]int       `json:"max_new_tokens"`
	DefaultMaxNewTokens int                  `json:"default_max_new_tokens"`
	Beta1               float64              `json:"beta1"`
	Beta2               float64              `json:"beta2"`
	AdamEps             float64              `json:"adam_eps"`
	WeightDecay         float64              `json:"weight_decay"`
	GradClip            float64              `json:"grad_clip"`
	KLCoef              map[string]float64   `json:"kl_coef"` // per role; absent = 0
	AdvEps              float64              `json:"adv_eps"` // advantage denominator epsilon
	Adapter             engine.AdapterConfig `json:"adapter"` // rank, alpha, targets (Seed is derived per adapter)
	// Coherence turns on the coherence regularizer (Lambda in (0, 1]);
	// nil (off) leaves the JSON encoding, and so Hash, as before the option
	// existed. Either way every train step keeps each role's gradient EMA
	// and logs its cosine (trainOptions: engine.CoherenceMonitor when nil).
	Coherence *engine.Coherence `json:"coherence,omitempty"`

	EvalEvery          int  `json:"eval_every"` // validate every N steps (0: only before and at the end)
	EvalBeforeTraining bool `json:"eval_before_training"`
	ValSize            int  `json:"val_size"` // first N validation problems (0: all)
	// FirstValSize is the first validation's problems when above ValSize
	// (0: ValSize; spec.Eval.FirstValSize): its samples cover them all,
	// its evals rows the first ValSize.
	FirstValSize   int `json:"first_val_size,omitempty"`
	ValSamples     int `json:"val_samples"`      // rollouts per validation problem (0 or 1: one; k: avg@k)
	SaveEvery      int `json:"save_every"`       // checkpoint every N steps (0: only at the end)
	SamplesPerStep int `json:"samples_per_step"` // train turns sampled into samples/ per step
}

// AdvEps is the epsilon of the advantage denominator (reward minus the
// group mean, divided by the group std + AdvEps) of the reference recipe.
const AdvEps = 1e-6

// steps is the number of training steps the loop runs.
func (c Config) steps() int {
	if cond, ok := study.ConditionOf(c.Condition); ok && !cond.Trains {
		return 0
	}
	return c.Steps
}

// evalWorkflows returns the workflows validated in.
func (c Config) evalWorkflows() []string {
	if len(c.EvalWorkflows) == 0 {
		return []string{c.Workflow}
	}
	return c.EvalWorkflows
}

// workflowConfig is the workflow.Config of one workflow under this run.
func (c Config) workflowConfig(name string) workflow.Config {
	return workflow.Config{
		Name: name, Settings: c.Settings,
		Temperature: c.Temperature, MaxNewTokens: c.MaxNewTokens, DefaultMaxNewTokens: c.DefaultMaxNewTokens,
	}
}

// Validate reports the first setting the loop cannot run with.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("grpo config of run %q: "+format, append([]any{c.RunID}, a...)...)
	}
	if c.RunID == "" {
		return bad("run_id is empty")
	}
	if _, err := Router(c.Condition, c.Routing); err != nil {
		return bad("%w", err)
	}
	if c.Routing != nil {
		var problems []string
		c.Routing.Validate(c.Routing.Name, func(key, format string, a ...any) {
			problems = append(problems, fmt.Sprintf("routing %s: %s: %s", c.Routing.Name, key, fmt.Sprintf(format, a...)))
		})
		if len(problems) > 0 {
			return bad("%s", problems[0])
		}
	}
	if cond, _ := study.ConditionOf(c.Condition); cond.TrainsIn != "" && c.Workflow != cond.TrainsIn {
		return bad("condition %s trains the %s workflow, not %q", cond.Name, cond.TrainsIn, c.Workflow)
	}
	for _, w := range append([]string{c.Workflow}, c.EvalWorkflows...) {
		if err := c.workflowConfig(w).Validate(); err != nil {
			return bad("%w", err)
		}
	}
	if c.ValSamples < 0 || c.ValSamples > 64 {
		return bad("val_samples %d is outside [0, 64]", c.ValSamples)
	}
	if c.FirstValSize < 0 || (c.FirstValSize > 0 && c.FirstValSize <= c.ValSize) {
		return bad("first_val_size %d: want 0 or more than val_size %d", c.FirstValSize, c.ValSize)
	}
	if c.ValSize < 0 {
		return bad("val_size %d is negative", c.ValSize)
	}
	if c.steps() == 0 {
		return nil
	}
	switch {
	case c.Steps < 0:
		return bad("steps %d is negative", c.Steps)
	case c.Rollouts < 2:
		return bad("rollouts %d: GRPO needs at least 2 per problem", c.Rollouts)
	case c.ProblemsPerStep < 1:
		return bad("problems_per_step %d must be >= 1", c.ProblemsPerStep)
	case !(c.LR > 0):
		return bad("lr %v must be > 0", c.LR)
	case c.Schedule.Kind != "cosine" && c.Schedule.Kind != "constant":
		return bad("schedule kind %q (want cosine or constant)", c.Schedule.Kind)
	case c.Schedule.Warmup < 0 || c.Schedule.MinRatio < 0 || c.Schedule.MinRatio > 1:
		return bad("schedule warmup %d / min_ratio %v out of range", c.Schedule.Warmup, c.Schedule.MinRatio)
	case c.ClipLow < 0 || c.ClipLow >= 1 || c.ClipHigh < 0:
		return bad("clip low %v / high %v out of range", c.ClipLow, c.ClipHigh)
	case c.LossAgg != engine.TokenMean && c.LossAgg != engine.SeqMeanTokenMean && c.LossAgg != engine.SeqMeanTokenSum:
		return bad("loss_agg %q (want %s, %s or %s)", c.LossAgg, engine.TokenMean, engine.SeqMeanTokenMean, engine.SeqMeanTokenSum)
	case !(c.AdvEps > 0):
		return bad("adv_eps %v must be > 0", c.AdvEps)
	case c.Beta1 < 0 || c.Beta1 >= 1 || c.Beta2 < 0 || c.Beta2 >= 1 || !(c.AdamEps > 0):
		return bad("adam betas %v/%v and eps %v out of range", c.Beta1, c.Beta2, c.AdamEps)
	case c.WeightDecay < 0 || c.GradClip < 0:
		return bad("weight_decay %v and grad_clip %v must be >= 0", c.WeightDecay, c.GradClip)
	case c.EvalEvery < 0 || c.SaveEvery < 0 || c.SamplesPerStep < 0:
		return bad("eval_every %d, save_every %d and samples_per_step %d must be >= 0", c.EvalEvery, c.SaveEvery, c.SamplesPerStep)
	case c.Adapter.Rank < 1 || !(c.Adapter.Alpha > 0):
		return bad("adapter rank %d / alpha %v must be positive", c.Adapter.Rank, c.Adapter.Alpha)
	}
	for role, k := range c.KLCoef {
		if !knownRole(role) || k < 0 || math.IsNaN(k) {
			return bad("kl_coef[%q] = %v: unknown role or negative coefficient", role, k)
		}
	}
	if c.Coherence != nil {
		if err := c.Coherence.Validate(); err != nil {
			return bad("%w", err)
		}
		if c.Coherence.Lambda == 0 {
			return bad("coherence lambda 0 turns the regularizer off (want 0 < lambda <= 1; leave coherence out: every run keeps the measuring-only gradient EMA)")
		}
	}
	return nil
}

// Hash is the hex SHA-256 of the config's JSON encoding (map keys sorted).
// A checkpoint records it, and resume refuses a checkpoint of another
// config.
func (c Config) Hash() string {
	b, err := json.Marshal(c)
	if err != nil {
		// Config holds only plain values; NaN in a float field is the one
		// way to get here, and Validate refuses it where it matters.
		b = []byte(fmt.Sprintf("%#v", c))
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// trainOptions are the engine's options for one adapter at a training step
// (1-based); roles are the roles routed to it. A schedule whose Total is 0
// spans the run's Steps. The routing's settings of the adapter apply: its
// learning-rate multiplier scales the scheduled rate, and its KL
// coefficient is that of each of its roles. Without the coherence
// regularizer the step still keeps each role's gradient EMA and reports the
// cosine to it (engine.CoherenceMonitor: decay
// engine.DefaultCoherenceEMADecay, every scale 1, the gradients untouched),
// for the gradient-amplification detector.
func (c Config) trainOptions(step int, adapter string, roles []string) engine.TrainOptions {
	sched := c.Schedule
	if sched.Total == 0 {
		sched.Total = c.Steps
	}
	coh := c.Coherence
	if coh == nil {
		coh = engine.CoherenceMonitor()
	}
	set := c.Routing.Settings(adapter)
	lr := sched.LR(c.LR, step-1)
	if set.LRMult != nil {
		lr *= *set.LRMult
	}
	kl := c.KLCoef
	if set.KLCoef != nil {
		kl = make(map[string]float64, len(c.KLCoef)+len(roles))
		for role, k := range c.KLCoef {
			kl[role] = k
		}
		for _, role := range roles {
			kl[role] = *set.KLCoef
		}
	}
	return engine.TrainOptions{
		ClipLow: c.ClipLow, ClipHigh: c.ClipHigh, LossAgg: c.LossAgg, Temperature: c.Temperature,
		LR:    lr,
		Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.AdamEps, WeightDecay: c.WeightDecay, GradClip: c.GradClip,
		KLCoef: kl, Coherence: coh,
	}
}

// valSeed is the seed of validation sampling: ValSeed, or Seed when unset.
func (c Config) valSeed() uint64 {
	if c.ValSeed != 0 {
		return c.ValSeed
	}
	return c.Seed
}
