package workflow

import (
	"context"
	"fmt"
	"sort"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/study"
)

// Config is a workflow's shape and sampling settings.
type Config struct {
	Name string // a workflow of the registry (study.Workflows)
	// Settings are the workflow settings (n_votes, max_iterations,
	// max_subtasks); each workflow reads those its registry entry names.
	study.Settings
	Temperature float64
	// MaxNewTokens caps each role's completion; roles absent from the map
	// use DefaultMaxNewTokens.
	MaxNewTokens        map[string]int
	DefaultMaxNewTokens int
}

// Validate reports the first setting that cannot run.
func (c Config) Validate() error {
	d, err := Lookup(c.Name)
	if err != nil {
		return err
	}
	if c.Temperature <= 0 {
		return fmt.Errorf("workflow %s: temperature %v must be > 0", c.Name, c.Temperature)
	}
	if d.Check != nil {
		if err := d.Check(c); err != nil {
			return err
		}
	}
	for _, r := range d.Roles {
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

// running is one job's episode while Run drives it.
type running struct {
	ep   *Episode
	done bool
}

// Run runs one episode per job and returns them in job order. Each
// episode's Flow (the workflow's file says its agents and stages) asks for
// the calls of its next stage; all calls of one stage, across every job, go
// to the engine in one Generate call, in job order and in each episode in
// the order its Flow gave them; eval-opt's rounds are stages, and finished
// episodes drop out.
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
	def, err := Lookup(r.Config.Name)
	if err != nil {
		return nil, err
	}
	env := &Env{Task: r.Task, Instructions: r.Task.Instructions(), Config: r.Config}
	eps := make([]*running, len(jobs))
	for i, j := range jobs {
		eps[i] = &running{ep: &Episode{Workflow: r.Config.Name, Problem: j.Problem, ProblemIndex: j.Index, Rollout: j.Rollout,
			Flow: def.New(r.Config)}}
	}
	for stage := 0; ; stage++ {
		type pending struct {
			e *running
			c Call
		}
		var ps []pending
		for _, e := range eps {
			if e.done {
				continue
			}
			var cs []Call
			if e.ep.Ended == "" {
				cs = e.ep.Flow.Next(env, e.ep)
			}
			if len(cs) == 0 {
				e.done = true
				continue
			}
			for _, c := range cs {
				ps = append(ps, pending{e, c})
			}
		}
		if len(ps) == 0 {
			break
		}
		reqs := make([]engine.Request, len(ps))
		for i, p := range ps {
			reqs[i] = engine.Request{
				Adapter:      r.adapter(p.c.Role),
				Messages:     p.c.Messages,
				MaxNewTokens: r.Config.maxNew(p.c.Role),
				Temperature:  r.Config.Temperature,
				Seed: SeedKey{RunSeed: b.RunSeed, Purpose: b.Purpose, Step: b.Step, Problem: p.e.ep.ProblemIndex,
					Rollout: p.e.ep.Rollout, Agent: p.c.Agent, Iteration: p.c.Iteration}.Seed(),
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
		// stage, so Absorb sees all of the stage's turns.
		var order []*running
		firsts := map[*running]int{}
		for i, p := range ps {
			if _, seen := firsts[p.e]; !seen {
				firsts[p.e] = len(p.e.ep.Turns)
				order = append(order, p.e)
			}
			p.e.ep.Turns = append(p.e.ep.Turns, Turn{
				Agent: p.c.Agent, Role: p.c.Role, Iteration: p.c.Iteration, Adapter: reqs[i].Adapter,
				Seed: reqs[i].Seed, Prompt: p.c.Messages, Completion: comps[i],
			})
		}
		for _, e := range order {
			e.ep.Flow.Absorb(ctx, env, e.ep, firsts[e])
		}
	}
	out := make([]*Episode, len(eps))
	for i, e := range eps {
		out[i] = e.ep
	}
	return out, nil
}

func (r *Runner) adapter(role string) string {
	if r.Route == nil {
		return ""
	}
	return r.Route(role)
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
