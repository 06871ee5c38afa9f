package workflow_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/fake"
	"github.com/marlowlab/marlow/harness/study"
	wf "github.com/marlowlab/marlow/harness/workflow"
	"github.com/marlowlab/marlow/harness/workflow/workflowtest"
)

// script answers by role; each function gets the user message.
type script map[string]func(user string) string

func (s script) respond(req engine.Request, _ float64) string {
	role := workflowtest.RoleOf(req.Messages)
	f := s[role]
	if f == nil {
		return "?"
	}
	return f(req.Messages[len(req.Messages)-1].Content)
}

// sum returns the truth of the problem in a user message.
func sum(user string) int {
	var a, b int
	fmt.Sscanf(strings.SplitN(user, "\n", 2)[0], "Problem: Compute %d + %d.", &a, &b)
	return a + b
}

func right(user string) string { return fmt.Sprintf("Answer: %d", sum(user)) }
func wrong(user string) string { return fmt.Sprintf("Answer: %d", sum(user)+1) }

func cfg(name string) wf.Config {
	return wf.Config{Name: name, Settings: study.Settings{NVotes: 3, MaxIterations: 3, MaxSubtasks: 3}, Temperature: 0.7, DefaultMaxNewTokens: 64}
}

func jobs(t *testing.T, n, rollouts int) []wf.Job {
	t.Helper()
	var js []wf.Job
	task := workflowtest.Task{}
	for i := 0; i < n; i++ {
		p, err := task.Train(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < rollouts; r++ {
			js = append(js, wf.Job{Problem: p, Index: int64(i), Rollout: r})
		}
	}
	return js
}

func run(t *testing.T, c wf.Config, s script, js []wf.Job) ([]*wf.Episode, *fake.Engine) {
	t.Helper()
	eng := fake.New(s.respond)
	r := &wf.Runner{Engine: eng, Task: workflowtest.Task{}, Config: c}
	eps, err := r.Run(context.Background(), wf.Batch{RunSeed: 1, Purpose: "train", Step: 1}, js)
	if err != nil {
		t.Fatal(err)
	}
	return eps, eng
}

func agents(ep *wf.Episode) []string {
	var out []string
	for _, t := range ep.Turns {
		out = append(out, t.Agent)
	}
	return out
}

func TestTurnStructure(t *testing.T) {
	gen3 := func(user string) string {
		if strings.Contains(user, "Previous solution") {
			return right(user)
		}
		return wrong(user)
	}
	honest := func(user string) string {
		sol := user[strings.Index(user, "Solution:\n"):]
		return wf.FormatVerdict(strings.Contains(sol, right(user)), "add again")
	}
	cases := []struct {
		name      string
		cfg       wf.Config
		s         script
		agents    []string
		roles     []string
		correct   bool
		ended     bool
		batches   []int // for 2 jobs
		compliant map[string]bool
	}{
		{"single", cfg(study.Single), script{study.Generator: right},
			[]string{"generator"}, []string{"generator"}, true, false, []int{2}, map[string]bool{"generator": true}},
		{"single no answer", cfg(study.Single), script{study.Generator: func(string) string { return "dunno" }},
			[]string{"generator"}, []string{"generator"}, false, false, []int{2}, map[string]bool{"generator": false}},
		{"eval-opt revises then stops on Correct", cfg(study.EvalOpt), script{study.Generator: gen3, study.Evaluator: honest},
			[]string{"generator0", "evaluator0", "generator1", "evaluator1"}, []string{"generator", "evaluator", "generator", "evaluator"},
			true, false, []int{2, 2, 2, 2}, map[string]bool{"generator": true, "evaluator": true}},
		{"eval-opt stops at once on Correct", cfg(study.EvalOpt), script{study.Generator: right, study.Evaluator: honest},
			[]string{"generator0", "evaluator0"}, []string{"generator", "evaluator"}, true, false, []int{2, 2}, nil},
		{"eval-opt unparsable verdict revises to max_iterations", cfg(study.EvalOpt),
			script{study.Generator: right, study.Evaluator: func(string) string { return "fine by me" }},
			[]string{"generator0", "evaluator0", "generator1", "evaluator1", "generator2", "evaluator2"},
			[]string{"generator", "evaluator", "generator", "evaluator", "generator", "evaluator"},
			true, false, []int{2, 2, 2, 2, 2, 2}, map[string]bool{"generator": true, "evaluator": false}},
		{"voting selects the right candidate", cfg(study.Voting),
			script{study.Generator: wrong, study.Aggregator: func(string) string { return wf.FormatSelection(2) }},
			[]string{"generator0", "generator1", "generator2", "aggregator"}, []string{"generator", "generator", "generator", "aggregator"},
			false, false, []int{6, 2}, map[string]bool{"generator": true, "aggregator": true}},
		{"orch-workers", cfg(study.OrchWorkers), script{
			study.Orchestrator: func(string) string { return wf.FormatStrategies([]string{"add", "count"}) },
			study.Worker:       wrong, study.Synthesizer: right},
			[]string{"orchestrator", "worker0", "worker1", "synthesizer"}, []string{"orchestrator", "worker", "worker", "synthesizer"},
			true, false, []int{2, 4, 2}, map[string]bool{"orchestrator": true, "worker": true, "synthesizer": true}},
		{"orch-workers too many strategies ends the episode", cfg(study.OrchWorkers), script{
			study.Orchestrator: func(string) string { return wf.FormatStrategies([]string{"a", "b", "c", "d"}) },
			study.Worker:       right, study.Synthesizer: right},
			[]string{"orchestrator"}, []string{"orchestrator"}, false, true, []int{2}, map[string]bool{"orchestrator": false}},
		{"orch-workers without strategies runs one worker", cfg(study.OrchWorkers), script{
			study.Orchestrator: func(string) string { return "just add" },
			study.Worker:       right, study.Synthesizer: right},
			[]string{"orchestrator", "worker0", "synthesizer"}, []string{"orchestrator", "worker", "synthesizer"},
			true, false, []int{2, 2, 2}, map[string]bool{"orchestrator": false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eps, eng := run(t, c.cfg, c.s, jobs(t, 2, 1))
			if !reflect.DeepEqual(eng.Batches, c.batches) {
				t.Errorf("engine batches %v, want %v (one Generate call per stage)", eng.Batches, c.batches)
			}
			for _, ep := range eps {
				if got := agents(ep); !reflect.DeepEqual(got, c.agents) {
					t.Fatalf("agents %v, want %v", got, c.agents)
				}
				for i, tr := range ep.Turns {
					if tr.Role != c.roles[i] {
						t.Errorf("turn %d role %s, want %s", i, tr.Role, c.roles[i])
					}
					if tr.Reason == "" {
						t.Errorf("turn %d (%s) has no parse reason", i, tr.Agent)
					}
				}
				if ep.FinalVerdict.Correct != c.correct || ep.Reward() != map[bool]float64{true: 1, false: 0}[c.correct] {
					t.Errorf("final %q correct=%v reward=%v, want correct=%v", ep.Final, ep.FinalVerdict.Correct, ep.Reward(), c.correct)
				}
				if (ep.Ended != "") != c.ended {
					t.Errorf("ended %q, want ended=%v", ep.Ended, c.ended)
				}
				for _, comp := range ep.Compliance() {
					want, ok := c.compliant[comp.Role]
					if ok && (comp.Compliant == comp.Turns) != want {
						t.Errorf("role %s compliance %d/%d, want all=%v", comp.Role, comp.Compliant, comp.Turns, want)
					}
				}
			}
		})
	}
}

func TestEpisodeDetails(t *testing.T) {
	t.Run("eval-opt revision prompt carries the solution and the feedback", func(t *testing.T) {
		s := script{
			study.Generator: func(u string) string {
				if strings.Contains(u, "Previous solution") {
					return right(u)
				}
				return "sum\n" + wrong(u)
			},
			study.Evaluator: func(u string) string { return wf.FormatVerdict(strings.Contains(u, right(u)), "recount the tens") },
		}
		eps, _ := run(t, cfg(study.EvalOpt), s, jobs(t, 1, 1))
		ep := eps[0]
		rev := ep.Turns[2].Prompt[1].Content
		if !strings.Contains(rev, "Previous solution:\nsum\n"+wrong(ep.Turns[0].Prompt[1].Content)) || !strings.Contains(rev, "Feedback: recount the tens") {
			t.Errorf("revision prompt lacks previous solution or feedback:\n%s", rev)
		}
		ev := ep.Turns[1]
		if ev.Parsed != "Incorrect" || !ev.Graded || !ev.Verdict.Correct {
			t.Errorf("evaluator turn parsed %q graded=%v correct=%v; want Incorrect, graded, correct (it judged a wrong answer wrong)", ev.Parsed, ev.Graded, ev.Verdict.Correct)
		}
		if ep.Turns[0].Verdict.Correct || !ep.Turns[2].Verdict.Correct {
			t.Error("generators' own answers not regraded")
		}
	})
	t.Run("voting final answer is the selected candidate", func(t *testing.T) {
		n := 0
		s := script{
			study.Generator: func(u string) string {
				n++
				if n == 3 {
					return right(u)
				}
				return wrong(u)
			},
			study.Aggregator: func(u string) string { return "the third: 3" },
		}
		eps, _ := run(t, cfg(study.Voting), s, jobs(t, 1, 1))
		ep := eps[0]
		agg := ep.Turns[3]
		if agg.Parsed != "3" || agg.Compliant || !strings.Contains(agg.Reason, "first digit") {
			t.Errorf("aggregator parsed %q compliant=%v reason %q; want fallback 3, not compliant", agg.Parsed, agg.Compliant, agg.Reason)
		}
		if !ep.FinalVerdict.Correct || ep.Final != ep.Turns[2].Completion.Text || !agg.Verdict.Correct {
			t.Errorf("final %q correct=%v; want generator2's correct answer", ep.Final, ep.FinalVerdict.Correct)
		}
		if !strings.Contains(agg.Prompt[1].Content, "Candidate 3:\n"+ep.Turns[2].Completion.Text) {
			t.Errorf("aggregator prompt lacks candidate 3:\n%s", agg.Prompt[1].Content)
		}
	})
	t.Run("workers get one strategy each and the synthesizer sees their solutions", func(t *testing.T) {
		s := script{
			study.Orchestrator: func(string) string { return wf.FormatStrategies([]string{"tens first", "ones first"}) },
			study.Worker:       wrong,
			study.Synthesizer:  wrong,
		}
		eps, _ := run(t, cfg(study.OrchWorkers), s, jobs(t, 1, 1))
		ep := eps[0]
		if !strings.HasSuffix(ep.Turns[1].Prompt[1].Content, "Strategy: tens first") || !strings.HasSuffix(ep.Turns[2].Prompt[1].Content, "Strategy: ones first") {
			t.Errorf("worker prompts do not carry their strategies: %q / %q", ep.Turns[1].Prompt[1].Content, ep.Turns[2].Prompt[1].Content)
		}
		if !strings.Contains(ep.Turns[3].Prompt[1].Content, "Solution 2:\n"+ep.Turns[2].Completion.Text) {
			t.Errorf("synthesizer prompt lacks solution 2: %q", ep.Turns[3].Prompt[1].Content)
		}
		if ep.Turns[0].Parsed != "tens first\nones first" || ep.Turns[0].Graded {
			t.Errorf("orchestrator parsed %q graded=%v", ep.Turns[0].Parsed, ep.Turns[0].Graded)
		}
	})
}

func TestSeedsRoutingAndDeterminism(t *testing.T) {
	a := workflowtest.Agents{Bias: 0, Malformed: 0.1, TooMany: 0.2}
	mk := func() ([]*wf.Episode, *fake.Engine) {
		eng := fake.New(a.Respond)
		for _, n := range []string{"generator", "aggregator"} {
			if err := eng.NewAdapter(context.Background(), n, engine.AdapterConfig{Rank: 1, Alpha: 1}); err != nil {
				t.Fatal(err)
			}
		}
		r := &wf.Runner{Engine: eng, Task: workflowtest.Task{}, Config: cfg(study.Voting), Route: func(role string) string { return role }}
		eps, err := r.Run(context.Background(), wf.Batch{RunSeed: 9, Purpose: "val", Step: 0}, jobs(t, 3, 2))
		if err != nil {
			t.Fatal(err)
		}
		return eps, eng
	}
	e1, _ := mk()
	e2, _ := mk()
	if !reflect.DeepEqual(e1, e2) {
		t.Fatal("two identical runs differ")
	}
	seeds := map[uint64]string{}
	for _, ep := range e1 {
		for _, tr := range ep.Turns {
			if tr.Adapter != tr.Role {
				t.Errorf("turn %s sampled with adapter %q, want its role's", tr.Agent, tr.Adapter)
			}
			key := fmt.Sprintf("%d/%d/%s", ep.ProblemIndex, ep.Rollout, tr.Agent)
			if other, dup := seeds[tr.Seed]; dup {
				t.Errorf("calls %s and %s share seed %#x", key, other, tr.Seed)
			}
			seeds[tr.Seed] = key
			want := wf.SeedKey{RunSeed: 9, Purpose: "val", Step: 0, Problem: ep.ProblemIndex, Rollout: ep.Rollout, Agent: tr.Agent, Iteration: tr.Iteration}.Seed()
			if tr.Seed != want {
				t.Errorf("turn %s seed %#x, want %#x", key, tr.Seed, want)
			}
		}
	}
}

func TestRunErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  wf.Config
		want string
	}{
		{"unknown workflow", wf.Config{Name: "relay", Temperature: 1, DefaultMaxNewTokens: 8}, "unknown workflow"},
		{"zero temperature", wf.Config{Name: study.Single, DefaultMaxNewTokens: 8}, "temperature"},
		{"no votes", wf.Config{Name: study.Voting, Temperature: 1, DefaultMaxNewTokens: 8}, "n_votes"},
		{"no iterations", wf.Config{Name: study.EvalOpt, Temperature: 1, DefaultMaxNewTokens: 8}, "max_iterations"},
		{"no subtasks", wf.Config{Name: study.OrchWorkers, Temperature: 1, DefaultMaxNewTokens: 8}, "max_subtasks"},
		{"no token budget for a role", wf.Config{Name: study.Voting, Settings: study.Settings{NVotes: 2}, Temperature: 1, MaxNewTokens: map[string]int{"generator": 8}}, "role aggregator"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &wf.Runner{Engine: fake.New(script{}.respond), Task: workflowtest.Task{}, Config: c.cfg}
			_, err := r.Run(context.Background(), wf.Batch{}, jobs(t, 1, 1))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
	t.Run("engine error is wrapped with the stage", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := &wf.Runner{Engine: fake.New(script{}.respond), Task: workflowtest.Task{}, Config: cfg(study.Single)}
		_, err := r.Run(ctx, wf.Batch{}, jobs(t, 1, 1))
		if err == nil || !strings.Contains(err.Error(), "stage 0") || !strings.Contains(err.Error(), context.Canceled.Error()) {
			t.Errorf("err = %v", err)
		}
	})
}

func TestRoles(t *testing.T) {
	for _, name := range study.Workflows {
		roles, err := wf.Roles(name)
		if err != nil {
			t.Fatal(err)
		}
		// Every role a workflow runs is listed.
		eng := fake.New(workflowtest.Agents{}.Respond)
		r := &wf.Runner{Engine: eng, Task: workflowtest.Task{}, Config: cfg(name)}
		eps, err := r.Run(context.Background(), wf.Batch{RunSeed: 3}, jobs(t, 4, 2))
		if err != nil {
			t.Fatal(err)
		}
		if got := wf.RolesOf(eps); !reflect.DeepEqual(got, roles) {
			t.Errorf("%s: roles run %v, Roles() says %v", name, got, roles)
		}
	}
	var _ datasets.Task = workflowtest.Task{}
}
