package pretrain

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthmath"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

func TestMajorityPick(t *testing.T) {
	cases := []struct {
		name    string
		answers []string
		want    int
	}{
		{"two agree", []string{"4", "9", "9"}, 2},
		{"all differ: the first", []string{"1", "2", "3"}, 1},
		{"tie: the earliest of the tied", []string{"1", "2", "2", "1"}, 1},
		{"missing answers do not vote", []string{"", "", "8"}, 3},
		{"no answers at all", []string{"", ""}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := MajorityPick(tc.answers); got != tc.want {
				t.Fatalf("MajorityPick(%q) = %d, want %d", tc.answers, got, tc.want)
			}
		})
	}
}

func TestStepCheck(t *testing.T) {
	cases := []struct {
		name, solution, line string
		ok                   bool
	}{
		{"right", "7 + 2 = 9\n9 + 1 = 10\nAnswer: 10", "7 + 2 = 9, 9 + 1 = 10 ok", true},
		{"a slip, carried on", "7 + 2 = 8\n8 + 1 = 9\nAnswer: 9", "7 + 2 = 9 not 8, 8 + 1 = 9 wrong", false},
		{"a slip in the last step", "7 + 2 = 9\n9 + 1 = 11\nAnswer: 11", "7 + 2 = 9, 9 + 1 = 10 not 11 wrong", false},
		{"other operators", "3 * 4 = 12\n12 - 5 = 6\nAnswer: 6", "3 * 4 = 12, 12 - 5 = 7 not 6 wrong", false},
		{"answer is not the last result", "7 + 2 = 9\nAnswer: 8", "7 + 2 = 9 wrong", false},
		{"no answer line", "7 + 2 = 9", "7 + 2 = 9 wrong", false},
		{"no steps", "Answer: 9", "wrong", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line, ok := StepCheck(tc.solution)
			if line != tc.line || ok != tc.ok {
				t.Fatalf("StepCheck = %q, %v; want %q, %v", line, ok, tc.line, tc.ok)
			}
		})
	}
}

// TestSkilledSupervisors checks the skilled recipe's transcripts against
// the ground truth. On synth-math the aggregator writes one StepCheck line
// per candidate and selects the first correct candidate, else the most
// common answer, unless it carries random-selection noise; the evaluator
// writes the StepCheck line of its candidate before the default recipe's
// verdict, which is the candidate's true grade unless flipped; a
// candidate's check passes exactly when it is correct; the noise rates
// hold. Every other transcript (other roles, and every synth-code one) is
// the default recipe's.
func TestSkilledSupervisors(t *testing.T) {
	tasks := testTasks(t)
	plain, teacher := recipeTeachers(t, tasks, spec.SupervisorsSkilled)
	var agg, aggRandom, ev, evFlipped, pickRight, firstRight int
	for i := int64(0); i < 4000; i++ {
		tr, ref := transcriptOf(t, teacher, i), transcriptOf(t, plain, i)
		task := taskByName(tasks, tr.Task)
		if task.Name() != synthmath.Name || (tr.Role != study.Aggregator && tr.Role != study.Evaluator) {
			if tr.Completion != ref.Completion || tr.Role != ref.Role {
				t.Fatalf("transcript %d (%s %s): the skilled recipe changed a transcript it does not cover:\n%s\nwant\n%s", i, tr.Task, tr.Role, tr.Completion, ref.Completion)
			}
			continue
		}
		for k, c := range tr.Shown {
			if _, ok := StepCheck(c); ok != tr.ShownCorrect[k] {
				t.Fatalf("transcript %d: the check of candidate %d says %v, its grade is %v:\n%s", i, k+1, ok, tr.ShownCorrect[k], c)
			}
		}
		switch tr.Role {
		case study.Aggregator:
			agg++
			lines := strings.Split(tr.Completion, "\n")
			if len(lines) != len(tr.Shown)+1 {
				t.Fatalf("transcript %d: aggregator completion has %d lines, want %d:\n%s", i, len(lines), len(tr.Shown)+1, tr.Completion)
			}
			answers := make([]string, len(tr.Shown))
			for k, c := range tr.Shown {
				answers[k] = task.Verify(context.Background(), tr.Problem, c).Answer
				line, _ := StepCheck(c)
				if want := strconv.Itoa(k+1) + ": " + line; lines[k] != want {
					t.Fatalf("transcript %d: line %d is %q, want %q", i, k+1, lines[k], want)
				}
			}
			k, judge := checkedSelection(t, i, tr)
			if tr.HasNoise(NoiseRandomSelection) {
				aggRandom++
			}
			if !judge {
				continue
			}
			want := 0
			for c, right := range tr.ShownCorrect {
				if right {
					want = c + 1
					break
				}
			}
			if want == 0 {
				want = MajorityPick(answers)
			}
			if k != want {
				t.Fatalf("transcript %d: selected %d, want %d (answers %q, correct %v)", i, k, want, answers, tr.ShownCorrect)
			}
			if tr.ShownCorrect[k-1] {
				pickRight++
			}
			if tr.ShownCorrect[0] {
				firstRight++
			}
		case study.Evaluator:
			ev++
			line, _ := StepCheck(tr.Shown[0])
			if want := "Check: " + line + "\n" + ref.Completion; tr.Completion != want {
				t.Fatalf("transcript %d: evaluator completion\n%s\nwant\n%s", i, tr.Completion, want)
			}
			v, ok, _ := workflow.ParseVerdict(tr.Completion)
			if ok == tr.HasNoise(NoiseMalformed) {
				t.Fatalf("transcript %d: verdict compliant=%v with noise %v:\n%s", i, ok, tr.Noise, tr.Completion)
			}
			if tr.HasNoise(NoiseWrongVerdict) {
				evFlipped++
			}
			if ok && (v.Correct == tr.ShownCorrect[0]) == tr.HasNoise(NoiseWrongVerdict) {
				t.Fatalf("transcript %d: verdict %v on a candidate whose grade is %v, noise %v", i, v.Correct, tr.ShownCorrect[0], tr.Noise)
			}
		}
	}
	near(t, "aggregator random selections", ratio(aggRandom, agg), teacher.cfg.Noise.RandomSelection, agg)
	near(t, "evaluator wrong verdicts", ratio(evFlipped, ev), teacher.cfg.Noise.WrongVerdict, ev)
	if pickRight <= firstRight {
		t.Fatalf("the teacher's pick is right %d times, candidate 1 %d: the skill adds nothing", pickRight, firstRight)
	}
}

