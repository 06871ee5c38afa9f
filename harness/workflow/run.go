package workflow

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/study"
)

// Config is a workflow's shape and sampling settings.
type Config struct {
	Name          string // study.Single, study.EvalOpt, study.Voting or study.OrchWorkers
	NVotes        int    // voting: generators per episode
	MaxIterations int    // eval-opt: generator turns at most
	MaxSubtasks   int    // orch-workers: strategies (and workers) at most
	Temperature   float64
	// MaxNewTokens caps each role's completion; roles absent from the map
	// use DefaultMaxNewTokens.
	MaxNewTokens        map[string]int
	DefaultMaxNewTokens int
}

// Validate reports the first setting that cannot run.
func (c Config) Validate() error {
	roles, err := Roles(c.Name)
	if err != nil {
		return err
	}
	if c.Temperature <= 0 {
		return fmt.Errorf("workflow %s: temperature %v must be > 0", c.Name, c.Temperature)
	}
	switch c.Name {
	case study.Voting:
		if c.NVotes < 1 {
			return fmt.Errorf("workflow %s: n_votes %d must be >= 1", c.Name, c.NVotes)
		}
	case study.EvalOpt:
		if c.MaxIterations < 1 {
			return fmt.Errorf("workflow %s: max_iterations %d must be >= 1", c.Name, c.MaxIterations)
		}
	case study.OrchWorkers:
		if c.MaxSubtasks < 1 {
			return fmt.Errorf("workflow %s: max_subtasks %d must be >= 1", c.Name, c.MaxSubtasks)
		}
	}
	for _, r := range roles {
		if c.maxNew(r) <= 0 {
			return fmt.Errorf("workflow %s: max new tokens for role %s must be > 0", c.Name, r)
		}
	}
	return nil
}

func (c Config) maxNew(role string) int {
	if n, ok := c.MaxNewTokens[role]; ok {
		return n
	}
	return c.DefaultMaxNewTokens
}

// Job is one (problem, rollout) episode to run.
type Job struct {
	Problem datasets.Problem
	Index   int64 // train-stream cursor or validation index
	Rollout int
}

// Batch identifies a batch of episodes for seed derivation.
type Batch struct {
	RunSeed uint64
	Purpose string // "train" or "val"
	Step    int64
}

// Runner runs episodes of one workflow.
type Runner struct {
	Engine engine.Engine
	Task   datasets.Task
	Config Config
	// Route maps a role to the adapter its agents sample with; nil samples
	// every role from the base policy.
	Route func(role string) string
}

// call is one agent call an episode asks for.
type call struct {
	agent string
	role  string
	iter  int
	msgs  []engine.Message
	// judged is the index of the turn an evaluator judges; candidates the
	// indices of the turns an aggregator or synthesizer reads.
	judged     int
	candidates []int
}

type state struct {
	ep       *Episode
	stage    int
	done     bool
	feedback string // eval-opt: last evaluator feedback
}

