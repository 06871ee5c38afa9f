package workflow

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/study"
)

// Interp is an episode of any declared workflow (study.Workflow): the one
// interpreter of declarations. It runs the declaration's stages in order,
// each stage's agents in one call batch, repeats the loop's stages until
// its judge says Correct or its rounds are spent, and makes the final
// stage's answer the episode's. What a stage asks and how its outputs are
// read is its role kind's (the kind* functions below); the typed record
// of what each stage run decided is Runs.
type Interp struct {
	W    study.Workflow
	Runs []StageRun // the stage runs so far, in calling order
	// next is the index of the stage to run next (len(W.Stages) when the
	// episode is over); round is the loop's round.
	next, round int
	readings    []Reading
}

// StageRun is what one run of a stage did: its turns and, by its kind,
// the typed decision its outputs gave.
type StageRun struct {
	Stage string
	Kind  study.Kind
	Round int   // the loop's round (0 outside a loop)
	Turns []int // indices of its turns in Episode.Turns, in agent order

	// Reading is how a supervisory stage's one turn was read (its Turn is
	// -1 for an answerer).
	Reading Reading
	// Verdict is a judge's judgement as the workflow used it: Incorrect
	// with no feedback when it did not parse.
	Verdict Verdict
	// Judged is the turn a judge judged.
	Judged int
	// Selected is the candidate a selector took, 1-based, fallbacks
	// included; Candidates are the turns it chose among, in the order its
	// prompt numbers them.
	Selected   int
	Candidates []int
	// Strategies are a planner's distinct strategies, in order (empty when
	// none parsed); Proposed counts its strategy lines, duplicates and
	// empty ones included; Over: it proposed more than its most, which
	// ended the episode.
	Strategies []string
	Proposed   int
	Over       bool
}

// Accepted reports whether a judge's verdict parsed as Correct, which
// ends its loop.
func (r StageRun) Accepted() bool {
	return r.Kind == study.Judge && r.Reading.Parsed && r.Verdict.Correct
}

// NewInterp starts the state of one episode of the declared workflow w.
func NewInterp(w study.Workflow) *Interp { return &Interp{W: w} }

// Latest returns the latest run of the named stage, ok false before it
// ran.
func (f *Interp) Latest(stage string) (StageRun, bool) {
	for i := len(f.Runs) - 1; i >= 0; i-- {
		if f.Runs[i].Stage == stage {
			return f.Runs[i], true
		}
	}
	return StageRun{}, false
}

// previous returns the run of the named stage in the round before this
// one, ok false in round 0.
func (f *Interp) previous(stage string) (StageRun, bool) {
	for i := len(f.Runs) - 1; i >= 0; i-- {
		if r := f.Runs[i]; r.Stage == stage && r.Round == f.round-1 {
			return r, true
		}
	}
	return StageRun{}, false
}

// agent names a stage's i-th agent: role<i> for a stage of several agents
// (whatever their count in this episode), role<round> for a one-agent
// stage in a loop, the role itself otherwise.
func (f *Interp) agent(s study.Stage, i int) string {
	switch {
	case s.Agents.Set() || s.PerStrategy != "":
		return s.Role + strconv.Itoa(i)
	case f.W.InLoop(f.next):
		return s.Role + strconv.Itoa(f.round)
	}
	return s.Role
}

// Next implements Flow.
func (f *Interp) Next(env *Env, ep *Episode) []Call {
	if f.next >= len(f.W.Stages) {
		f.finish(ep)
		return nil
	}
	s := f.W.Stages[f.next]
	iter := 0
	if f.W.InLoop(f.next) {
		iter = f.round
	}
	msgs := f.prompts(env, ep, s)
	cs := make([]Call, len(msgs))
	for i, m := range msgs {
		cs[i] = Call{Agent: f.agent(s, i), Role: s.Role, Iteration: iter, Messages: m}
	}
	return cs
}

// prompts returns the messages of each of the stage's agents, by its
// kind and what it sees.
func (f *Interp) prompts(env *Env, ep *Episode, s study.Stage) [][]engine.Message {
	read, _ := f.Latest(s.Reads)
	switch s.Kind {
	case study.Judge:
		return [][]engine.Message{judgePrompt(s.Role, ep.Problem, ep.Turns[read.Turns[0]].Completion.Text)}
	case study.Selector:
		return [][]engine.Message{selectorPrompt(s.Role, ep.Problem, texts(ep, read.Turns))}
	case study.Planner:
		return [][]engine.Message{plannerPrompt(s.Role, ep.Problem, s.Most.Of(env.Config.Settings))}
	case study.SynthesizerKind:
		return [][]engine.Message{synthesizerPrompt(s.Role, env.Instructions, ep.Problem, texts(ep, read.Turns))}
	}
	if s.PerStrategy != "" {
		plan, _ := f.Latest(s.PerStrategy)
		strategies := plan.Strategies
		if len(strategies) == 0 {
			strategies = []string{""}
		}
		out := make([][]engine.Message, len(strategies))
		for i, st := range strategies {
			out[i] = strategyPrompt(s.Role, env.Instructions, ep.Problem, st)
		}
		return out
	}
	n := s.Agents.Of(env.Config.Settings)
	out := make([][]engine.Message, n)
	prev, again := f.previous(s.Name)
	for i := range out {
		switch {
		case again && s.Revises:
			judge, _ := f.previous(f.W.Loop.Until)
			out[i] = revisionPrompt(s.Role, env.Instructions, ep.Problem, ep.Turns[prev.Turns[i]].Completion.Text, judge.Verdict.Feedback)
		case again && s.Others:
			var others []string
			for j, k := range prev.Turns {
				if j != i {
					others = append(others, ep.Turns[k].Completion.Text)
				}
			}
			out[i] = debatePrompt(s.Role, env.Instructions, ep.Problem, ep.Turns[prev.Turns[i]].Completion.Text, others)
		default:
			out[i] = answerPrompt(s.Role, env.Instructions, ep.Problem)
		}
	}
	return out
}

