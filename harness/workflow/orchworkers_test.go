package workflow_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/study"
	wf "github.com/marlowlab/marlow/harness/workflow"
	"github.com/marlowlab/marlow/harness/workflow/workflowtest"
)

func TestOrchWorkersFlow(t *testing.T) {
	ans, off := truthPlus(t, 0), truthPlus(t, 1)
	orch := func(turn int, parsed bool, fb wf.Fallback) wf.Reading {
		return wf.Reading{Turn: turn, Role: study.Orchestrator, Parsed: parsed, Fallback: fb}
	}
	synth := func(turn int, parsed bool) wf.Reading {
		return wf.Reading{Turn: turn, Role: study.Synthesizer, Parsed: parsed}
	}
	noAnswer := func(string) string { return "no idea" }
	cases := []struct {
		name       string
		orch       string
		synth      func(string) string
		agents     [][]string
		strategies []string // the workers' strategies ("" for a free choice)
		state      []string // the planner run's Strategies
		proposed   int
		readings   []wf.Reading
		over       bool
	}{
		{"strategy lines", wf.FormatStrategies([]string{"add", "count"}), right,
			[][]string{{"orchestrator"}, {"worker0", "worker1"}, {"synthesizer"}}, []string{"add", "count"}, []string{"add", "count"}, 2,
			[]wf.Reading{orch(0, true, wf.NoFallback), synth(3, true)}, false},
		{"numbered lines are a fallback", "1. add\n2) count", right,
			[][]string{{"orchestrator"}, {"worker0", "worker1"}, {"synthesizer"}}, []string{"add", "count"}, []string{"add", "count"}, 2,
			[]wf.Reading{orch(0, false, wf.FallbackListItems), synth(3, true)}, false},
		{"duplicates are dropped", "Strategy 1: add\nStrategy 2: ADD\nStrategy 3: count", right,
			[][]string{{"orchestrator"}, {"worker0", "worker1"}, {"synthesizer"}}, []string{"add", "count"}, []string{"add", "count"}, 3,
			[]wf.Reading{orch(0, false, wf.FallbackDropped), synth(3, true)}, false},
		{"no strategy gets one free worker", "just add", right,
			[][]string{{"orchestrator"}, {"worker0"}, {"synthesizer"}}, []string{""}, nil, 0,
			[]wf.Reading{orch(0, false, wf.FallbackFreeWorker), synth(2, true)}, false},
		{"a synthesizer without an answer", wf.FormatStrategies([]string{"add"}), noAnswer,
			[][]string{{"orchestrator"}, {"worker0"}, {"synthesizer"}}, []string{"add"}, []string{"add"}, 1,
			[]wf.Reading{orch(0, true, wf.NoFallback), synth(2, false)}, false},
		{"too many strategies end the episode", wf.FormatStrategies([]string{"a", "b", "c", "d"}), right,
			[][]string{{"orchestrator"}}, nil, []string{"a", "b", "c", "d"}, 4,
			[]wf.Reading{orch(0, false, wf.NoFallback)}, true},
	}
	instr := workflowtest.Task{}.Instructions()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ep, stages := drive(t, cfg(study.OrchWorkers), byRole(map[string]func(string) string{
				study.Orchestrator: func(string) string { return c.orch }, study.Worker: wrong, study.Synthesizer: c.synth}))
			parsed := []string{strings.Join(c.state, "\n")}
			var workers []int
			for i := range c.strategies {
				parsed = append(parsed, off)
				workers = append(workers, 1+i)
			}
			final := -1
			want := []wf.StageRun{{Stage: "orchestrator", Kind: study.Planner, Turns: []int{0}, Reading: c.readings[0], Judged: -1,
				Strategies: c.state, Proposed: c.proposed, Over: c.over}}
			if !c.over {
				final = len(ep.Turns) - 1
				want = append(want,
					wf.StageRun{Stage: "workers", Kind: study.Answerer, Turns: workers, Reading: wf.Reading{Turn: -1, Role: study.Worker}, Judged: -1},
					wf.StageRun{Stage: "synthesizer", Kind: study.SynthesizerKind, Turns: []int{final}, Reading: c.readings[1], Judged: -1})
				if c.readings[1].Parsed {
					parsed = append(parsed, ans)
				} else {
					parsed = append(parsed, "")
				}
			}
			checkEpisode(t, ep, stages, c.agents, parsed, c.readings, final)
			if f := ep.Flow.(*wf.Interp); !reflect.DeepEqual(f.Runs, want) {
				t.Errorf("state %+v, want %+v", f.Runs, want)
			}
			if got := ep.Ended != ""; got != c.over || (c.over && !strings.HasPrefix(ep.FinalVerdict.Reason, "orchestrator: ")) {
				t.Errorf("ended %q (final reason %q), want ended=%v", ep.Ended, ep.FinalVerdict.Reason, c.over)
			}
			if ep.Turns[0].Graded {
				t.Error("orchestrator turn graded")
			}
			if c.over {
				return
			}
			for i, call := range stages[1] {
				if !reflect.DeepEqual(call.Messages, wf.WorkerPrompt(instr, ep.Problem, c.strategies[i])) {
					t.Errorf("worker %d prompt %q, want strategy %q", i, call.Messages, c.strategies[i])
				}
			}
			var sols []string
			for _, k := range workers {
				sols = append(sols, ep.Turns[k].Completion.Text)
			}
			if got := stages[2][0].Messages; !reflect.DeepEqual(got, wf.SynthesizerPrompt(instr, ep.Problem, sols)) {
				t.Errorf("synthesizer prompt %q does not show the workers' solutions in order", got)
			}
		})
	}
}
