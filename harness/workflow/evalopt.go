package workflow

import (
	"context"
	"fmt"
	"strconv"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/study"
)

func init() {
	register(Definition{
		Name: study.EvalOpt,
		New:  func(Config) Flow { return &EvalOptFlow{} },
	})
}

// EvalOptFlow is an episode of eval-opt: rounds of a generator turn
// (generator0, generator1, ...) judged by an evaluator turn (evaluator0,
// evaluator1, ...). Every generator turn is judged, the last one included
// (that verdict is logged and trained on but cannot trigger a revision). The
// episode stops on a parsed Correct or after Config.MaxIterations generator
// turns; a verdict that does not parse counts as Incorrect
// (FallbackIncorrect). A revision sees the previous solution and the
// evaluator's feedback. The final answer is the last generator's.
type EvalOptFlow struct {
	Rounds []EvalRound
}

// EvalRound is one eval-opt round.
type EvalRound struct {
	Generator int // index of the generator turn
	// Evaluator is how the evaluator turn judging it was read (its Turn is
	// -1 until it ran).
	Evaluator Reading
	// Verdict is the evaluator's judgement as the workflow used it:
	// Incorrect with no feedback when it did not parse.
	Verdict Verdict
}

// judged reports whether the round's evaluator has run.
func (r EvalRound) judged() bool { return r.Evaluator.Turn >= 0 }

// Accepted reports whether the evaluator's verdict parsed as Correct, which
// ends the episode.
func (r EvalRound) Accepted() bool { return r.judged() && r.Evaluator.Parsed && r.Verdict.Correct }

// Next implements Flow.
func (f *EvalOptFlow) Next(env *Env, ep *Episode) []Call {
	n := len(f.Rounds)
	if n == 0 {
		return []Call{{Agent: study.Generator + "0", Role: study.Generator, Messages: GeneratorPrompt(env.Instructions, ep.Problem)}}
	}
	last := f.Rounds[n-1]
	round := n - 1
	if !last.judged() {
		return []Call{{Agent: study.Evaluator + strconv.Itoa(round), Role: study.Evaluator, Iteration: round,
			Messages: EvaluatorPrompt(ep.Problem, ep.Turns[last.Generator].Completion.Text)}}
	}
	if last.Accepted() || n >= env.Config.MaxIterations {
		finish(ep, last.Generator)
		return nil
	}
	return []Call{{Agent: study.Generator + strconv.Itoa(n), Role: study.Generator, Iteration: n,
		Messages: RevisionPrompt(env.Instructions, ep.Problem, ep.Turns[last.Generator].Completion.Text, last.Verdict.Feedback)}}
}

// Absorb implements Flow.
func (f *EvalOptFlow) Absorb(ctx context.Context, env *Env, ep *Episode, first int) {
	t := &ep.Turns[first]
	if t.Role == study.Generator {
		gradeAnswer(ctx, env, ep, t)
		f.Rounds = append(f.Rounds, EvalRound{Generator: first, Evaluator: Reading{Turn: -1, Role: study.Evaluator}})
		return
	}
	r := &f.Rounds[len(f.Rounds)-1]
	pv, ok, reason := ParseVerdict(t.Completion.Text)
	r.Verdict = pv
	r.Evaluator = Reading{Turn: first, Role: study.Evaluator, Parsed: ok}
	if !ok {
		r.Evaluator.Fallback = FallbackIncorrect
	}
	t.Compliant, t.Reason = ok, reason
	judged := ep.Turns[r.Generator].Verdict
	t.Parsed = verdictWord(pv, ok)
	t.Graded = true
	t.Verdict = datasets.Verdict{Correct: ok && pv.Correct == judged.Correct, Answer: t.Parsed, Reason: "ok"}
	if !t.Verdict.Correct {
		t.Verdict.Reason = fmt.Sprintf("verdict %q for a solution that is correct=%v", t.Parsed, judged.Correct)
	}
}

// verdictWord is a verdict as logged in Turn.Parsed: "Correct",
// "Incorrect", or "" when it did not parse.
func verdictWord(v Verdict, ok bool) string {
	switch {
	case !ok:
		return ""
	case v.Correct:
		return "Correct"
	}
	return "Incorrect"
}

// Readings implements Flow: the evaluator turns.
func (f *EvalOptFlow) Readings() []Reading {
	var out []Reading
	for _, r := range f.Rounds {
		if r.judged() {
			out = append(out, r.Evaluator)
		}
	}
	return out
}
