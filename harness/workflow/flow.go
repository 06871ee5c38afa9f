package workflow

import (
	"context"
	"fmt"
	"slices"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/study"
)

// Flow is one episode's state machine for one workflow, and the typed state
// it keeps: the runner asks it for the calls of the next stage, appends one
// turn per call, and hands the turns back to be absorbed. Each workflow has
// one implementation, the interpreter of declarations (Interp), whose
// exported state records the workflow's decisions (verdicts, the selected
// candidate, the strategies) as typed values, so that nothing is parsed
// back from Turn.Parsed, which is written for the logs only.
type Flow interface {
	// Next returns the calls of the episode's next stage, in the order
	// their requests are sent. When the episode is over it returns nil,
	// having set the episode's final answer (unless it ended early, with
	// Episode.Ended saying why).
	Next(env *Env, ep *Episode) []Call
	// Absorb parses and grades the turns answering the calls Next returned
	// last: ep.Turns[first+i] answers the i-th call.
	Absorb(ctx context.Context, env *Env, ep *Episode, first int)
	// Readings says how each supervisory turn the episode has run so far
	// (evaluator, aggregator, orchestrator, synthesizer) was read, in turn
	// order; nil for a workflow without one.
	Readings() []Reading
}

// Env is what a Flow reads besides its episode: the task, its answer-format
// instructions and the workflow's settings. One Env serves every episode of
// a batch.
type Env struct {
	Task         datasets.Task
	Instructions string // Task.Instructions()
	Config       Config
}

// Call is one agent call a Flow asks for.
type Call struct {
	Agent     string // agent name: generator, generator1, evaluator0, worker2, ...
	Role      string // role type; selects the adapter and the token budget
	Iteration int    // eval-opt round (0-based); keys the seed
	Messages  []engine.Message
}

// Fallback names what a workflow did with a supervisory turn's output in
// place of a parsed one; the registry (package study) owns the words and
// what each means.
type Fallback = study.Fallback

// The fallbacks the workflows take (study's).
const (
	NoFallback             = study.NoFallback
	FallbackIncorrect      = study.FallbackIncorrect
	FallbackFirstDigit     = study.FallbackFirstDigit
	FallbackFirstCandidate = study.FallbackFirstCandidate
	FallbackListItems      = study.FallbackListItems
	FallbackDropped        = study.FallbackDropped
	FallbackFreeWorker     = study.FallbackFreeWorker
)

// Reading is how one supervisory turn's output was read.
type Reading struct {
	Turn int    // index of the turn in Episode.Turns
	Role string // the turn's role
	// Parsed is true when the output met its role's format (the turn's
	// Compliant).
	Parsed bool
	// Fallback is what the workflow used instead of the parsed output;
	// NoFallback when it used the output as parsed, or when the role has
	// none (a synthesizer without an answer gives the episode none).
	Fallback Fallback
}

// Definition is one workflow's declaration (study.Workflow) with the
// facts the runner reads: its roles, answering role, settings check and
// turn counts, derived from the declaration, and New, which starts an
// episode of the interpreter (Interp).
type Definition struct {
	Name  string   // a workflow of the registry (study.Lookup)
	Roles []string // the role types it calls, sorted (the registry's)
	// Answerer is the role whose answer becomes the episode's final answer
	// (the declaration's Answerer).
	Answerer string
	// Check reports the first setting of its own the workflow cannot run
	// with: each setting its declaration reads must be at least 1
	// (Config.Validate checks the shared ones).
	Check func(Config) error
	// Turns lists the most agent turns of each role one episode runs,
	// in calling order (from its stages: stageTurns).
	Turns func(Config) []RoleTurns
	// New starts the state of one episode.
	New func(Config) Flow
}

// RoleTurns is a number of agent turns of one role in an episode. Revision
// marks turns that see the stage's earlier answers (eval-opt's later
// generator turns, a debate's later rounds), whose prompts are longer.
type RoleTurns struct {
	Role     string
	Revision bool
	N        int
}