// TestMeetsBar checks the calibration bar's rule on constructed values.
func TestMeetsBar(t *testing.T) {
	const ci = 0.95
	est := func(v, lo, hi float64) analysis.Estimate {
		return analysis.Estimate{Value: v, Lo: lo, Hi: hi, SE: 0.01, DF: 10}
	}
	cases := []struct {
		name          string
		v             analysis.SupervisorValue
		meets, covers bool
	}{
		{"aggregator above candidate 1", analysis.SupervisorValue{Role: study.Aggregator, Diff: est(0.1, 0.02, 0.18)}, true, true},
		{"aggregator interval touches 0", analysis.SupervisorValue{Role: study.Aggregator, Diff: est(0.1, 0, 0.2)}, false, true},
		{"aggregator below", analysis.SupervisorValue{Role: study.Aggregator, Diff: est(-0.1, -0.2, -0.02)}, false, true},
		{"aggregator without an interval", analysis.SupervisorValue{Role: study.Aggregator, Diff: analysis.Estimate{Value: 0.3, Lo: math.NaN(), Hi: math.NaN(), SE: math.NaN()}}, false, true},
		// 40/50 against 5/50: Wilson [0.67, 0.89] and [0.04, 0.21]
		{"evaluator separates", analysis.SupervisorValue{Role: study.Evaluator, TrueAccepts: 40, FalseRejects: 10, FalseAccepts: 5, TrueRejects: 45}, true, true},
		// 12/20 against 6/20: the rates differ, the intervals overlap
		{"evaluator overlaps", analysis.SupervisorValue{Role: study.Evaluator, TrueAccepts: 12, FalseRejects: 8, FalseAccepts: 6, TrueRejects: 14}, false, true},
		{"evaluator accepts everything", analysis.SupervisorValue{Role: study.Evaluator, TrueAccepts: 30, FalseAccepts: 70}, false, true},
		{"evaluator never saw a wrong turn", analysis.SupervisorValue{Role: study.Evaluator, TrueAccepts: 30, FalseRejects: 1}, false, true},
		{"synthesizer is not held to the bar", analysis.SupervisorValue{Role: study.Synthesizer, Diff: est(0.1, 0.02, 0.18)}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			meets, covers := MeetsBar(tc.v, ci)
			if meets != tc.meets || covers != tc.covers {
				t.Fatalf("MeetsBar = %v, %v; want %v, %v", meets, covers, tc.meets, tc.covers)
			}
		})
	}
}

// recipeTeachers returns a teacher of the default recipe and one of the
// supervisors recipe named, both with the same noise (every rate set, so
// the checks meet each kind of noise) on tasks.
func recipeTeachers(t *testing.T, tasks []datasets.Task, supervisors string) (plain, recipe *Teacher) {
	t.Helper()
	base := DefaultConfig()
	base.Noise = Noise{Slip: 0.15, WrongVerdict: 0.2, RandomSelection: 0.2, TooManyStrategies: 0.05, Malformed: 0.05}
	other := base.Clone()
	other.Supervisors = supervisors
	plain, err := NewTeacher(base, tasks, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	recipe, err = NewTeacher(other, tasks, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	return plain, recipe
}

// transcriptOf is transcript i of teacher, failing the test on an error.
func transcriptOf(t *testing.T, teacher *Teacher, i int64) Transcript {
	t.Helper()
	tr, err := teacher.Transcript(i)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// checkedSelection reads the selection of a checking aggregator's
// transcript i: the test fails when the selection line's compliance
// disagrees with its malformed noise. It returns the candidate selected
// and whether the recipe's rule judges it (not under random-selection or
// malformed noise).
func checkedSelection(t *testing.T, i int64, tr Transcript) (k int, judge bool) {
	t.Helper()
	k, ok, _ := workflow.ParseSelection(tr.Completion, len(tr.Shown))
	if ok == tr.HasNoise(NoiseMalformed) {
		t.Fatalf("transcript %d: selection compliant=%v with noise %v:\n%s", i, ok, tr.Noise, tr.Completion)
	}
	return k, !tr.HasNoise(NoiseRandomSelection) && !tr.HasNoise(NoiseMalformed)
}
