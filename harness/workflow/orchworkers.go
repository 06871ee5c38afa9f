package workflow

import (
	"context"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/study"
)

func init() {
	register(Definition{
		Name: study.OrchWorkers,
		New: func(Config) Flow {
			return &OrchWorkersFlow{Orchestrator: Reading{Turn: -1, Role: study.Orchestrator}, Synthesizer: Reading{Turn: -1, Role: study.Synthesizer}}
		},
	})
}

// OrchWorkersFlow is an episode of orch-workers: the orchestrator proposes
// at most Config.MaxSubtasks strategies; one worker (worker0, worker1, ...)
// solves the problem with each distinct strategy, or one worker with a free
// choice when none parsed (FallbackFreeWorker); the synthesizer reads the
// workers' solutions and gives the final answer. More than MaxSubtasks
// strategies end the episode after the orchestrator with no answer (reward
// 0), Episode.Ended saying why.
type OrchWorkersFlow struct {
	Orchestrator Reading // how the orchestrator turn was read (Turn -1 until it ran)
	// Strategies are the distinct strategies the workers got, in order;
	// empty when none parsed.
	Strategies []string
	Proposed   int   // strategy lines proposed, duplicates and empty ones included
	Over       bool  // more than MaxSubtasks strategies were proposed
	Workers    []int // indices of the worker turns
	// Synthesizer is how the synthesizer turn was read: Parsed when it
	// gave an answer (Turn -1 until it ran).
	Synthesizer Reading
}

// Next implements Flow.
func (f *OrchWorkersFlow) Next(env *Env, ep *Episode) []Call {
	switch {
	case f.Orchestrator.Turn < 0:
		return []Call{{Agent: study.Orchestrator, Role: study.Orchestrator, Messages: OrchestratorPrompt(ep.Problem, env.Config.MaxSubtasks)}}
	case f.Workers == nil:
		strategies := f.Strategies
		if len(strategies) == 0 {
			strategies = []string{""}
		}
		cs := make([]Call, len(strategies))
		for i, s := range strategies {
			cs[i] = Call{Agent: study.Worker + strconv.Itoa(i), Role: study.Worker, Messages: WorkerPrompt(env.Instructions, ep.Problem, s)}
		}
		return cs
	case f.Synthesizer.Turn < 0:
		return []Call{{Agent: study.Synthesizer, Role: study.Synthesizer, Messages: SynthesizerPrompt(env.Instructions, ep.Problem, texts(ep, f.Workers))}}
	}
	finish(ep, f.Synthesizer.Turn)
	return nil
}

// Absorb implements Flow.
func (f *OrchWorkersFlow) Absorb(ctx context.Context, env *Env, ep *Episode, first int) {
	switch {
	case f.Orchestrator.Turn < 0:
		f.absorbOrchestrator(ep, first, env.Config.MaxSubtasks)
	case f.Workers == nil:
		f.Workers = turnRange(first, len(ep.Turns)-first)
		for _, k := range f.Workers {
			gradeAnswer(ctx, env, ep, &ep.Turns[k])
		}
	default:
		t := &ep.Turns[first]
		gradeAnswer(ctx, env, ep, t)
		f.Synthesizer = Reading{Turn: first, Role: study.Synthesizer, Parsed: t.Compliant}
	}
}

func (f *OrchWorkersFlow) absorbOrchestrator(ep *Episode, first, maxSubtasks int) {
	t := &ep.Turns[first]
	s, ok, reason := ParseStrategies(t.Completion.Text, maxSubtasks)
	t.Compliant, t.Reason = ok, reason
	t.Parsed = strings.Join(s.List, "\n")
	f.Strategies, f.Proposed, f.Over = s.List, s.Proposed, s.Over
	f.Orchestrator = Reading{Turn: first, Role: study.Orchestrator, Parsed: ok}
	switch {
	case s.Over:
		ep.Ended = reason
		ep.Final = ""
		ep.FinalVerdict = datasets.Verdict{Reason: "orchestrator: " + reason}
	case ok:
	case len(s.List) == 0:
		f.Orchestrator.Fallback = FallbackFreeWorker
	case s.Loose:
		f.Orchestrator.Fallback = FallbackListItems
	default:
		f.Orchestrator.Fallback = FallbackDropped
	}
}

// Readings implements Flow: the orchestrator and synthesizer turns.
func (f *OrchWorkersFlow) Readings() []Reading {
	var out []Reading
	for _, r := range []Reading{f.Orchestrator, f.Synthesizer} {
		if r.Turn >= 0 {
			out = append(out, r)
		}
	}
	return out
}
