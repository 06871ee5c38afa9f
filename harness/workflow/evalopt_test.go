package workflow_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/study"
	wf "github.com/marlowlab/marlow/harness/workflow"
	"github.com/marlowlab/marlow/harness/workflow/workflowtest"
)

func TestEvalOptFlow(t *testing.T) {
	ans, off := truthPlus(t, 0), truthPlus(t, 1)
	honest := func(user string) string {
		sol := user[strings.Index(user, "Solution:\n"):]
		return wf.FormatVerdict(strings.Contains(sol, right(user)), "add again")
	}
	reviseRight := func(user string) string {
		if strings.Contains(user, "Previous solution") {
			return right(user)
		}
		return wrong(user)
	}
	read := func(turn int, parsed bool) wf.Reading {
		r := wf.Reading{Turn: turn, Role: study.Evaluator, Parsed: parsed}
		if !parsed {
			r.Fallback = wf.FallbackIncorrect
		}
		return r
	}
	cases := []struct {
		name     string
		maxIter  int
		gen      func(string) string
		eval     func(string) string
		agents   [][]string
		parsed   []string
		readings []wf.Reading
		verdicts []wf.Verdict // the rounds' verdicts as used
		final    int
		// evalRight is each evaluator turn's own grade (its verdict matches
		// the judged answer's truth).
		evalRight []bool
	}{
		{"a parsed Correct ends the episode", 3, right, honest,
			[][]string{{"generator0"}, {"evaluator0"}}, []string{ans, "Correct"},
			[]wf.Reading{read(1, true)}, []wf.Verdict{{Correct: true, Feedback: "add again"}}, 0, []bool{true}},
		{"Incorrect makes the generator revise", 3, reviseRight, honest,
			[][]string{{"generator0"}, {"evaluator0"}, {"generator1"}, {"evaluator1"}}, []string{off, "Incorrect", ans, "Correct"},
			[]wf.Reading{read(1, true), read(3, true)}, []wf.Verdict{{Feedback: "add again"}, {Correct: true, Feedback: "add again"}}, 2, []bool{true, true}},
		{"unparsable verdicts count as Incorrect up to max_iterations", 3, right, func(string) string { return "fine by me" },
			[][]string{{"generator0"}, {"evaluator0"}, {"generator1"}, {"evaluator1"}, {"generator2"}, {"evaluator2"}},
			[]string{ans, "", ans, "", ans, ""}, []wf.Reading{read(1, false), read(3, false), read(5, false)},
			[]wf.Verdict{{}, {}, {}}, 4, []bool{false, false, false}},
		{"the last generator turn is judged but not revised", 2, wrong, honest,
			[][]string{{"generator0"}, {"evaluator0"}, {"generator1"}, {"evaluator1"}}, []string{off, "Incorrect", off, "Incorrect"},
			[]wf.Reading{read(1, true), read(3, true)}, []wf.Verdict{{Feedback: "add again"}, {Feedback: "add again"}}, 2, []bool{true, true}},
		{"a false accept ends the episode with the wrong answer", 3, wrong, func(string) string { return wf.FormatVerdict(true, "") },
			[][]string{{"generator0"}, {"evaluator0"}}, []string{off, "Correct"},
			[]wf.Reading{read(1, true)}, []wf.Verdict{{Correct: true}}, 0, []bool{false}},
		{"one iteration", 1, wrong, honest,
			[][]string{{"generator0"}, {"evaluator0"}}, []string{off, "Incorrect"},
			[]wf.Reading{read(1, true)}, []wf.Verdict{{Feedback: "add again"}}, 0, []bool{true}},
	}
	instr := workflowtest.Task{}.Instructions()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wc := cfg(study.EvalOpt)
			wc.MaxIterations = c.maxIter
			ep, stages := drive(t, wc, byRole(map[string]func(string) string{study.Generator: c.gen, study.Evaluator: c.eval}))
			checkEpisode(t, ep, stages, c.agents, c.parsed, c.readings, c.final)
			f := ep.Flow.(*wf.Interp)
			if len(f.Runs) != 2*len(c.verdicts) {
				t.Fatalf("%d stage runs, want %d", len(f.Runs), 2*len(c.verdicts))
			}
			var judges []wf.StageRun
			for i, r := range f.Runs {
				if r.Round != i/2 || !reflect.DeepEqual(r.Turns, []int{i}) {
					t.Errorf("stage run %d: %+v, want round %d, turn %d", i, r, i/2, i)
				}
				if i%2 == 1 {
					judges = append(judges, r)
				}
			}
			for i, r := range judges {
				if r.Judged != 2*i || r.Reading.Turn != 2*i+1 || r.Verdict != c.verdicts[i] {
					t.Errorf("round %d: %+v, want generator %d, evaluator %d, verdict %+v", i, r, 2*i, 2*i+1, c.verdicts[i])
				}
				if r.Accepted() != (i == len(judges)-1 && c.verdicts[i].Correct) {
					t.Errorf("round %d accepted=%v", i, r.Accepted())
				}
				ev := ep.Turns[r.Reading.Turn]
				if !ev.Graded || ev.Verdict.Correct != c.evalRight[i] || ev.Verdict.Answer != ev.Parsed {
					t.Errorf("evaluator turn %d graded=%v verdict %+v, want graded, correct=%v, answer %q", r.Reading.Turn, ev.Graded, ev.Verdict, c.evalRight[i], ev.Parsed)
				}
			}
			// Each stage's call: its round, and the prompt the round calls for.
			for s, cs := range stages {
				round := s / 2
				gen := ep.Turns[2*round].Completion.Text
				want := wf.EvaluatorPrompt(ep.Problem, gen)
				if s%2 == 0 {
					want = wf.GeneratorPrompt(instr, ep.Problem)
					if round > 0 {
						want = wf.RevisionPrompt(instr, ep.Problem, ep.Turns[2*round-2].Completion.Text, judges[round-1].Verdict.Feedback)
					}
				}
				if len(cs) != 1 || cs[0].Iteration != round || !reflect.DeepEqual(cs[0].Messages, want) {
					t.Errorf("stage %d: calls %+v, want one call of round %d with prompt %q", s, cs, round, want)
				}
			}
		})
	}
}