// Absorb implements Flow: it reads the stage's turns by its kind, then
// moves to the next stage (back to the loop's first after its last, until
// its judge accepts or its rounds are spent).
func (f *Interp) Absorb(ctx context.Context, env *Env, ep *Episode, first int) {
	s := f.W.Stages[f.next]
	run := StageRun{Stage: s.Name, Kind: s.Kind, Turns: turnRange(first, len(ep.Turns)-first), Reading: Reading{Turn: -1, Role: s.Role}, Judged: -1}
	if f.W.InLoop(f.next) {
		run.Round = f.round
	}
	switch s.Kind {
	case study.Answerer:
		for _, k := range run.Turns {
			gradeAnswer(ctx, env, ep, &ep.Turns[k])
		}
	case study.Judge:
		read, _ := f.Latest(s.Reads)
		f.absorbJudge(ep, &run, read.Turns[0])
	case study.Selector:
		read, _ := f.Latest(s.Reads)
		f.absorbSelector(ep, &run, read.Turns)
	case study.Planner:
		f.absorbPlanner(ep, &run, s.Most.Of(env.Config.Settings))
	case study.SynthesizerKind:
		t := &ep.Turns[first]
		gradeAnswer(ctx, env, ep, t)
		run.Reading.Turn, run.Reading.Parsed = first, t.Compliant
	}
	if run.Reading.Turn >= 0 {
		f.readings = append(f.readings, run.Reading)
	}
	f.Runs = append(f.Runs, run)
	f.next++
	if l := f.W.Loop; l != nil && f.W.Stages[f.next-1].Name == l.Last {
		accepted := false
		if l.Until != "" {
			u, _ := f.Latest(l.Until)
			accepted = u.Round == f.round && u.Accepted()
		}
		if !accepted && f.round+1 < l.Max.Of(env.Config.Settings) {
			f.round++
			_, f.next, _ = f.W.Stage(l.First)
		}
	}
}

// absorbJudge reads a judge's verdict on the judged turn; one that does
// not parse counts as Incorrect (FallbackIncorrect). The judge's turn is
// graded right when its parsed verdict matches the judged answer's grade.
func (f *Interp) absorbJudge(ep *Episode, run *StageRun, judged int) {
	first := run.Turns[0]
	t := &ep.Turns[first]
	pv, ok, reason := ParseVerdict(t.Completion.Text)
	run.Verdict, run.Judged = pv, judged
	run.Reading.Turn, run.Reading.Parsed = first, ok
	if !ok {
		run.Reading.Fallback = FallbackIncorrect
	}
	t.Compliant, t.Reason = ok, reason
	truth := ep.Turns[judged].Verdict
	t.Parsed = verdictWord(pv, ok)
	t.Graded = true
	t.Verdict = datasets.Verdict{Correct: ok && pv.Correct == truth.Correct, Answer: t.Parsed, Reason: "ok"}
	if !t.Verdict.Correct {
		t.Verdict.Reason = fmt.Sprintf("verdict %q for a solution that is correct=%v", t.Parsed, truth.Correct)
	}
}

// absorbSelector reads a selector's pick among the candidate turns
// (readSelection's fallbacks); its turn is graded as the pick.
func (f *Interp) absorbSelector(ep *Episode, run *StageRun, candidates []int) {
	first := run.Turns[0]
	t := &ep.Turns[first]
	k, fb, reason := readSelection(t.Completion.Text, len(candidates))
	run.Selected, run.Candidates = k, candidates
	run.Reading.Turn, run.Reading.Parsed, run.Reading.Fallback = first, fb == NoFallback, fb
	t.Compliant, t.Reason, t.Parsed = fb == NoFallback, reason, strconv.Itoa(k)
	t.Graded = true
	t.Verdict = ep.Turns[candidates[k-1]].Verdict
}

// absorbPlanner reads a planner's strategies: list items and dropped
// duplicates are fallbacks, none parsed leaves one agent a free choice,
// and more than most end the episode with no answer.
func (f *Interp) absorbPlanner(ep *Episode, run *StageRun, most int) {
	first := run.Turns[0]
	t := &ep.Turns[first]
	s, ok, reason := ParseStrategies(t.Completion.Text, most)
	t.Compliant, t.Reason = ok, reason
	t.Parsed = strings.Join(s.List, "\n")
	run.Strategies, run.Proposed, run.Over = s.List, s.Proposed, s.Over
	run.Reading.Turn, run.Reading.Parsed = first, ok
	switch {
	case s.Over:
		ep.Ended = reason
		ep.Final = ""
		ep.FinalVerdict = datasets.Verdict{Reason: t.Role + ": " + reason}
	case ok:
	case len(s.List) == 0:
		run.Reading.Fallback = FallbackFreeWorker
	case s.Loose:
		run.Reading.Fallback = FallbackListItems
	default:
		run.Reading.Fallback = FallbackDropped
	}
}

// finish makes the final stage's answer the episode's: a selector's pick,
// else the stage's (latest) turn.
func (f *Interp) finish(ep *Episode) {
	s, _, _ := f.W.Stage(f.W.Final)
	run, _ := f.Latest(s.Name)
	if s.Kind == study.Selector {
		read, _ := f.Latest(s.Reads)
		finish(ep, read.Turns[run.Selected-1])
		return
	}
	finish(ep, run.Turns[0])
}

// Readings implements Flow: the supervisory turns, in turn order.
func (f *Interp) Readings() []Reading { return f.readings }

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
