package workflow

import (
	"context"

	"github.com/marlowlab/marlow/harness/study"
)

func init() {
	register(Definition{
		Name: study.Single,
		New:  func(Config) Flow { return &SingleFlow{Generator: -1} },
	})
}

// SingleFlow is an episode of the single workflow: one generator (agent
// "generator") answers, and its answer is the episode's.
type SingleFlow struct {
	Generator int // index of the generator turn; -1 before it ran
}

// Next implements Flow.
func (f *SingleFlow) Next(env *Env, ep *Episode) []Call {
	if f.Generator < 0 {
		return []Call{{Agent: study.Generator, Role: study.Generator, Messages: GeneratorPrompt(env.Instructions, ep.Problem)}}
	}
	finish(ep, f.Generator)
	return nil
}

// Absorb implements Flow.
func (f *SingleFlow) Absorb(ctx context.Context, env *Env, ep *Episode, first int) {
	f.Generator = first
	gradeAnswer(ctx, env, ep, &ep.Turns[first])
}

// Readings implements Flow: the single workflow has no supervisory turn.
func (f *SingleFlow) Readings() []Reading { return nil }
