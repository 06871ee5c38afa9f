package workflow

import (
	"sort"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/keyed"
)

// Turn is one agent call of an episode.
type Turn struct {
	Agent      string // agent name: generator, generator1, evaluator0, worker2, ...
	Role       string // role type
	Iteration  int    // eval-opt round (0-based); 0 elsewhere
	Adapter    string // adapter the turn was sampled with ("" = base policy)
	Seed       uint64 // the request's seed
	Prompt     []engine.Message
	Completion engine.Completion
	// Parsed is the turn's parsed output as logged: the answer the verifier
	// found (answering roles), "Correct"/"Incorrect" (evaluator; "" when it
	// did not parse), the selected candidate number (aggregator) or the
	// strategies, one per line (orchestrator). The workflows write it and
	// never read it back: their decisions live in Episode.Flow.
	Parsed    string
	Compliant bool   // the output met its role's format
	Reason    string // "ok", or why the output is not compliant
	// Graded is true when the turn has an answer of its own to regrade:
	// generator, worker and synthesizer answers (graded by the task's
	// verifier), the aggregator's selected candidate, and the evaluator's
	// verdict (correct when it matches the judged solution's true grade and
	// parsed).
	Graded  bool
	Verdict datasets.Verdict
}

// Episode is one rollout of a workflow on one problem.
type Episode struct {
	Workflow     string
	Problem      datasets.Problem
	ProblemIndex int64 // train-stream cursor or validation index; keys groups and seeds
	Rollout      int
	Turns        []Turn
	Final        string           // the final answer text ("" when the episode ended without one)
	FinalVerdict datasets.Verdict // the verifier's grade of Final
	// Ended says why the episode ended early ("" when it ran to its end),
	// e.g. the orchestrator proposed too many strategies.
	Ended string
	// Flow is the workflow's typed state of the episode (an *Interp):
	// its decisions, and how each supervisory turn was read
	// (Flow.Readings).
	Flow Flow
}

// Reward is the outcome reward: 1 when the final answer is correct, else 0.
func (e *Episode) Reward() float64 {
	if e.FinalVerdict.Correct {
		return 1
	}
	return 0
}

// Compliance is one role's format compliance within an episode.
type Compliance struct {
	Role      string
	Turns     int
	Compliant int
}

// Compliance returns per-role format compliance, sorted by role.
func (e *Episode) Compliance() []Compliance {
	m := map[string]*Compliance{}
	for _, t := range e.Turns {
		c := m[t.Role]
		if c == nil {
			c = &Compliance{Role: t.Role}
			m[t.Role] = c
		}
		c.Turns++
		if t.Compliant {
			c.Compliant++
		}
	}
	out := make([]Compliance, 0, len(m))
	for _, c := range m {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Role < out[j].Role })
	return out
}

// SeedKey identifies one agent call of a batch.
type SeedKey struct {
	RunSeed   uint64
	Purpose   string // "train" or "val"
	Step      int64
	Problem   int64 // train-stream cursor or validation index
	Rollout   int
	Agent     string
	Iteration int
}

// Seed derives the request seed of a call. The hash is documented so that
// other tools can reproduce it: it is keyed.SeedKey (h = 0x6d61726c6f77
// ("marlow"), then h = splitmix64(h ^ w) per word, with splitmix64 the
// SplitMix64 output function keyed.SplitMix64) of the words
//
//	[RunSeed, fnv(Purpose), Step, Problem, Rollout, fnv(Agent), Iteration]
//
// with fnv(s) the 64-bit FNV-1a hash of a string's bytes (keyed.FNV1a64)
// and integers taken as their two's-complement uint64.
func (k SeedKey) Seed() uint64 {
	return keyed.SeedKey(k.RunSeed, keyed.FNV1a64(k.Purpose), uint64(k.Step), uint64(k.Problem),
		uint64(int64(k.Rollout)), keyed.FNV1a64(k.Agent), uint64(int64(k.Iteration)))
}
