package pretrain

import (
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

// fidelityEpisode is an episode whose answering turns wrote candidates and
// whose one supervisory turn (role) wrote text: a judge of the first
// candidate, or a selector among all of them.
func fidelityEpisode(p datasets.Problem, role, text string, candidates ...string) *workflow.Episode {
	ep := &workflow.Episode{Problem: p}
	var shown []int
	for _, c := range candidates {
		shown = append(shown, len(ep.Turns))
		ep.Turns = append(ep.Turns, workflow.Turn{Role: study.Generator, Completion: engine.Completion{Text: c}})
	}
	sup := len(ep.Turns)
	ep.Turns = append(ep.Turns, workflow.Turn{Role: role, Completion: engine.Completion{Text: text}})
	run := workflow.StageRun{Turns: []int{sup}, Reading: workflow.Reading{Turn: sup, Role: role}, Judged: -1}
	if role == study.Evaluator {
		run.Kind, run.Judged = study.Judge, shown[0]
	} else {
		run.Kind, run.Candidates = study.Selector, shown
	}
	ep.Flow = &workflow.Interp{Runs: []workflow.StageRun{{Kind: study.Answerer, Turns: shown, Reading: workflow.Reading{Turn: -1}, Judged: -1}, run}}
	return ep
}

func TestFidelityOf(t *testing.T) {
	sum := datasets.Problem{ID: "m", Prompt: "Compute 7 + 4 + 4 + 5.", Solution: "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 20\nAnswer: 20", Truth: "20"}
	code := datasets.Problem{ID: "c", Prompt: "List task: keep those above 3, then double each.", Truth: "filter >3 | map *2"}
	slip := "6 + 4 = 10\n10 + 4 = 14\n14 + 5 = 19\nAnswer: 19"
	right, _ := ProblemCheck(datasets.KindMath, sum, sum.Solution)
	wrong, _ := ProblemCheck(datasets.KindMath, sum, slip)
	pairRight, _ := PairCheck(datasets.KindMath, sum, sum.Solution)
	cases := []struct {
		name         string
		recipe, kind string
		ep           *workflow.Episode
		covered      bool
		want         Fidelity
	}{
		{"the teacher's line on a right candidate", spec.SupervisorsProblemCheck, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: "+right+"\nVerdict: Correct", sum.Solution), true,
			Fidelity{Turns: 1, Lines: 1, Exact: 1, ProblemSide: 1, CandidateSide: 1, OKPass: 1, Pass: 1}},
		{"a made-up list that passes a slip", spec.SupervisorsProblemCheck, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: 3 6 1 / 3 5 2 same; 3 + 3 = 6 ok\nVerdict: Correct", slip), true,
			Fidelity{Turns: 1, Lines: 1, OKFail: 1, Fail: 1}},
		{"the problem's operands right, the verdict word wrong", spec.SupervisorsProblemCheck, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: 7 4 4 5 / 6 4 4 5 same; ok", slip), true,
			Fidelity{Turns: 1, Lines: 1, ProblemSide: 1, CandidateSide: 1, OKFail: 1, Fail: 1}},
		{"the candidate's operands misread", spec.SupervisorsProblemCheck, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: 7 4 4 5 / 7 4 4 5 same; 7 + 4 = 11 ok", slip), true,
			Fidelity{Turns: 1, Lines: 1, ProblemSide: 1, OKFail: 1, Fail: 1}},
		{"no check line", spec.SupervisorsProblemCheck, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Verdict: Correct", sum.Solution), true,
			Fidelity{Turns: 1}},
		{"aggregator lines by candidate; an out-of-range number is not read", spec.SupervisorsProblemCheck, datasets.KindMath,
			fidelityEpisode(sum, study.Aggregator, "1: "+wrong+"\n2: "+right+"\n7: ok\nSelected: 2", slip, sum.Solution, slip), true,
			Fidelity{Turns: 1, Lines: 2, Exact: 2, ProblemSide: 2, CandidateSide: 2, OKPass: 1, Pass: 1, Fail: 1}},
		{"skilled recipe on synth-math: the step check, no problem side", spec.SupervisorsSkilled, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: 7 + 4 = 11, 11 + 4 = 15, 15 + 5 = 20 ok", sum.Solution), true,
			Fidelity{Turns: 1, Lines: 1, Exact: 1, CandidateSide: 1, OKPass: 1, Pass: 1}},
		{"skilled recipe: the candidate's steps copied, one sum wrong", spec.SupervisorsSkilled, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: 7 + 4 = 11, 11 + 4 = 16, 15 + 5 = 20 ok", sum.Solution), true,
			Fidelity{Turns: 1, Lines: 1, CandidateSide: 1, OKPass: 1, Pass: 1}},
		{"skilled recipe: a step the candidate did not write", spec.SupervisorsSkilled, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: 7 + 4 = 11, 11 + 5 = 16 ok", sum.Solution), true,
			Fidelity{Turns: 1, Lines: 1, OKPass: 1, Pass: 1}},
		{"skilled recipe on synth-code writes no check", spec.SupervisorsSkilled, datasets.KindCode,
			fidelityEpisode(sum, study.Evaluator, "Check: ok", sum.Solution), false, Fidelity{}},
		{"pair-check: both sides read right, a pair misjudged", spec.SupervisorsPairCheck, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: 7/6. 4/4. 4/4. 5/5.; 6 + 4 = 10/10. ok", slip), true,
			Fidelity{Turns: 1, Lines: 1, ProblemSide: 1, CandidateSide: 1, OKFail: 1, Fail: 1}},
		{"pair-check: the teacher's line", spec.SupervisorsPairCheck, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: "+pairRight, sum.Solution), true,
			Fidelity{Turns: 1, Lines: 1, Exact: 1, ProblemSide: 1, CandidateSide: 1, OKPass: 1, Pass: 1}},
		{"pair-check on synth-code: exact, no sides", spec.SupervisorsPairCheck, datasets.KindCode,
			fidelityEpisode(code, study.Evaluator, "Check: filter >3/filter >3. map *2/map *2. ok", "```\nfilter >3 | map *2\n```"), true,
			Fidelity{Turns: 1, Lines: 1, Exact: 1, OKPass: 1, Pass: 1}},
		{"first-slip: the teacher's line stops at the operand slip", spec.SupervisorsFirstSlip, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: 7/6! wrong", slip), true,
			Fidelity{Turns: 1, Lines: 1, Exact: 1, ProblemSide: 1, CandidateSide: 1, Fail: 1}},
		{"first-slip: a slip not seen, the line goes on past it", spec.SupervisorsFirstSlip, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: 7/7. 4/4. 4/4. 5/5.; 6 + 4 = 10/10. ok", slip), true,
			Fidelity{Turns: 1, Lines: 1, OKFail: 1, Fail: 1}},
		{"first-slip: a slip read where there is none", spec.SupervisorsFirstSlip, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: 7/7. 4/5! wrong", sum.Solution), true,
			Fidelity{Turns: 1, Lines: 1, Pass: 1}},
		{"candidate-first: the teacher's line, the candidate's operand first", spec.SupervisorsCandidateFirst, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: 6/7! wrong", slip), true,
			Fidelity{Turns: 1, Lines: 1, Exact: 1, ProblemSide: 1, CandidateSide: 1, Fail: 1, candidateFirst: true}},
		{"candidate-first: the problem's operand on the right read, the candidate's misread", spec.SupervisorsCandidateFirst, datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: 7/7! wrong", slip), true,
			Fidelity{Turns: 1, Lines: 1, ProblemSide: 1, Fail: 1, candidateFirst: true}},
		{"the default recipe writes no check", "", datasets.KindMath,
			fidelityEpisode(sum, study.Evaluator, "Check: ok", sum.Solution), false, Fidelity{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, covered := FidelityOf(tc.recipe, tc.kind, tc.ep.Turns[len(tc.ep.Turns)-1].Role, []*workflow.Episode{tc.ep})
			if covered != tc.covered {
				t.Fatalf("covered = %v, want %v", covered, tc.covered)
			}
			if !covered {
				return
			}
			got.Role, got.HasProblemSide, got.HasCandidateSide = "", false, false
			if got != tc.want {
				t.Fatalf("FidelityOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFidelityMarkdown(t *testing.T) {
	c := Calibration{Scale: "s", CI: 0.95, Recipe: spec.SupervisorsProblemCheck, Rows: []CalRow{
		{Task: "synth-math", Workflow: "eval-opt", Fidelity: &Fidelity{Role: study.Evaluator, Turns: 4, Lines: 3, Exact: 1,
			ProblemSide: 2, HasProblemSide: true, CandidateSide: 1, HasCandidateSide: true, OKPass: 1, Pass: 1, OKFail: 1, Fail: 2}},
		{Task: "synth-math", Workflow: "single"},
	}}
	md := c.Markdown()
	for _, want := range []string{
		"### Check fidelity at base",
		"problem-check recipe",
		"| synth-math | eval-opt | evaluator | 4 | 3 | 1 | 2 | 1 | 1.000",
		"| 0.500 [",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("calibration markdown lacks %q:\n%s", want, md)
		}
	}
	if got := strings.Count(md, "| synth-math | single |"); got != 1 {
		t.Errorf("the row without fidelity appears %d times, want once (in the accuracy table)", got)
	}
}
