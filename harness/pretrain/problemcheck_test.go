package pretrain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthcode"
	"github.com/marlowlab/marlow/datasets/synthmath"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
	"github.com/marlowlab/marlow/keyed"
)

func TestSolutionOperands(t *testing.T) {
	cases := []struct {
		name, solution string
		want           []int64
	}{
		{"a sum", "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 20\nAnswer: 20", []int64{7, 4, 4, 5}},
		{"an operand equal to an earlier result", "3 + 4 = 7\n7 + 7 = 14\nAnswer: 14", []int64{3, 4, 7}},
		{"a slip is carried, not an operand", "3 + 4 = 8\n8 + 5 = 13\nAnswer: 13", []int64{3, 4, 5}},
		{"products first", "2 * 3 = 6\n4 * 5 = 20\n6 + 20 = 26\nAnswer: 26", []int64{2, 3, 4, 5}},
		{"no steps", "Answer: 9", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := SolutionOperands(tc.solution); !slices.Equal(got, tc.want) {
				t.Fatalf("SolutionOperands = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestProblemCheck checks the check lines of the recipes that check a
// candidate against the problem, on the same candidates: problem-check's
// (line), pair-check's (pairs) and first-slip's (slip; "" where it is
// pairs), which must pass or fail together (ok).
func TestProblemCheck(t *testing.T) {
	sum := datasets.Problem{ID: "m", Prompt: "Compute 7 + 4 + 4 + 5.", Solution: "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 20\nAnswer: 20", Truth: "20"}
	code := datasets.Problem{ID: "c", Prompt: "List task: keep those above 3, then double each.", Truth: "filter >3 | map *2"}
	fence := func(prog string) string { return "```\n" + prog + "\n```" }
	cases := []struct {
		name        string
		kind        string
		p           datasets.Problem
		solution    string
		line, pairs string
		slip        string
		ok          bool
	}{
		{"math right", datasets.KindMath, sum, sum.Solution,
			"7 4 4 5 / 7 4 4 5 same; 7 + 4 = 11, 11 + 4 = 15, 15 + 5 = 20 ok",
			"7/7. 4/4. 4/4. 5/5.; 7 + 4 = 11/11., 11 + 4 = 15/15., 15 + 5 = 20/20.; answer 20/20. ok", "", true},
		{"math operand copied wrong, added right", datasets.KindMath, sum, "6 + 4 = 10\n10 + 4 = 14\n14 + 5 = 19\nAnswer: 19",
			"7 4 4 5 / 6 4 4 5 differ; 6 + 4 = 10, 10 + 4 = 14, 14 + 5 = 19 wrong",
			"7/6! 4/4. 4/4. 5/5.; 6 + 4 = 10/10., 10 + 4 = 14/14., 14 + 5 = 19/19.; answer 19/19. wrong", "7/6! wrong", false},
		{"math operands left out", datasets.KindMath, sum, "6 + 5 = 11\nAnswer: 11",
			"7 4 4 5 / 6 5 differ; 6 + 5 = 11 wrong",
			"7/6! 4/5! 4/-! 5/-!; 6 + 5 = 11/11.; answer 11/11. wrong", "7/6! wrong", false},
		{"math arithmetic slip", datasets.KindMath, sum, "7 + 4 = 11\n11 + 4 = 16\n16 + 5 = 21\nAnswer: 21",
			"7 4 4 5 / 7 4 4 5 same; 7 + 4 = 11, 11 + 4 = 15 not 16, 16 + 5 = 21 wrong",
			"7/7. 4/4. 4/4. 5/5.; 7 + 4 = 11/11., 11 + 4 = 15/16!, 16 + 5 = 21/21.; answer 21/21. wrong",
			"7/7. 4/4. 4/4. 5/5.; 7 + 4 = 11/11., 11 + 4 = 15/16! wrong", false},
		{"math answer line differs", datasets.KindMath, sum, "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 20\nAnswer: 21",
			"7 4 4 5 / 7 4 4 5 same; 7 + 4 = 11, 11 + 4 = 15, 15 + 5 = 20 wrong",
			"7/7. 4/4. 4/4. 5/5.; 7 + 4 = 11/11., 11 + 4 = 15/15., 15 + 5 = 20/20.; answer 20/21! wrong", "", false},
		{"math no answer line", datasets.KindMath, sum, "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 20",
			"7 4 4 5 / 7 4 4 5 same; 7 + 4 = 11, 11 + 4 = 15, 15 + 5 = 20 wrong",
			"7/7. 4/4. 4/4. 5/5.; 7 + 4 = 11/11., 11 + 4 = 15/15., 15 + 5 = 20/20.; answer 20/-! wrong", "", false},
		{"math no steps", datasets.KindMath, sum, "Answer: 20",
			"7 4 4 5 / none differ; wrong",
			"7/-! 4/-! 4/-! 5/-!; no steps!; answer -/20! wrong", "7/-! wrong", false},
		{"code right", datasets.KindCode, code, fence("filter >3 | map *2"),
			"filter >3, map *2 ok", "filter >3/filter >3. map *2/map *2. ok", "", true},
		{"code stage differs", datasets.KindCode, code, fence("filter >3 | map +2"),
			"filter >3, map *2 not map +2 wrong", "filter >3/filter >3. map *2/map +2! wrong", "", false},
		{"code stage missing", datasets.KindCode, code, fence("filter >3"),
			"filter >3, map *2 missing wrong", "filter >3/filter >3. map *2/-! wrong", "", false},
		{"code extra stage", datasets.KindCode, code, fence("filter >3 | map *2 | sum"),
			"filter >3, map *2, extra sum wrong", "filter >3/filter >3. map *2/map *2. -/sum! wrong", "", false},
		{"code no program", datasets.KindCode, code, "I would double them.", "no program wrong", "no program wrong", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if line, ok := ProblemCheck(tc.kind, tc.p, tc.solution); line != tc.line || ok != tc.ok {
				t.Errorf("ProblemCheck = %q, %v; want %q, %v", line, ok, tc.line, tc.ok)
			}
			if pairs, ok := PairCheck(tc.kind, tc.p, tc.solution); pairs != tc.pairs || ok != tc.ok {
				t.Errorf("PairCheck = %q, %v; want %q, %v", pairs, ok, tc.pairs, tc.ok)
			}
			if tc.slip == "" {
				tc.slip = tc.pairs
			}
			if slip, ok := FirstSlipCheck(tc.kind, tc.p, tc.solution); slip != tc.slip || ok != tc.ok {
				t.Errorf("FirstSlipCheck = %q, %v; want %q, %v", slip, ok, tc.slip, tc.ok)
			}
		})
	}
}

// TestOperandSlip checks that an operand slip is what its comment says on
// many problems: every step right, the answer wrong, the operands not the
// problem's, so the problem check fails while the step check passes.
func TestOperandSlip(t *testing.T) {
	task, err := synthmath.New(synthmath.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 500; i++ {
		p, err := task.Train(i)
		if err != nil {
			t.Fatal(err)
		}
		s, err := OperandSlip(p, keyed.NewRNG(1, "test/operand-slip", uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		if task.Verify(context.Background(), p, s).Correct {
			t.Fatalf("%s: the slip %q is correct", p.Prompt, s)
		}
		if _, ok := StepCheck(s); !ok {
			t.Fatalf("%s: the slip %q has a wrong step", p.Prompt, s)
		}
		if slices.Equal(SolutionOperands(s), SolutionOperands(p.Solution)) {
			t.Fatalf("%s: the slip %q kept the problem's operands", p.Prompt, s)
		}
		if line, ok := ProblemCheck(datasets.KindMath, p, s); ok || !strings.Contains(line, " differ; ") {
			t.Fatalf("%s: the check of the slip %q is %q, %v", p.Prompt, s, line, ok)
		}
	}
	if _, err := OperandSlip(datasets.Problem{ID: "bad", Prompt: "Add them."}, keyed.NewRNG(1, "x", 0)); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("unparsable prompt: err = %v, want one naming the problem", err)
	}
}

// TestProblemCheckSupervisors checks the transcripts of the recipes that
// check candidates against the problem (problem-check and pair-check, whose
// candidates and noise must be the same) against the ground truth, on both
// tasks: each shown candidate's check passes exactly when the candidate is
// correct; the evaluator writes its candidate's check line before a verdict that is the
// candidate's grade unless flipped; the aggregator writes check lines up
// to the first passing candidate and selects it, else the most common
// answer, unless it carries random-selection noise; on synth-math about
// two in three wrong candidates copied an operand wrong; the noise rates
// hold; and the other roles' transcripts are the default recipe's.
func TestProblemCheckSupervisors(t *testing.T) {
	tasks := testTasks(t)
	for _, tc := range []struct {
		recipe string
		check  func(string, datasets.Problem, string) (string, bool)
	}{{spec.SupervisorsProblemCheck, ProblemCheck}, {spec.SupervisorsPairCheck, PairCheck}, {spec.SupervisorsFirstSlip, FirstSlipCheck}, {spec.SupervisorsCandidateFirst, CandidateFirstCheck}} {
		t.Run(tc.recipe, func(t *testing.T) {
			plain, teacher := recipeTeachers(t, tasks, tc.recipe)
			var same *Teacher // problem-check's teacher, whose candidates and noise the other recipes keep
			if tc.recipe != spec.SupervisorsProblemCheck {
				_, same = recipeTeachers(t, tasks, spec.SupervisorsProblemCheck)
			}
			var agg, aggRandom, ev, evFlipped, mathWrong, operandSlips int
			pickRight, firstRight := map[string]int{}, map[string]int{}
			for i := int64(0); i < 4000; i++ {
				tr, ref := transcriptOf(t, teacher, i), transcriptOf(t, plain, i)
				if same != nil {
					if pc, err := same.Transcript(i); err != nil || pc.Role != tr.Role || !slices.Equal(pc.Shown, tr.Shown) || !slices.Equal(pc.Noise, tr.Noise) {
						t.Fatalf("transcript %d: the recipe's candidates or noise differ from problem-check's (%v):\n%q %v\nwant\n%q %v", i, err, tr.Shown, tr.Noise, pc.Shown, pc.Noise)
					}
				}
				if tr.Role != study.Aggregator && tr.Role != study.Evaluator {
					if tr.Completion != ref.Completion || tr.Role != ref.Role || !slices.Equal(tr.Shown, ref.Shown) {
						t.Fatalf("transcript %d (%s %s): the recipe changed a transcript it does not cover:\n%s\nwant\n%s", i, tr.Task, tr.Role, tr.Completion, ref.Completion)
					}
					continue
				}
				task := taskByName(tasks, tr.Task)
				kind := task.Kind()
				lines := make([]string, len(tr.Shown))
				for k, c := range tr.Shown {
					line, ok := tc.check(kind, tr.Problem, c)
					if ok != tr.ShownCorrect[k] {
						t.Fatalf("transcript %d: the check of candidate %d says %v, its grade is %v:\n%s\n%s", i, k+1, ok, tr.ShownCorrect[k], c, line)
					}
					if task.Verify(context.Background(), tr.Problem, c).Correct != tr.ShownCorrect[k] {
						t.Fatalf("transcript %d: candidate %d's grade %v is not the verifier's:\n%s", i, k+1, tr.ShownCorrect[k], c)
					}
					lines[k] = line
					if kind == datasets.KindMath && !tr.ShownCorrect[k] {
						mathWrong++
						if _, stepsOK := StepCheck(c); stepsOK {
							operandSlips++
						}
					}
				}
				switch tr.Role {
				case study.Evaluator:
					ev++
					head, rest, _ := strings.Cut(tr.Completion, "\n")
					if want := "Check: " + lines[0]; head != want {
						t.Fatalf("transcript %d: evaluator's first line %q, want %q", i, head, want)
					}
					v, ok, _ := workflow.ParseVerdict(rest)
					if ok == tr.HasNoise(NoiseMalformed) {
						t.Fatalf("transcript %d: verdict compliant=%v with noise %v:\n%s", i, ok, tr.Noise, tr.Completion)
					}
					if tr.HasNoise(NoiseWrongVerdict) {
						evFlipped++
					}
					if ok && (v.Correct == tr.ShownCorrect[0]) == tr.HasNoise(NoiseWrongVerdict) {
						t.Fatalf("transcript %d: verdict %v on a candidate whose grade is %v, noise %v", i, v.Correct, tr.ShownCorrect[0], tr.Noise)
					}
				case study.Aggregator:
					agg++
					first := slices.Index(tr.ShownCorrect, true)
					var want []string
					for k := range tr.Shown {
						want = append(want, strconv.Itoa(k+1)+": "+lines[k])
						if k == first {
							break
						}
					}
					got := strings.Split(tr.Completion, "\n")
					if len(got) != len(want)+1 || !slices.Equal(got[:len(want)], want) {
						t.Fatalf("transcript %d: aggregator completion\n%s\nwant check lines\n%s", i, tr.Completion, strings.Join(want, "\n"))
					}
					k, judge := checkedSelection(t, i, tr)
					if tr.HasNoise(NoiseRandomSelection) {
						aggRandom++
					}
					if !judge {
						continue
					}
					pick := first + 1
					if first < 0 {
						answers := make([]string, len(tr.Shown))
						for c, s := range tr.Shown {
							answers[c] = task.Verify(context.Background(), tr.Problem, s).Answer
						}
						pick = MajorityPick(answers)
					}
					if k != pick {
						t.Fatalf("transcript %d: selected %d, want %d (correct %v)", i, k, pick, tr.ShownCorrect)
					}
					if tr.ShownCorrect[k-1] {
						pickRight[tr.Task]++
					}
					if tr.ShownCorrect[0] {
						firstRight[tr.Task]++
					}
				}
			}
			near(t, "aggregator random selections", ratio(aggRandom, agg), teacher.cfg.Noise.RandomSelection, agg)
			near(t, "evaluator wrong verdicts", ratio(evFlipped, ev), teacher.cfg.Noise.WrongVerdict, ev)
			near(t, "operand slips among wrong synth-math candidates", ratio(operandSlips, mathWrong), operandSlipShare, mathWrong)
			for _, task := range []string{synthmath.Name, synthcode.Name} {
				if pickRight[task] <= firstRight[task] {
					t.Errorf("%s: the teacher's pick is right %d times, candidate 1 %d: the skill adds nothing", task, pickRight[task], firstRight[task])
				}
			}
		})
	}
}

// TestRecipeTranscriptsPinned pins the digest of the first 300
// transcripts of the default and the skilled recipe, as they were before
// the problem-check recipe was added (committed checkpoints were built
// from them), and of the problem-check recipe itself.
func TestRecipeTranscriptsPinned(t *testing.T) {
	tasks := testTasks(t)
	cases := []struct{ recipe, want string }{
		{"", "f057c8716fc7e6e2478aaadd2085d105423578e0926ed26c5608e355aae24720"},
		{spec.SupervisorsSkilled, "dfc0d79e620991980883c0c021443b4d10d69ab48de3e3f59d4f524a4a814656"},
		{spec.SupervisorsProblemCheck, "7ebc3a39ca827b8c6f617e706920acf4f2923f81adbf7d3058ab40403b3a5ad2"},
	}
	for _, tc := range cases {
		cfg := DefaultConfig()
		cfg.Supervisors = tc.recipe
		teacher, err := NewTeacher(cfg, tasks, 3, 3)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		for i := int64(0); i < 300; i++ {
			tr, err := teacher.Transcript(i)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(h, "%d %s %s %q %q %v\n", i, tr.Task, tr.Role, tr.Completion, tr.Shown, tr.Noise)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != tc.want {
			t.Errorf("recipe %q: transcripts digest %s, want %s", tc.recipe, got, tc.want)
		}
	}
}

// TestMathErrorKind sorts hand-written wrong solutions of one problem.
func TestMathErrorKind(t *testing.T) {
	p := datasets.Problem{ID: "p", Prompt: "Compute 7 + 4 + 4 + 5.", Solution: "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 20\nAnswer: 20"}
	for _, tc := range []struct{ name, solution, want string }{
		{"a slip carried", "7 + 4 = 11\n11 + 4 = 16\n16 + 5 = 21\nAnswer: 21", "slip"},
		{"a slip in the last step", "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 30\nAnswer: 30", "slip"},
		{"the last operand left out", "7 + 4 = 11\n11 + 4 = 15\nAnswer: 15", "drop_last"},
		{"an operand changed", "7 + 4 = 11\n11 + 3 = 14\n14 + 5 = 19\nAnswer: 19", "operand"},
		{"an operand added", "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 20\n20 + 5 = 25\nAnswer: 25", "operand"},
		{"a wrong answer line", "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 20\nAnswer: 22", "answer"},
		{"the answer in prose", "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 20\nSo the result is 22.", "answer"},
		{"no steps", "Answer: 22", KindOther},
		{"a slip not carried", "7 + 4 = 11\n11 + 4 = 16\n15 + 5 = 20\nAnswer: 20", KindOther},
	} {
		if got := MathErrorKind(p, tc.solution); got != tc.want {
			t.Errorf("%s: kind %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestWrongMathCandidate checks each kind of pretrain.wrong_math on many
// problems, alone and mixed: the candidate is wrong, its check fails, and
// MathErrorKind sorts it into its kind (an operand slip may leave an
// operand out, the last among them); and a mix draws each kind near its
// share.
func TestWrongMathCandidate(t *testing.T) {
	cfg := synthmath.DefaultConfig()
	cfg.OperandsMin, cfg.OperandsMax, cfg.ValueMax, cfg.Ops = 3, 6, 15, "+" // the pilots' task, whose operand lists read plainly
	task, err := synthmath.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 600
	for _, tc := range []struct {
		name  string
		w     spec.WrongMath
		share map[string]float64 // of n candidates, each within 0.06
	}{
		{"slip", spec.WrongMath{Slip: 1}, map[string]float64{"slip": 1}},
		{"drop_last", spec.WrongMath{DropLast: 1}, map[string]float64{"drop_last": 1}},
		{"operand", spec.WrongMath{Operand: 1}, nil}, // an operand left out is also a kind of OperandSlip
		{"answer", spec.WrongMath{Answer: 1}, map[string]float64{"answer": 1}},
		{"mix", spec.WrongMath{Slip: 0.6, DropLast: 0.2, Operand: 0.1, Answer: 0.1},
			map[string]float64{"slip": 0.6, "answer": 0.1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			count := map[string]int{}
			for i := int64(0); i < n; i++ {
				p, err := task.Train(i)
				if err != nil {
					t.Fatal(err)
				}
				s, err := WrongMathCandidate(p, tc.w, keyed.NewRNG(1, "test/wrong-math", uint64(i)))
				if err != nil {
					t.Fatal(err)
				}
				if task.Verify(context.Background(), p, s).Correct {
					t.Fatalf("%s: the candidate %q is correct", p.Prompt, s)
				}
				if _, ok := FirstSlipCheck(datasets.KindMath, p, s); ok {
					t.Fatalf("%s: the check of the wrong candidate %q passed", p.Prompt, s)
				}
				k := MathErrorKind(p, s)
				if k == KindOther {
					t.Fatalf("%s: the candidate %q is of no kind", p.Prompt, s)
				}
				count[k]++
			}
			for k, want := range tc.share {
				if got := float64(count[k]) / n; math.Abs(got-want) > 0.06 {
					t.Errorf("kind %s: share %.3f, want %.2f (counts %v)", k, got, want, count)
				}
			}
			if tc.name == "operand" && count["operand"]+count["drop_last"] != n {
				t.Errorf("operand slips: counts %v, want only operand kinds", count)
			}
		})
	}
	if _, err := WrongMathCandidate(datasets.Problem{ID: "bad", Prompt: "Add them."}, spec.WrongMath{Answer: 1}, keyed.NewRNG(1, "x", 0)); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("unparsable prompt: err = %v, want one naming the problem", err)
	}
}

// TestWrongMathShownToSupervisors checks that pretrain.wrong_math reaches
// the first-slip recipe's supervisors: with only wrong answer lines set,
// every wrong synth-math candidate an evaluator or aggregator is shown
// has right operands and steps, and its check line ends at the answer.
func TestWrongMathShownToSupervisors(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Supervisors = spec.SupervisorsFirstSlip
	cfg.WrongMath = &spec.WrongMath{Answer: 1}
	teacher, err := NewTeacher(cfg, testTasks(t), 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	wrong := 0
	for i := int64(0); i < 600; i++ {
		tr, err := teacher.Transcript(i)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Task != "synth-math" || (tr.Role != study.Evaluator && tr.Role != study.Aggregator) {
			continue
		}
		for k, s := range tr.Shown {
			if tr.ShownCorrect[k] {
				continue
			}
			wrong++
			line, _ := FirstSlipCheck(datasets.KindMath, tr.Problem, s)
			if !strings.Contains(line, "; answer ") || !strings.HasSuffix(line, "! wrong") {
				t.Fatalf("transcript %d: a wrong candidate %q checks as %q, want a slip at its answer line", i, s, line)
			}
		}
	}
	if wrong < 20 {
		t.Fatalf("only %d wrong synth-math candidates shown in 600 transcripts", wrong)
	}
}

// TestGeneratorErrors counts the generators' first answers of some
// episodes, sorts the wrong ones, leaves out revisions and other roles,
// and writes the table only for rows that have it.
func TestGeneratorErrors(t *testing.T) {
	p := datasets.Problem{ID: "p", Prompt: "Compute 7 + 4 + 4 + 5.", Solution: "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 20\nAnswer: 20", Truth: "20"}
	turn := func(role string, iter int, correct bool, text string) workflow.Turn {
		return workflow.Turn{Role: role, Iteration: iter, Graded: true, Verdict: datasets.Verdict{Correct: correct},
			Completion: engine.Completion{Text: text}}
	}
	eps := []*workflow.Episode{
		{Problem: p, Turns: []workflow.Turn{
			turn(study.Generator, 0, true, p.Solution),
			turn(study.Generator, 0, false, "7 + 4 = 11\n11 + 4 = 15\nAnswer: 15"),
			turn(study.Generator, 0, false, "7 + 4 = 11\n11 + 4 = 16\n16 + 5 = 21\nAnswer: 21"),
			turn(study.Aggregator, 0, false, "Selected: 2"),
		}},
		{Problem: p, Turns: []workflow.Turn{
			turn(study.Generator, 0, false, "7 + 4 = 11\n11 + 4 = 16\n16 + 5 = 21\nAnswer: 21"),
			turn(study.Generator, 1, false, "7 + 4 = 11\n11 + 4 = 15\nAnswer: 15"), // a revision
			{Role: study.Generator}, // not graded
		}},
	}
	g := generatorErrorsOf(eps)
	if g.Turns != 4 || g.Wrong != 3 || g.Kinds["slip"] != 2 || g.Kinds["drop_last"] != 1 || len(g.Kinds) != 2 {
		t.Fatalf("errors %+v, want 4 turns, 3 wrong: 2 slips, 1 drop_last", g)
	}
	c := Calibration{Scale: "s", CI: 0.95, Recipe: spec.SupervisorsFirstSlip, Rows: []CalRow{
		{Task: "synth-math", Workflow: "voting", Errors: &g},
		{Task: "synth-code", Workflow: "voting"},
	}}
	md := c.Markdown()
	for _, want := range []string{"### Wrong generator answers by kind", "| task | workflow | generator turns | wrong | slip | drop_last | operand | answer | other |",
		"| synth-math | voting | 4 | 3 | 2 | 1 | 0 | 0 | 0 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("calibration markdown lacks %q:\n%s", want, md)
		}
	}
	c.Rows = c.Rows[1:]
	if strings.Contains(c.Markdown(), "by kind") {
		t.Errorf("a calibration without error counts writes their table")
	}
}

// TestCandidateFirstCheck checks the candidate-first recipe's lines: the
// first-slip line with each pair written the candidate's item first.
func TestCandidateFirstCheck(t *testing.T) {
	sum := datasets.Problem{ID: "m", Prompt: "Compute 7 + 4 + 4 + 5.", Solution: "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 20\nAnswer: 20", Truth: "20"}
	code := datasets.Problem{ID: "c", Prompt: "List task: keep those above 3, then double each.", Truth: "filter >3 | map *2"}
	fence := func(prog string) string { return "```\n" + prog + "\n```" }
	for _, tc := range []struct {
		name, kind string
		p          datasets.Problem
		solution   string
		line       string
		ok         bool
	}{
		{"math right", datasets.KindMath, sum, sum.Solution, "7/7. 4/4. 4/4. 5/5.; 7 + 4 = 11/11., 11 + 4 = 15/15., 15 + 5 = 20/20.; answer 20/20. ok", true},
		{"math operand copied wrong", datasets.KindMath, sum, "6 + 4 = 10\n10 + 4 = 14\n14 + 5 = 19\nAnswer: 19", "6/7! wrong", false},
		{"math last operand left out", datasets.KindMath, sum, "7 + 4 = 11\n11 + 4 = 15\nAnswer: 15", "7/7. 4/4. 4/4. -/5! wrong", false},
		{"math arithmetic slip", datasets.KindMath, sum, "7 + 4 = 11\n11 + 4 = 16\n16 + 5 = 21\nAnswer: 21", "7/7. 4/4. 4/4. 5/5.; 7 + 4 = 11/11., 11 + 4 = 16/15! wrong", false},
		{"math answer line differs", datasets.KindMath, sum, "7 + 4 = 11\n11 + 4 = 15\n15 + 5 = 20\nAnswer: 21", "7/7. 4/4. 4/4. 5/5.; 7 + 4 = 11/11., 11 + 4 = 15/15., 15 + 5 = 20/20.; answer 21/20! wrong", false},
		{"code stage differs", datasets.KindCode, code, fence("filter >3 | map +2"), "filter >3/filter >3. map +2/map *2! wrong", false},
		{"code extra stage", datasets.KindCode, code, fence("filter >3 | map *2 | sum"), "filter >3/filter >3. map *2/map *2. sum/-! wrong", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if line, ok := CandidateFirstCheck(tc.kind, tc.p, tc.solution); line != tc.line || ok != tc.ok {
				t.Errorf("CandidateFirstCheck = %q, %v; want %q, %v", line, ok, tc.line, tc.ok)
			}
			// the fidelity reading swaps the pair back
			if tc.kind == datasets.KindMath {
				slip, _ := FirstSlipCheck(tc.kind, tc.p, tc.solution)
				pp, pc, _ := sides(slip, false)
				cp, cc, _ := sides(tc.line, true)
				if pp != cp || pc != cc {
					t.Errorf("sides of %q = %q, %q; of the first-slip line %q, %q", tc.line, cp, cc, pp, pc)
				}
			}
		})
	}
}

// TestSharedPick checks the leading answer's first candidate (SharedPick)
// and its second, majority-repeat's selection (RepeatPick): the first
// candidate its line marks where three are shown, and a candidate of the
// leading answer where more are.
func TestSharedPick(t *testing.T) {
	for _, tc := range []struct {
		answers      []string
		want, repeat int
	}{
		{[]string{"46", "46", "47"}, 1, 2},
		{[]string{"47", "46", "46"}, 2, 3},
		{[]string{"46", "47", "46"}, 1, 3},
		{[]string{"46", "46", "46"}, 1, 2},
		{[]string{"46", "47", "48"}, 0, 0},
		{[]string{"", "", "47"}, 0, 0},
		{[]string{"1", "2", "1", "2"}, 0, 0},
		{[]string{"1", "2", "2", "1", "2"}, 2, 3},
		{[]string{"1", "2", "1", "2", "2"}, 2, 4},
		{nil, 0, 0},
	} {
		if got := SharedPick(tc.answers); got != tc.want {
			t.Errorf("SharedPick(%q) = %d, want %d", tc.answers, got, tc.want)
		}
		if got := RepeatPick(tc.answers); got != tc.repeat {
			t.Errorf("RepeatPick(%q) = %d, want %d", tc.answers, got, tc.repeat)
		}
	}
	if got := AnswersLine([]string{"46", "", "47"}); got != "Answers: 46; -; 47" {
		t.Errorf("AnswersLine = %q", got)
	}
}

// TestAdjacentAnswersLine checks the majority-adjacent line: each mark
// compares an answer with the one before it, candidate 1's answer closes
// the line, an empty answer equals nothing, and only synth-math answers
// are padded to two digits.
func TestAdjacentAnswersLine(t *testing.T) {
	for _, tc := range []struct {
		kind    string
		answers []string
		want    string
	}{
		{datasets.KindMath, []string{"45", "42", "42"}, "Answers: 45 *; 42 -; 42 +; 45 -"},
		{datasets.KindMath, []string{"9", "9", "19"}, "Answers: 09 *; 09 +; 19 -; 09 -"},
		{datasets.KindMath, []string{"45", "42", "45"}, "Answers: 45 *; 42 -; 45 -; 45 +"},
		{datasets.KindMath, []string{"", "", "7"}, "Answers: ? *; ? -; 07 -; ? -"},
		{datasets.KindMath, []string{"123", "-6", "123"}, "Answers: 123 *; -6 -; 123 -; 123 +"},
		{datasets.KindCode, []string{"sort | sum", "sort | sum", "rev"}, "Answers: sort | sum *; sort | sum +; rev -; sort | sum -"},
		{datasets.KindCode, []string{"7"}, "Answers: 7 *; 7 +"},
		{datasets.KindMath, nil, "Answers:"},
	} {
		if got := AdjacentAnswersLine(tc.kind, tc.answers); got != tc.want {
			t.Errorf("AdjacentAnswersLine(%s, %q) = %q, want %q", tc.kind, tc.answers, got, tc.want)
		}
	}
}

// TestMatchAnswersLine checks the lines that name candidates: majority-
// match's names the first earlier candidate with the same answer,
// majority-named's also numbers each answer, majority-tagged's names every
// answer by the first candidate with it, itself included, majority-
// repeat's marks an answer given before with its own number, and majority-
// compact's does the same over synth-code programs' short codes (a program
// that does not parse as it is). An empty answer matches nothing, and
// answers are written as the verifier reads them.
func TestMatchAnswersLine(t *testing.T) {
	match := func(a []string) string { return MatchAnswersLine(a, false) }
	named := func(a []string) string { return MatchAnswersLine(a, true) }
	code := func(a []string) string { return CompactAnswersLine(datasets.KindCode, a) }
	math := func(a []string) string { return CompactAnswersLine(datasets.KindMath, a) }
	for _, tc := range []struct {
		sel     string
		line    func([]string) string
		answers []string
		want    string
	}{
		{"match", match, []string{"45", "42", "42"}, "Answers: 45; 42; 42 =2"},
		{"match", match, []string{"9", "9", "9"}, "Answers: 9; 9 =1; 9 =1"},
		{"match", match, []string{"45", "42", "45"}, "Answers: 45; 42; 45 =1"},
		{"match", match, []string{"", "", "7"}, "Answers: ?; ?; 7"},
		{"match", match, []string{"123", "-6", "-6", "123", "-6"}, "Answers: 123; -6; -6 =2; 123 =1; -6 =2"},
		{"match", match, []string{"sort | sum", "rev", "sort | sum"}, "Answers: sort | sum; rev; sort | sum =1"},
		{"match", match, []string{"7"}, "Answers: 7"},
		{"match", match, nil, "Answers:"},
		{"named", named, []string{"45", "42", "42"}, "Answers: 1: 45; 2: 42; 3: 42 =2"},
		{"named", named, []string{"", "7", "", "7"}, "Answers: 1: ?; 2: 7; 3: ?; 4: 7 =2"},
		{"named", named, nil, "Answers:"},
		{"tagged", TaggedAnswersLine, []string{"28", "38", "28"}, "Answers: 28 =1; 38 =2; 28 =1"},
		{"tagged", TaggedAnswersLine, []string{"45", "42", "42"}, "Answers: 45 =1; 42 =2; 42 =2"},
		{"tagged", TaggedAnswersLine, []string{"9", "9", "9"}, "Answers: 9 =1; 9 =1; 9 =1"},
		{"tagged", TaggedAnswersLine, []string{"", "7", "", "7"}, "Answers: ?; 7 =2; ?; 7 =2"},
		{"tagged", TaggedAnswersLine, []string{"sort | sum", "rev", "sort | sum"}, "Answers: sort | sum =1; rev =2; sort | sum =1"},
		{"tagged", TaggedAnswersLine, []string{"7"}, "Answers: 7 =1"},
		{"tagged", TaggedAnswersLine, nil, "Answers:"},
		{"repeat", RepeatAnswersLine, []string{"28", "38", "28"}, "Answers: 28; 38; 28 =3"},
		{"repeat", RepeatAnswersLine, []string{"9", "9", "9"}, "Answers: 9; 9 =2; 9 =3"},
		{"repeat", RepeatAnswersLine, []string{"45", "42", "47"}, "Answers: 45; 42; 47"},
		{"repeat", RepeatAnswersLine, []string{"", "7", "", "7"}, "Answers: ?; 7; ?; 7 =4"},
		{"repeat", RepeatAnswersLine, []string{"sort | sum", "rev", "sort | sum"}, "Answers: sort | sum; rev; sort | sum =3"},
		{"repeat", RepeatAnswersLine, nil, "Answers:"},
		{"compact", code, []string{"map +3 | rev | drop 1", "map *3 | rev | drop 1", "map +3 | rev | drop 1"}, "Answers: +3rd1; *3rd1; +3rd1 =3"},
		{"compact", code, []string{"map -1 | last", "map -1 | last", "map -1 | first"}, "Answers: -1L; -1L =2; -1F"},
		{"compact", code, []string{"filter even | sum", "", "filter  even|sum"}, "Answers: eS; ?; eS =3"},
		{"compact", code, []string{"sort | sum", "sort | frob", "sort | frob"}, "Answers: sS; sort | frob; sort | frob =3"},
		{"compact", math, []string{"28", "38", "28"}, "Answers: 28; 38; 28 =3"},
		{"compact", code, nil, "Answers:"},
	} {
		if got := tc.line(tc.answers); got != tc.want {
			t.Errorf("%s line of %q = %q, want %q", tc.sel, tc.answers, got, tc.want)
		}
	}
}

// TestMajoritySelection checks the majority aggregators' transcripts (each
// pretrain.selection) on both tasks: the selection's answers line first;
// where an answer is shared by more candidates than any other, no check
// line and that answer's first candidate selected, under majority-repeat
// its second, the first its line marks (unless the transcript carries
// random-selection noise); else the recipe's check lines; and a
// correct candidate is selected whenever two or more are correct and no
// noise intervenes.
func TestMajoritySelection(t *testing.T) {
	for _, sel := range spec.Selections {
		t.Run(sel, func(t *testing.T) { testMajoritySelection(t, sel) })
	}
}

func testMajoritySelection(t *testing.T, sel string) {
	cfg := DefaultConfig()
	cfg.Supervisors = spec.SupervisorsCandidateFirst
	cfg.Selection = sel
	teacher, err := NewTeacher(cfg, testTasks(t), 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	shared, checked := 0, 0
	for i := int64(0); i < 1500; i++ {
		tr, err := teacher.Transcript(i)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Role != study.Aggregator || slices.Contains(tr.Noise, NoiseMalformed) {
			continue
		}
		src := teacher.sources[slices.IndexFunc(teacher.sources, func(s source) bool { return s.task.Name() == tr.Task })]
		answers := make([]string, len(tr.Shown))
		for k, c := range tr.Shown {
			answers[k] = candidateAnswer(src.task, tr.Problem, c)
		}
		lines := strings.Split(tr.Completion, "\n")
		if want := answersLineOf(sel, src.task.Kind(), answers); lines[0] != want {
			t.Fatalf("transcript %d: first line %q, want %q", i, lines[0], want)
		}
		k, ok, _ := workflow.ParseSelection(tr.Completion, len(tr.Shown))
		if !ok {
			t.Fatalf("transcript %d: no selection in %q", i, tr.Completion)
		}
		noisy := slices.Contains(tr.Noise, NoiseRandomSelection)
		if pick := majorityPickOf(sel, answers); pick > 0 {
			shared++
			if len(lines) != 2 {
				t.Fatalf("transcript %d: shared answer, yet check lines: %q", i, tr.Completion)
			}
			if !noisy && k != pick {
				t.Fatalf("transcript %d: selected %d, want %d (%q)", i, k, pick, answers)
			}
		} else {
			checked++
			if len(lines) < 3 {
				t.Fatalf("transcript %d: no shared answer and no check line: %q", i, tr.Completion)
			}
		}
		right := 0
		for _, c := range tr.ShownCorrect {
			if c {
				right++
			}
		}
		if right >= 2 && !noisy && !tr.ShownCorrect[k-1] {
			t.Fatalf("transcript %d: %d correct candidates, selected a wrong one: %q", i, right, tr.Completion)
		}
	}
	if shared < 20 || checked < 20 {
		t.Fatalf("shared %d, checked %d aggregator transcripts: want both kinds", shared, checked)
	}
}

// TestOutvotedOrder checks pretrain.outvoted: among the majority
// aggregator's turns with a leading answer and a candidate without it,
// candidate 1 is outvoted in about the asked share, and the candidates
// keep their correctness and the prompt's order through the reordering
// (unset, the streams stay those TestRecipeTranscriptsPinned pins).
func TestOutvotedOrder(t *testing.T) {
	cases := []struct {
		outvoted float64
		lo, hi   float64 // bounds on the measured share
	}{
		{0, 0.20, 0.40}, // as drawn: candidate 1 leads in most turns
		{0.5, 0.45, 0.55},
		{1, 1, 1},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.outvoted), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Supervisors = spec.SupervisorsCandidateFirst
			cfg.Selection = spec.SelectionMajorityNamed
			cfg.Outvoted = c.outvoted
			cfg.Roles = spec.PretrainRoles{Aggregator: 1}
			teacher, err := NewTeacher(cfg, testTasks(t), 3, 3)
			if err != nil {
				t.Fatal(err)
			}
			orderable, outvoted := 0, 0
			for i := int64(0); i < 3000; i++ {
				tr, err := teacher.Transcript(i)
				if err != nil {
					t.Fatal(err)
				}
				src := teacher.sources[slices.IndexFunc(teacher.sources, func(s source) bool { return s.task.Name() == tr.Task })]
				answers := make([]string, len(tr.Shown))
				for k, sol := range tr.Shown {
					v := src.task.Verify(context.Background(), tr.Problem, sol)
					answers[k] = answerText(v)
					if v.Correct != tr.ShownCorrect[k] {
						t.Fatalf("transcript %d: candidate %d correct %v, marked %v", i, k+1, v.Correct, tr.ShownCorrect[k])
					}
				}
				if want := workflow.AggregatorPrompt(tr.Problem, tr.Shown); !slices.Equal(tr.Prompt, want) {
					t.Fatalf("transcript %d: the prompt does not show the candidates in their order", i)
				}
				pick := SharedPick(answers)
				if pick == 0 || !slices.ContainsFunc(answers, func(a string) bool { return a != answers[pick-1] }) {
					continue
				}
				orderable++
				if answers[0] != answers[pick-1] {
					outvoted++
				}
			}
			if orderable < 500 {
				t.Fatalf("only %d aggregator turns with a leading answer and a candidate without it", orderable)
			}
			share := float64(outvoted) / float64(orderable)
			t.Logf("outvoted %g: candidate 1 outvoted in %d of %d turns (%.2f)", c.outvoted, outvoted, orderable, share)
			if share < c.lo || share > c.hi {
				t.Errorf("outvoted %g: share %.3f, want in [%g, %g]", c.outvoted, share, c.lo, c.hi)
			}
		})
	}
}