// Run runs one episode per job and returns them in job order. All agent
// calls of one stage, across every job, go to the engine in one Generate
// call; eval-opt's rounds are stages, and finished episodes drop out.
//
// Agent names and stages per workflow:
//   - single: generator. Final: its answer.
//   - eval-opt: generator0, evaluator0, generator1, evaluator1, ... Every
//     generator turn is judged, the last one included (that verdict is
//     logged and trained on but cannot trigger a revision); the episode
//     stops on a parsed Correct or after MaxIterations generator turns, and
//     an unparsable verdict counts as Incorrect. Final: the last generator
//     answer.
//   - voting: generator0..NVotes-1 (one stage), then aggregator. Final: the
//     selected candidate (ParseSelection's fallbacks included).
//   - orch-workers: orchestrator, then worker0..k-1 (one per distinct
//     strategy; one worker with a free choice when none parsed), then
//     synthesizer. Final: the synthesizer's answer. More than MaxSubtasks
//     strategies end the episode after the orchestrator with no answer
//     (reward 0), Ended saying why.
//
// Each request's seed is SeedKey{b.RunSeed, b.Purpose, b.Step, job.Index,
// job.Rollout, agent, round}.Seed().
func (r *Runner) Run(ctx context.Context, b Batch, jobs []Job) ([]*Episode, error) {
	if err := r.Config.Validate(); err != nil {
		return nil, err
	}
	if r.Engine == nil || r.Task == nil {
		return nil, fmt.Errorf("workflow %s: runner needs an engine and a task", r.Config.Name)
	}
	states := make([]*state, len(jobs))
	for i, j := range jobs {
		states[i] = &state{ep: &Episode{Workflow: r.Config.Name, Problem: j.Problem, ProblemIndex: j.Index, Rollout: j.Rollout}}
	}
	instr := r.Task.Instructions()
	for stage := 0; ; stage++ {
		type pending struct {
			st *state
			c  call
		}
		var ps []pending
		for _, st := range states {
			if st.done {
				continue
			}
			cs := r.next(st, instr)
			if len(cs) == 0 {
				st.done = true
				continue
			}
			for _, c := range cs {
				ps = append(ps, pending{st, c})
			}
		}
		if len(ps) == 0 {
			break
		}
		reqs := make([]engine.Request, len(ps))
		for i, p := range ps {
			reqs[i] = engine.Request{
				Adapter:      r.adapter(p.c.role),
				Messages:     p.c.msgs,
				MaxNewTokens: r.Config.maxNew(p.c.role),
				Temperature:  r.Config.Temperature,
				Seed: SeedKey{RunSeed: b.RunSeed, Purpose: b.Purpose, Step: b.Step, Problem: p.st.ep.ProblemIndex,
					Rollout: p.st.ep.Rollout, Agent: p.c.agent, Iteration: p.c.iter}.Seed(),
			}
		}
		comps, err := r.Engine.Generate(ctx, reqs)
		if err != nil {
			return nil, fmt.Errorf("workflow %s: stage %d: generate %d requests: %w", r.Config.Name, stage, len(reqs), err)
		}
		if len(comps) != len(reqs) {
			return nil, fmt.Errorf("workflow %s: stage %d: engine returned %d completions for %d requests", r.Config.Name, stage, len(comps), len(reqs))
		}
		// Append every call's turn first, then let each episode absorb its
		// stage, so absorb sees all of the stage's turns.
		var order []*state
		seen := map[*state]bool{}
		for i, p := range ps {
			p.st.ep.Turns = append(p.st.ep.Turns, Turn{
				Agent: p.c.agent, Role: p.c.role, Iteration: p.c.iter, Adapter: reqs[i].Adapter,
				Seed: reqs[i].Seed, Prompt: p.c.msgs, Completion: comps[i],
			})
			if !seen[p.st] {
				seen[p.st] = true
				order = append(order, p.st)
			}
		}
		idx := 0
		for _, st := range order {
			var stageCalls []call
			for idx < len(ps) && ps[idx].st == st {
				stageCalls = append(stageCalls, ps[idx].c)
				idx++
			}
			first := len(st.ep.Turns) - len(stageCalls)
			r.absorb(ctx, st, stageCalls, first)
			st.stage++
		}
	}
	out := make([]*Episode, len(states))
	for i, st := range states {
		out[i] = st.ep
	}
	return out, nil
}

func (r *Runner) adapter(role string) string {
	if r.Route == nil {
		return ""
	}
	return r.Route(role)
}

// next returns the calls of an episode's next stage, or nil when it is done
// (after setting its final answer).
func (r *Runner) next(st *state, instr string) []call {
	ep := st.ep
	p := ep.Problem
	cfg := r.Config
	if ep.Ended != "" {
		return nil
	}
	switch cfg.Name {
	case study.Single:
		if st.stage == 0 {
			return []call{{agent: study.Generator, role: study.Generator, msgs: GeneratorPrompt(instr, p)}}
		}
		r.finish(ep, len(ep.Turns)-1)
	case study.EvalOpt:
		round := st.stage / 2
		if st.stage%2 == 0 {
			if round > 0 {
				last := ep.Turns[len(ep.Turns)-1] // the evaluator of the previous round
				if last.Role == study.Evaluator && last.Parsed == "Correct" {
					r.finish(ep, len(ep.Turns)-2)
					return nil
				}
				if round >= cfg.MaxIterations {
					r.finish(ep, len(ep.Turns)-2)
					return nil
				}
				prev := ep.Turns[len(ep.Turns)-2]
				return []call{{agent: study.Generator + strconv.Itoa(round), role: study.Generator, iter: round,
					msgs: RevisionPrompt(instr, p, prev.Completion.Text, st.feedback)}}
			}
			return []call{{agent: study.Generator + "0", role: study.Generator, msgs: GeneratorPrompt(instr, p)}}
		}
		g := len(ep.Turns) - 1
		return []call{{agent: study.Evaluator + strconv.Itoa(round), role: study.Evaluator, iter: round,
			msgs: EvaluatorPrompt(p, ep.Turns[g].Completion.Text), judged: g}}
	case study.Voting:
		switch st.stage {
		case 0:
			cs := make([]call, cfg.NVotes)
			for i := range cs {
				cs[i] = call{agent: study.Generator + strconv.Itoa(i), role: study.Generator, msgs: GeneratorPrompt(instr, p)}
			}
			return cs
		case 1:
			idx, texts := candidates(ep, study.Generator)
			return []call{{agent: study.Aggregator, role: study.Aggregator, msgs: AggregatorPrompt(p, texts), candidates: idx}}
		default:
			agg := ep.Turns[len(ep.Turns)-1]
			k, _ := strconv.Atoi(agg.Parsed)
			idx, _ := candidates(ep, study.Generator)
			r.finish(ep, idx[k-1])
		}
	case study.OrchWorkers:
		switch st.stage {
		case 0:
			return []call{{agent: study.Orchestrator, role: study.Orchestrator, msgs: OrchestratorPrompt(p, cfg.MaxSubtasks)}}
		case 1:
			strategies := []string{""}
			if s := ep.Turns[0].Parsed; s != "" {
				strategies = strings.Split(s, "\n")
			}
			cs := make([]call, len(strategies))
			for i, s := range strategies {
				cs[i] = call{agent: study.Worker + strconv.Itoa(i), role: study.Worker, msgs: WorkerPrompt(instr, p, s)}
			}
			return cs
		case 2:
			idx, texts := candidates(ep, study.Worker)
			return []call{{agent: study.Synthesizer, role: study.Synthesizer, msgs: SynthesizerPrompt(instr, p, texts), candidates: idx}}
		default:
			r.finish(ep, len(ep.Turns)-1)
		}
	}
	return nil
}

