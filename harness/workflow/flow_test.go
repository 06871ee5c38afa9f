package workflow_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/fake"
	"github.com/marlowlab/marlow/harness/study"
	wf "github.com/marlowlab/marlow/harness/workflow"
	"github.com/marlowlab/marlow/harness/workflow/workflowtest"
)

// reply answers one call of a driven episode; user is its user message.
type reply func(c wf.Call, user string) string

// byRole answers each call with the function of its role ("?" when none).
func byRole(fs map[string]func(user string) string) reply {
	return func(c wf.Call, user string) string {
		if f := fs[c.Role]; f != nil {
			return f(user)
		}
		return "?"
	}
}

// drive runs one episode of train problem 0 through a workflow's Flow by
// hand, with no engine: each stage's calls get the replies' completions as
// turns and are absorbed. It returns the episode and the calls of each
// stage.
func drive(t *testing.T, c wf.Config, r reply) (*wf.Episode, [][]wf.Call) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := wf.Lookup(c.Name)
	if err != nil {
		t.Fatal(err)
	}
	task := workflowtest.Task{}
	p, err := task.Train(0)
	if err != nil {
		t.Fatal(err)
	}
	env := &wf.Env{Task: task, Instructions: task.Instructions(), Config: c}
	ep := &wf.Episode{Workflow: c.Name, Problem: p, Flow: d.New(c)}
	var stages [][]wf.Call
	for len(stages) < 20 && ep.Ended == "" {
		calls := ep.Flow.Next(env, ep)
		if calls == nil {
			break
		}
		stages = append(stages, calls)
		first := len(ep.Turns)
		for _, call := range calls {
			text := r(call, call.Messages[len(call.Messages)-1].Content)
			ep.Turns = append(ep.Turns, wf.Turn{Agent: call.Agent, Role: call.Role, Iteration: call.Iteration,
				Prompt: call.Messages, Completion: engine.Completion{Text: text}})
		}
		ep.Flow.Absorb(context.Background(), env, ep, first)
	}
	if len(stages) == 20 {
		t.Fatal("episode did not end in 20 stages")
	}
	return ep, stages
}

// stageAgents lists the agent names of each stage's calls.
func stageAgents(stages [][]wf.Call) [][]string {
	out := make([][]string, len(stages))
	for i, cs := range stages {
		for _, c := range cs {
			out[i] = append(out[i], c.Agent)
		}
	}
	return out
}

// parsedOf lists the episode's Turn.Parsed values.
func parsedOf(ep *wf.Episode) []string {
	var out []string
	for _, t := range ep.Turns {
		out = append(out, t.Parsed)
	}
	return out
}

// checkEpisode checks what every workflow's table states: the agents of
// each stage, the logged Parsed strings, the readings of the supervisory
// turns, and the final answer (its turn, or -1 for none).
func checkEpisode(t *testing.T, ep *wf.Episode, stages [][]wf.Call, agents [][]string, parsed []string, readings []wf.Reading, final int) {
	t.Helper()
	if got := stageAgents(stages); !reflect.DeepEqual(got, agents) {
		t.Errorf("stages %v, want %v", got, agents)
	}
	if got := parsedOf(ep); !reflect.DeepEqual(got, parsed) {
		t.Errorf("parsed %q, want %q", got, parsed)
	}
	if got := ep.Flow.Readings(); !reflect.DeepEqual(got, readings) {
		t.Errorf("readings %+v, want %+v", got, readings)
	}
	for _, r := range readings {
		if tr := ep.Turns[r.Turn]; tr.Role != r.Role || tr.Compliant != r.Parsed {
			t.Errorf("reading %+v disagrees with turn %d (role %s, compliant %v)", r, r.Turn, tr.Role, tr.Compliant)
		}
	}
	if final < 0 {
		if ep.Final != "" || ep.FinalVerdict.Correct {
			t.Errorf("final %q (correct %v), want none", ep.Final, ep.FinalVerdict.Correct)
		}
		return
	}
	if ep.Final != ep.Turns[final].Completion.Text || ep.FinalVerdict != ep.Turns[final].Verdict {
		t.Errorf("final %q %+v, want turn %d's %q %+v", ep.Final, ep.FinalVerdict, final, ep.Turns[final].Completion.Text, ep.Turns[final].Verdict)
	}
}

// truth is the answer to train problem 0.
func truth(t *testing.T) string {
	t.Helper()
	p, err := workflowtest.Task{}.Train(0)
	if err != nil {
		t.Fatal(err)
	}
	return p.Truth
}

