package workflow

import (
	"context"
	"strconv"

	"github.com/marlowlab/marlow/harness/study"
)

func init() {
	register(Definition{
		Name: study.Voting,
		New:  func(Config) Flow { return &VotingFlow{Aggregator: Reading{Turn: -1, Role: study.Aggregator}} },
	})
}

// VotingFlow is an episode of voting: Config.NVotes generators
// (generator0, generator1, ...) answer in one stage, then the aggregator
// reads their answers as numbered candidates and selects one, which is the
// episode's final answer. An aggregator output without a valid selection
// falls back to its first digit naming a candidate, else to candidate 1
// (ParseSelection).
type VotingFlow struct {
	Candidates []int   // indices of the generator turns, in candidate order
	Aggregator Reading // how the aggregator turn was read (Turn -1 until it ran)
	// Selected is the candidate the workflow took, 1-based (0 until the
	// aggregator ran), fallbacks included.
	Selected int
}

// Next implements Flow.
func (f *VotingFlow) Next(env *Env, ep *Episode) []Call {
	switch {
	case f.Candidates == nil:
		cs := make([]Call, env.Config.NVotes)
		for i := range cs {
			cs[i] = Call{Agent: study.Generator + strconv.Itoa(i), Role: study.Generator, Messages: GeneratorPrompt(env.Instructions, ep.Problem)}
		}
		return cs
	case f.Aggregator.Turn < 0:
		return []Call{{Agent: study.Aggregator, Role: study.Aggregator, Messages: AggregatorPrompt(ep.Problem, texts(ep, f.Candidates))}}
	}
	finish(ep, f.Candidates[f.Selected-1])
	return nil
}

// Absorb implements Flow.
func (f *VotingFlow) Absorb(ctx context.Context, env *Env, ep *Episode, first int) {
	if f.Candidates == nil {
		f.Candidates = turnRange(first, len(ep.Turns)-first)
		for _, k := range f.Candidates {
			gradeAnswer(ctx, env, ep, &ep.Turns[k])
		}
		return
	}
	t := &ep.Turns[first]
	k, fb, reason := readSelection(t.Completion.Text, len(f.Candidates))
	f.Selected = k
	f.Aggregator = Reading{Turn: first, Role: study.Aggregator, Parsed: fb == NoFallback, Fallback: fb}
	t.Compliant, t.Reason, t.Parsed = fb == NoFallback, reason, strconv.Itoa(k)
	t.Graded = true
	t.Verdict = ep.Turns[f.Candidates[k-1]].Verdict
}

// Readings implements Flow: the aggregator turn.
func (f *VotingFlow) Readings() []Reading {
	if f.Aggregator.Turn < 0 {
		return nil
	}
	return []Reading{f.Aggregator}
}