// candidates returns the indices and texts of an episode's turns of a role.
func candidates(ep *Episode, role string) ([]int, []string) {
	var idx []int
	var texts []string
	for i, t := range ep.Turns {
		if t.Role == role {
			idx = append(idx, i)
			texts = append(texts, t.Completion.Text)
		}
	}
	return idx, texts
}

// finish makes turn i's answer the episode's final answer.
func (r *Runner) finish(ep *Episode, i int) {
	t := ep.Turns[i]
	ep.Final = t.Completion.Text
	ep.FinalVerdict = t.Verdict
}

// absorb parses and grades the turns of one stage of an episode; the stage's
// turns start at index first.
func (r *Runner) absorb(ctx context.Context, st *state, calls []call, first int) {
	ep := st.ep
	for k, c := range calls {
		t := &ep.Turns[first+k]
		text := t.Completion.Text
		switch c.role {
		case study.Generator, study.Worker, study.Synthesizer:
			v := r.Task.Verify(ctx, ep.Problem, text)
			t.Graded, t.Verdict, t.Parsed = true, v, v.Answer
			t.Compliant = v.Answer != ""
			t.Reason = "ok"
			if !t.Compliant {
				t.Reason = "no answer found: " + v.Reason
			}
		case study.Evaluator:
			pv, ok, reason := ParseVerdict(text)
			t.Compliant, t.Reason = ok, reason
			judged := ep.Turns[c.judged].Verdict
			if ok {
				t.Parsed = "Incorrect"
				if pv.Correct {
					t.Parsed = "Correct"
				}
			}
			t.Graded = true
			t.Verdict = datasets.Verdict{Correct: ok && pv.Correct == judged.Correct, Answer: t.Parsed, Reason: "ok"}
			if !t.Verdict.Correct {
				t.Verdict.Reason = fmt.Sprintf("verdict %q for a solution that is correct=%v", t.Parsed, judged.Correct)
			}
			st.feedback = pv.Feedback
		case study.Aggregator:
			k, ok, reason := ParseSelection(text, len(c.candidates))
			t.Compliant, t.Reason, t.Parsed = ok, reason, strconv.Itoa(k)
			t.Graded = true
			t.Verdict = ep.Turns[c.candidates[k-1]].Verdict
		case study.Orchestrator:
			s, ok, reason := ParseStrategies(text, r.Config.MaxSubtasks)
			t.Compliant, t.Reason = ok, reason
			t.Parsed = strings.Join(s.List, "\n")
			if s.Over {
				ep.Ended = reason
				ep.Final = ""
				ep.FinalVerdict = datasets.Verdict{Reason: "orchestrator: " + reason}
			}
		}
	}
}

// RolesOf returns the distinct roles of episodes' turns, sorted.
func RolesOf(eps []*Episode) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range eps {
		for _, t := range e.Turns {
			if !seen[t.Role] {
				seen[t.Role] = true
				out = append(out, t.Role)
			}
		}
	}
	sort.Strings(out)
	return out
}
