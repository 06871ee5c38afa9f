package engine

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/harness/study"
)

// The checks below are the one definition of what an engine accepts from
// the harness. Every engine calls them at the start of the matching call,
// and the torch client calls them before it sends anything to its server,
// so a bad call fails the same way whichever engine runs it. Errors name
// the request or turn by index, its agent, the field and the bad value;
// engines prefix their own name.

// Limits are what the checks know of an open engine: its adapters and the
// bounds of its model.
type Limits struct {
	// Adapters are the names of the engine's adapters ("" is always the
	// base policy and need not be listed).
	Adapters []string
	// VocabSize bounds token ids to [0, VocabSize); 0 leaves them
	// unchecked.
	VocabSize int
	// MaxPositions (the model's max_position_embeddings) bounds the tokens
	// of one sequence; 0 leaves it unchecked.
	MaxPositions int
}

func (l Limits) checkAdapter(name string) error {
	if name == "" || slices.Contains(l.Adapters, name) {
		return nil
	}
	have := slices.Sorted(slices.Values(l.Adapters))
	return fmt.Errorf("unknown adapter %q (have %v)", name, have)
}

// ValidateAdapterName checks the name of a new or loaded adapter: not
// empty ("" is the base policy) and usable as a folder name, since
// checkpoints store each adapter in a folder of its name.
func ValidateAdapterName(name string) error {
	if name == "" {
		return errors.New("adapter name is empty (\"\" is the base policy)")
	}
	if name != filepath.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("adapter name %q must be usable as a folder name", name)
	}
	return nil
}

// ValidateAdapter checks a new or loaded adapter: its name
// (ValidateAdapterName) and its configuration, a positive rank, a positive
// finite alpha and targets among study.LoRATargets (none means all).
func ValidateAdapter(name string, cfg AdapterConfig) error {
	if err := ValidateAdapterName(name); err != nil {
		return err
	}
	if cfg.Rank <= 0 {
		return fmt.Errorf("adapter %q: rank %d must be positive", name, cfg.Rank)
	}
	if !(cfg.Alpha > 0) || math.IsInf(cfg.Alpha, 0) {
		return fmt.Errorf("adapter %q: alpha %v must be positive and finite", name, cfg.Alpha)
	}
	for _, t := range cfg.Targets {
		if !slices.Contains(study.LoRATargets, t) {
			return fmt.Errorf("adapter %q: unknown LoRA target %q (want one of %v)", name, t, study.LoRATargets)
		}
	}
	return nil
}

// ValidateTemperature checks a sampling or scoring temperature: positive
// and finite.
func ValidateTemperature(t float64) error {
	if !(t > 0) || math.IsInf(t, 0) {
		return fmt.Errorf("temperature %v must be positive and finite", t)
	}
	return nil
}

// ValidateRequests checks the requests of a Generate call: each names the
// base policy or one of lim.Adapters, has a positive finite temperature and
// a non-negative MaxNewTokens. What needs the engine's tokenizer (the
// templated prompt fits MaxPositions with its new tokens) is left to the
// engine.
func ValidateRequests(reqs []Request, lim Limits) error {
	for i := range reqs {
		r := &reqs[i]
		if err := lim.checkAdapter(r.Adapter); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		if err := ValidateTemperature(r.Temperature); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		if r.MaxNewTokens < 0 {
			return fmt.Errorf("request %d: max new tokens %d is negative", i, r.MaxNewTokens)
		}
	}
	return nil
}

// ValidateLogProbs checks the arguments of a LogProbs call: adapter is the
// base policy or one of lim.Adapters, the temperature is positive and
// finite, and every turn has a prompt and a completion of vocabulary ids
// that fit in MaxPositions together (only the turns' token ids are used).
func ValidateLogProbs(adapter string, turns []Turn, temperature float64, lim Limits) error {
	if err := lim.checkAdapter(adapter); err != nil {
		return err
	}
	if err := ValidateTemperature(temperature); err != nil {
		return err
	}
	for i := range turns {
		if err := validateTokens(i, &turns[i], lim); err != nil {
			return err
		}
	}
	return nil
}

// ValidateTrainStep checks the arguments of a TrainStep call: adapter is
// one of lim.Adapters (the base policy is frozen), the options are valid,
// and every turn names adapter, has a prompt and a completion of vocabulary
// ids that fit in MaxPositions, one finite old log-prob per completion
// token and a finite advantage.
func ValidateTrainStep(adapter string, turns []Turn, opt TrainOptions, lim Limits) error {
	if adapter == "" {
		return errors.New("train step needs an adapter (the base policy is frozen)")
	}
	if err := lim.checkAdapter(adapter); err != nil {
		return err
	}
	if err := opt.Validate(); err != nil {
		return err
	}
	for i := range turns {
		t := &turns[i]
		if t.Adapter != adapter {
			return fmt.Errorf("turn %d (agent %q) names adapter %q, not %q", i, t.Agent, t.Adapter, adapter)
		}
		if err := validateTokens(i, t, lim); err != nil {
			return err
		}
		if len(t.OldLogProbs) != len(t.CompletionIDs) {
			return fmt.Errorf("turn %d (agent %q) has %d old log-probs for %d completion tokens", i, t.Agent, len(t.OldLogProbs), len(t.CompletionIDs))
		}
		for j, lp := range t.OldLogProbs {
			if math.IsNaN(float64(lp)) || math.IsInf(float64(lp), 0) {
				return fmt.Errorf("turn %d (agent %q) has old log-prob %v at token %d", i, t.Agent, lp, j)
			}
		}
		if math.IsNaN(t.Advantage) || math.IsInf(t.Advantage, 0) {
			return fmt.Errorf("turn %d (agent %q) has advantage %v", i, t.Agent, t.Advantage)
		}
	}
	return nil
}

// validateTokens checks the token ids of turn i: a prompt and a completion
// of vocabulary ids whose training input (the prompt and the completion
// but its last token) fits in MaxPositions.
func validateTokens(i int, t *Turn, lim Limits) error {
	if len(t.CompletionIDs) == 0 {
		return fmt.Errorf("turn %d (agent %q) has an empty completion", i, t.Agent)
	}
	if len(t.PromptIDs) == 0 {
		return fmt.Errorf("turn %d (agent %q) has an empty prompt", i, t.Agent)
	}
	if n := len(t.PromptIDs) + len(t.CompletionIDs) - 1; lim.MaxPositions > 0 && n > lim.MaxPositions {
		return fmt.Errorf("turn %d (agent %q) has %d input tokens, more than max_position_embeddings %d", i, t.Agent, n, lim.MaxPositions)
	}
	if lim.VocabSize <= 0 {
		return nil
	}
	for _, part := range []struct {
		what string
		ids  []int32
	}{{"prompt", t.PromptIDs}, {"completion", t.CompletionIDs}} {
		for j, id := range part.ids {
			if id < 0 || int(id) >= lim.VocabSize {
				return fmt.Errorf("turn %d (agent %q) %s: token %d at index %d is outside the vocabulary [0, %d)", i, t.Agent, part.what, id, j, lim.VocabSize)
			}
		}
	}
	return nil
}