func TestRegistry(t *testing.T) {
	for _, name := range study.Workflows {
		d, err := wf.Lookup(name)
		if err != nil {
			t.Fatalf("study workflow %s: %v", name, err)
		}
		entry, _ := study.Lookup(name)
		want := entry.Roles()
		slices.Sort(want)
		if d.Name != name || !reflect.DeepEqual(d.Roles, want) {
			t.Errorf("%s: definition %s roles %v, want %v", name, d.Name, d.Roles, want)
		}
		if !slices.Contains(d.Roles, d.Answerer) {
			t.Errorf("%s: answerer %q is not one of its roles %v", name, d.Answerer, d.Roles)
		}
		var turnRoles []string
		for _, rt := range d.Turns(cfg(name)) {
			if !slices.Contains(turnRoles, rt.Role) {
				turnRoles = append(turnRoles, rt.Role)
			}
		}
		if !reflect.DeepEqual(turnRoles, entry.Roles()) {
			t.Errorf("%s: turns name roles %v, want %v in calling order", name, turnRoles, entry.Roles())
		}

		// Roles hands out a copy.
		roles, _ := wf.Roles(name)
		roles[0] = "x"
		if d2, _ := wf.Lookup(name); d2.Roles[0] == "x" {
			t.Errorf("%s: Roles returned the registry's own slice", name)
		}
	}
	if _, err := wf.Lookup("relay"); err == nil || !strings.Contains(err.Error(), `unknown workflow "relay"`) {
		t.Errorf("unknown workflow: err = %v", err)
	}
	if _, err := wf.MaxTurns("relay", wf.Config{}); err == nil {
		t.Error("MaxTurns of an unknown workflow: no error")
	}
}

// TestMaxTurns checks each definition's turn count against the longest
// episodes the runner produces with simulated agents.
func TestMaxTurns(t *testing.T) {
	cases := []struct {
		name string
		want int
	}{{study.Single, 1}, {study.EvalOpt, 6}, {study.Voting, 4}, {study.OrchWorkers, 4}}
	for _, c := range cases {
		// The simulated orchestrator proposes two strategies.
		wc := cfg(c.name)
		wc.MaxSubtasks = 2
		ts, err := wf.MaxTurns(c.name, wc)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, rt := range ts {
			n += rt.N
		}
		if n != c.want {
			t.Errorf("%s: %d turns at most, want %d", c.name, n, c.want)
		}
		r := &wf.Runner{Engine: fake.New(workflowtest.Agents{Bias: -2, Malformed: 0.3}.Respond), Task: workflowtest.Task{}, Config: wc}
		eps, err := r.Run(context.Background(), wf.Batch{RunSeed: 5, Purpose: "train"}, jobs(t, 16, 4))
		if err != nil {
			t.Fatal(err)
		}
		longest := 0
		for _, ep := range eps {
			longest = max(longest, len(ep.Turns))
			if len(ep.Turns) > n {
				t.Errorf("%s: an episode ran %d turns, more than MaxTurns' %d", c.name, len(ep.Turns), n)
			}
		}
		if longest != n {
			t.Errorf("%s: the longest of %d episodes ran %d turns, MaxTurns says %d", c.name, len(eps), longest, n)
		}
	}
}

// TestTurnsFromStages: the turn counts register derives from the
// registry's stages, written out for the settings of cfg (3 votes, 3
// iterations, 3 subtasks) and with every setting 0 (counted as 1).
func TestTurnsFromStages(t *testing.T) {
	g, e, a := study.Generator, study.Evaluator, study.Aggregator
	o, w, s := study.Orchestrator, study.Worker, study.Synthesizer
	for _, tc := range []struct {
		name string
		zero bool
		want []wf.RoleTurns
	}{
		{study.Single, false, []wf.RoleTurns{{Role: g, N: 1}}},
		{study.EvalOpt, false, []wf.RoleTurns{{Role: g, N: 1}, {Role: g, Revision: true, N: 2}, {Role: e, N: 3}}},
		{study.EvalOpt, true, []wf.RoleTurns{{Role: g, N: 1}, {Role: g, Revision: true, N: 0}, {Role: e, N: 1}}},
		{study.Voting, false, []wf.RoleTurns{{Role: g, N: 3}, {Role: a, N: 1}}},
		{study.Voting, true, []wf.RoleTurns{{Role: g, N: 1}, {Role: a, N: 1}}},
		{study.OrchWorkers, false, []wf.RoleTurns{{Role: o, N: 1}, {Role: w, N: 3}, {Role: s, N: 1}}},
		{study.OrchWorkers, true, []wf.RoleTurns{{Role: o, N: 1}, {Role: w, N: 1}, {Role: s, N: 1}}},
	} {
		c := cfg(tc.name)
		if tc.zero {
			c.Settings = study.Settings{}
		}
		got, err := wf.MaxTurns(tc.name, c)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s (zero settings %v): turns %v, %v; want %v", tc.name, tc.zero, got, err, tc.want)
		}
	}
	// the check refuses each setting the workflow reads below 1, by name
	for _, tc := range []struct{ name, setting string }{
		{study.EvalOpt, "max_iterations 0"}, {study.Voting, "n_votes 0"}, {study.OrchWorkers, "max_subtasks 0"},
	} {
		c := cfg(tc.name)
		c.Settings = study.Settings{NVotes: 3, MaxIterations: 3, MaxSubtasks: 3}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		c.Settings = study.Settings{}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.setting+" must be >= 1") {
			t.Errorf("%s with no settings: %v, want %q refused", tc.name, err, tc.setting)
		}
	}
}
