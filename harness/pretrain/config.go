// Package pretrain builds the tiny base models of the CPU study: noisy
// teacher transcripts of every workflow role on the synthetic tasks,
// full-parameter supervised pretraining of a Qwen3-architecture shape on
// them with the native engine, a content-addressed checkpoint cache
// (committed seeds/models/ first, then $MARLOW_CACHE), and a calibration
// report of the base models' workflow accuracy and format compliance.
//
// Transcripts are rendered with the workflow package's own prompt builders
// and output-format functions, so the prompts and formats a base model
// learns are exactly those the workflows use. Everything is a pure function
// of the configuration and the seed: the same Job always yields the same
// transcripts and byte-identical checkpoints.
package pretrain

import (
	"errors"
	"fmt"
	"github.com/marlowlab/marlow/harness/study"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/harness/spec"
)

// Config is the pretraining section of an experiment: the teacher's role
// mix and noise rates, and the supervised training budget.
type Config struct {
	// Seed keys every random draw of the teacher and the initial weights.
	Seed uint64 `json:"seed"`
	// Steps is the number of optimizer steps per scale; the key "default"
	// applies to scales without an entry of their own.
	Steps map[string]int `json:"steps"`
	// BatchSize is the number of transcripts per optimizer step.
	BatchSize   int     `json:"batch_size"`
	LR          float64 `json:"lr"`
	WarmupSteps int     `json:"warmup_steps"`
	MinLRRatio  float64 `json:"min_lr_ratio"` // cosine decay floor, as a fraction of LR
	WeightDecay float64 `json:"weight_decay"`
	GradClip    float64 `json:"grad_clip"`
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	// Roles is the share of transcripts of each role (normalised to sum 1).
	Roles RoleMix `json:"roles"`
	// Noise are the teacher's deliberate error rates.
	Noise Noise `json:"noise"`
	// CandidateCorrect is the probability that each candidate or solution
	// shown to an evaluator, aggregator or synthesizer is the teacher's
	// correct one rather than a perturbed one.
	CandidateCorrect float64 `json:"candidate_correct"`
}

// RoleMix gives the share of transcripts of each teacher role. Reviser is
// eval-opt's revision turn of the generator.
type RoleMix struct {
	Generator    float64 `json:"generator"`
	Reviser      float64 `json:"reviser"`
	Evaluator    float64 `json:"evaluator"`
	Aggregator   float64 `json:"aggregator"`
	Orchestrator float64 `json:"orchestrator"`
	Worker       float64 `json:"worker"`
	Synthesizer  float64 `json:"synthesizer"`
}

// Noise are the rates of the teacher's deliberate mistakes.
type Noise struct {
	// Slip is the probability that a worked solution (generator, reviser,
	// worker, synthesizer) carries an arithmetic slip or a near-miss
	// program (the task's Perturb).
	Slip float64 `json:"slip"`
	// WrongVerdict is the probability that an evaluator's verdict is flipped.
	WrongVerdict float64 `json:"wrong_verdict"`
	// RandomSelection is the probability that an aggregator selects a
	// uniformly random candidate, or a synthesizer copies a random solution.
	RandomSelection float64 `json:"random_selection"`
	// TooManyStrategies is the probability that an orchestrator proposes
	// more strategies than allowed.
	TooManyStrategies float64 `json:"too_many_strategies"`
	// Malformed is the probability that any transcript's completion breaks
	// its role's output format.
	Malformed float64 `json:"malformed"`
}

// Teacher roles: the workflow roles plus the reviser (eval-opt's revision
// turn of the generator).
const (
	RoleGenerator    = study.Generator
	RoleReviser      = "reviser"
	RoleEvaluator    = study.Evaluator
	RoleAggregator   = study.Aggregator
	RoleOrchestrator = study.Orchestrator
	RoleWorker       = study.Worker
	RoleSynthesizer  = study.Synthesizer
)

// TeacherRoles lists the teacher roles in the fixed order used for
// sampling.
var TeacherRoles = []string{RoleGenerator, RoleReviser, RoleEvaluator, RoleAggregator, RoleOrchestrator, RoleWorker, RoleSynthesizer}

// weights returns the role shares in TeacherRoles order.
func (m RoleMix) weights() []float64 {
	return []float64{m.Generator, m.Reviser, m.Evaluator, m.Aggregator, m.Orchestrator, m.Worker, m.Synthesizer}
}

// DefaultConfig returns the defaults of the spec's pretrain section, the
// settings the committed checkpoints were built with.
func DefaultConfig() Config {
	s, err := defaultSpec()
	if err != nil {
		// Unreachable with the built-in document; the zero Config then
		// fails Validate with a message naming each key.
		return Config{}
	}
	return ConfigOf(s)
}