// settingsCheck refuses a setting of the declaration's below 1, the first
// in the declaration's order.
func settingsCheck(w study.Workflow) func(Config) error {
	return func(c Config) error {
		for _, key := range w.Settings() {
			v, _ := c.Value(key)
			if err := atLeast1(c, key, v); err != nil {
				return err
			}
		}
		return nil
	}
}

// stageTurns counts the most turns per role of the declaration's stages,
// in calling order: a stage runs its agents (a planner fan-out as many as
// the planner's most strategies), once, or the loop's rounds for a stage
// in the loop; a stage that revises or sees the others' answers counts its
// first round apart from the later ones.
func stageTurns(w study.Workflow) func(Config) []RoleTurns {
	return func(c Config) []RoleTurns {
		var out []RoleTurns
		for i, s := range w.Stages {
			agents := s.Agents.Of(c.Settings)
			if p, _, ok := w.Stage(s.PerStrategy); ok {
				agents = p.Most.Of(c.Settings)
			}
			runs := 1
			if w.InLoop(i) {
				runs = w.Loop.Max.Of(c.Settings)
			}
			if s.Revises || s.Others {
				out = append(out, RoleTurns{Role: s.Role, N: agents}, RoleTurns{Role: s.Role, Revision: true, N: agents * (runs - 1)})
				continue
			}
			out = append(out, RoleTurns{Role: s.Role, N: agents * runs})
		}
		return out
	}
}

// Lookup returns the definition of a workflow by name: a built-in one or
// one a workflow file declared (study.Register).
func Lookup(workflow string) (Definition, error) {
	w, ok := study.Lookup(workflow)
	if !ok {
		return Definition{}, fmt.Errorf("workflow: unknown workflow %q (want one of %v, or a workflow file's)", workflow, study.Workflows)
	}
	roles := w.Roles()
	slices.Sort(roles)
	return Definition{Name: w.Name, Roles: roles, Answerer: w.Answerer(), Check: settingsCheck(w), Turns: stageTurns(w),
		New: func(Config) Flow { return NewInterp(w) }}, nil
}

// Roles returns the role types of a workflow, sorted.
func Roles(workflow string) ([]string, error) {
	d, err := Lookup(workflow)
	if err != nil {
		return nil, err
	}
	return slices.Clone(d.Roles), nil
}

// MaxTurns returns the most agent turns one episode of a workflow runs,
// per role in calling order, under the settings c (settings below 1 count
// as 1).
func MaxTurns(workflow string, c Config) ([]RoleTurns, error) {
	d, err := Lookup(workflow)
	if err != nil {
		return nil, err
	}
	return d.Turns(c), nil
}

// atLeast1 reports a workflow setting below 1.
func atLeast1(c Config, setting string, v int) error {
	if v < 1 {
		return fmt.Errorf("workflow %s: %s %d must be >= 1", c.Name, setting, v)
	}
	return nil
}

// gradeAnswer grades the turn of a role that answers the problem
// (generator, worker, synthesizer) with the task's verifier.
func gradeAnswer(ctx context.Context, env *Env, ep *Episode, t *Turn) {
	v := env.Task.Verify(ctx, ep.Problem, t.Completion.Text)
	t.Graded, t.Verdict, t.Parsed = true, v, v.Answer
	t.Compliant = v.Answer != ""
	t.Reason = "ok"
	if !t.Compliant {
		t.Reason = "no answer found: " + v.Reason
	}
}

// finish makes turn i's answer the episode's final answer.
func finish(ep *Episode, i int) {
	t := ep.Turns[i]
	ep.Final = t.Completion.Text
	ep.FinalVerdict = t.Verdict
}

// texts returns the completions of the turns at idx.
func texts(ep *Episode, idx []int) []string {
	out := make([]string, len(idx))
	for i, k := range idx {
		out[i] = ep.Turns[k].Completion.Text
	}
	return out
}

// turnRange returns the indices first..first+n-1.
func turnRange(first, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = first + i
	}
	return out
}
