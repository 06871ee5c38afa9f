package pretrain

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

func TestSkilledPick(t *testing.T) {
	cases := []struct {
		name    string
		answers []string
		own     string
		want    int
	}{
		{"agrees with the first", []string{"7", "5", "7"}, "7", 1},
		{"agrees with a later one against a majority", []string{"5", "9", "9", "4"}, "4", 4},
		{"agrees with none: the majority", []string{"4", "9", "9"}, "3", 2},
		{"agrees with none, all differ: the first", []string{"1", "2", "3"}, "8", 1},
		{"tie: the earliest of the tied", []string{"1", "2", "2", "1"}, "8", 1},
		{"no own answer: the majority", []string{"1", "2", "2"}, "", 2},
		{"missing answers do not vote", []string{"", "", "8"}, "", 3},
		{"a missing answer never agrees", []string{"", "6"}, "", 2},
		{"no answers at all", []string{"", ""}, "5", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := SkilledPick(tc.answers, tc.own); got != tc.want {
				t.Fatalf("SkilledPick(%q, %q) = %d, want %d", tc.answers, tc.own, got, tc.want)
			}
		})
	}
}

// TestSkilledSupervisors checks the skilled recipe's aggregator and
// evaluator transcripts against the ground truth: the aggregator writes the
// clean worked solution, lists each candidate's answer as the verifier
// reads it and selects the first correct candidate, else the most common
// answer, unless it carries random-selection noise; the
// evaluator writes the clean worked solution before a verdict that is the
// candidate's true grade unless flipped; the noise rates hold; and the
// other roles' transcripts are those of the default recipe.
func TestSkilledSupervisors(t *testing.T) {
	tasks := testTasks(t)
	base := DefaultConfig()
	base.Noise = Noise{Slip: 0.15, WrongVerdict: 0.2, RandomSelection: 0.2, TooManyStrategies: 0.05, Malformed: 0.05}
	skilled := base.Clone()
	skilled.Supervisors = spec.SupervisorsSkilled
	plain, err := NewTeacher(base, tasks, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	teacher, err := NewTeacher(skilled, tasks, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	var agg, aggRandom, ev, evFlipped, pickRight, firstRight int
	for i := int64(0); i < 3000; i++ {
		tr, err := teacher.Transcript(i)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := plain.Transcript(i)
		if err != nil {
			t.Fatal(err)
		}
		task := taskByName(tasks, tr.Task)
		switch tr.Role {
		case study.Aggregator:
			agg++
			own := teacher.sources[i%int64(len(tasks))].tidy(tr.Problem.Solution)
			body, ok := strings.CutPrefix(tr.Completion, OwnWorkHeader+"\n"+own+"\n")
			if !ok {
				t.Fatalf("transcript %d: aggregator completion does not open with its own solution:\n%s", i, tr.Completion)
			}
			lines := strings.Split(body, "\n")
			if len(lines) != len(tr.Shown)+1 {
				t.Fatalf("transcript %d: aggregator completion has %d lines after its solution, want %d:\n%s", i, len(lines), len(tr.Shown)+1, tr.Completion)
			}
			answers := make([]string, len(tr.Shown))
			for k, c := range tr.Shown {
				answers[k] = strings.Join(strings.Fields(task.Verify(context.Background(), tr.Problem, c).Answer), " ")
				want := answers[k]
				if want == "" {
					want = "none"
				}
				if got := lines[k]; got != "Candidate "+strconv.Itoa(k+1)+": "+want {
					t.Fatalf("transcript %d: line %d is %q, want the answer %q", i, k+1, got, want)
				}
			}
			k, ok, _ := workflow.ParseSelection(tr.Completion, len(tr.Shown))
			if ok == tr.HasNoise(NoiseMalformed) {
				t.Fatalf("transcript %d: selection compliant=%v with noise %v:\n%s", i, ok, tr.Noise, tr.Completion)
			}
			if tr.HasNoise(NoiseRandomSelection) {
				aggRandom++
				continue
			}
			if tr.HasNoise(NoiseMalformed) {
				continue // the selection line is prose
			}
			// the first correct candidate, else the most common answer
			want := 0
			for c, ok := range tr.ShownCorrect {
				if ok {
					want = c + 1
					break
				}
			}
			if want == 0 {
				want = SkilledPick(answers, "")
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
			head := OwnWorkHeader + "\n" + teacher.sources[i%int64(len(tasks))].tidy(tr.Problem.Solution) + "\n"
			rest, ok := strings.CutPrefix(tr.Completion, head)
			if !ok {
				t.Fatalf("transcript %d: evaluator completion does not open with its own solution:\n%s", i, tr.Completion)
			}
			if rest != ref.Completion {
				t.Fatalf("transcript %d: the verdict after the own solution differs from the default recipe's:\n%s\nwant\n%s", i, rest, ref.Completion)
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
		default:
			if tr.Completion != ref.Completion || tr.Role != ref.Role {
				t.Fatalf("transcript %d (%s): the skilled recipe changed a role it does not cover", i, tr.Role)
			}
		}
	}
	near(t, "aggregator random selections", ratio(aggRandom, agg), skilled.Noise.RandomSelection, agg)
	near(t, "evaluator wrong verdicts", ratio(evFlipped, ev), skilled.Noise.WrongVerdict, ev)
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