// ConfigOf returns the pretraining configuration of a spec (its pretrain
// section).
func ConfigOf(s *spec.Spec) Config {
	p := s.Pretrain
	c := Config{Seed: p.Seed, Steps: make(map[string]int, len(p.Steps)), BatchSize: p.BatchSize, LR: p.LR,
		WarmupSteps: p.WarmupSteps, MinLRRatio: p.MinLRRatio, WeightDecay: p.WeightDecay, GradClip: p.GradClip,
		Beta1: p.Beta1, Beta2: p.Beta2,
		Roles: RoleMix{Generator: p.Roles.Generator, Reviser: p.Roles.Reviser, Evaluator: p.Roles.Evaluator,
			Aggregator: p.Roles.Aggregator, Orchestrator: p.Roles.Orchestrator, Worker: p.Roles.Worker,
			Synthesizer: p.Roles.Synthesizer},
		Noise: Noise{Slip: p.Noise.Slip, WrongVerdict: p.Noise.WrongVerdict, RandomSelection: p.Noise.RandomSelection,
			TooManyStrategies: p.Noise.TooManyStrategies, Malformed: p.Noise.Malformed},
		CandidateCorrect: p.CandidateCorrect}
	for k, v := range p.Steps {
		c.Steps[k] = v
	}
	return c
}

// StepsFor returns the step budget of a scale.
func (c Config) StepsFor(scale string) int {
	if n, ok := c.Steps[scale]; ok {
		return n
	}
	return c.Steps["default"]
}

// Validate reports every invalid setting, each naming its key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("pretrain.%s: "+format, append([]any{key}, args...)...))
	}
	if _, ok := c.Steps["default"]; !ok {
		bad("steps", "needs a \"default\" entry")
	}
	keys := slices.Sorted(maps.Keys(c.Steps))
	for _, k := range keys {
		if v := c.Steps[k]; v < 1 || v > 1_000_000 {
			bad("steps."+k, "%d out of range [1, 1000000]", v)
		}
	}
	if c.BatchSize < 1 || c.BatchSize > 4096 {
		bad("batch_size", "%d out of range [1, 4096]", c.BatchSize)
	}
	if !(c.LR > 0 && c.LR < 1) {
		bad("lr", "%v must be in (0, 1)", c.LR)
	}
	if c.WarmupSteps < 0 {
		bad("warmup_steps", "%d must be >= 0", c.WarmupSteps)
	}
	unit := func(key string, v float64) {
		if !(v >= 0 && v <= 1) {
			bad(key, "%v must be in [0, 1]", v)
		}
	}
	unit("min_lr_ratio", c.MinLRRatio)
	if !(c.WeightDecay >= 0 && c.WeightDecay < 1) {
		bad("weight_decay", "%v must be in [0, 1)", c.WeightDecay)
	}
	if !(c.GradClip >= 0) || math.IsInf(c.GradClip, 0) {
		bad("grad_clip", "%v must be >= 0 and finite (0 disables)", c.GradClip)
	}
	if !(c.Beta1 >= 0 && c.Beta1 < 1) {
		bad("beta1", "%v must be in [0, 1)", c.Beta1)
	}
	if !(c.Beta2 >= 0 && c.Beta2 < 1) {
		bad("beta2", "%v must be in [0, 1)", c.Beta2)
	}
	sum := 0.0
	for i, w := range c.Roles.weights() {
		if !(w >= 0) || math.IsInf(w, 0) {
			bad("roles."+TeacherRoles[i], "%v must be >= 0 and finite", w)
			continue
		}
		sum += w
	}
	if !(sum > 0) {
		bad("roles", "shares sum to %v; at least one role needs a positive share", sum)
	}
	unit("noise.slip", c.Noise.Slip)
	unit("noise.wrong_verdict", c.Noise.WrongVerdict)
	unit("noise.random_selection", c.Noise.RandomSelection)
	unit("noise.too_many_strategies", c.Noise.TooManyStrategies)
	unit("noise.malformed", c.Noise.Malformed)
	unit("candidate_correct", c.CandidateCorrect)
	return errors.Join(errs...)
}

// clone deep-copies the Steps map.
func (c Config) clone() Config {
	s := make(map[string]int, len(c.Steps))
	for k, v := range c.Steps {
		s[k] = v
	}
	c.Steps = s
	return c
}

// String renders the budget knobs on one line, for logs.
func (c Config) String() string {
	keys := slices.Sorted(maps.Keys(c.Steps))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, c.Steps[k])
	}
	return fmt.Sprintf("steps {%s} batch %d lr %g warmup %d seed %d", strings.Join(parts, ", "), c.BatchSize, c.LR, c.WarmupSteps, c.Seed)
}
