package pretrain

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthcode"
	"github.com/marlowlab/marlow/datasets/synthmath"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/keyed"
)

// The problem-check recipe (pretrain.supervisors: problem-check) gives the
// evaluator and the aggregator a check of each candidate against the
// problem itself, on both synthetic tasks:
//
//   - synth-math: the operands the problem gives, in the order the worked
//     solution uses them, then the operands the candidate used, "same" or
//     "differ", then the candidate's steps re-done (StepCheck's parts),
//     and "ok" only when the operands are the same and every step and the
//     answer line are right: "3 4 5 / 3 5 5 differ; 3 + 5 = 8, 8 + 5 = 13
//     wrong". The step check alone passes a candidate that copied an
//     operand wrong and added it right, the base generators' most common
//     error; the operand lists catch it.
//   - synth-code: the stages the task line asks for, each followed by
//     "not" and the candidate's stage where that differs ("missing" where
//     the candidate has none, "extra" for a stage beyond them), then "ok"
//     or "wrong": "filter >3, map *2 not map +2 wrong".
//
// The wrong candidates these two roles are shown are, on synth-math,
// operands copied wrong (OperandSlip) two times in three and an arithmetic
// slip (synthmath.Perturb) otherwise; on synth-code the near misses of
// synthcode.Perturb. The evaluator writes "Check: " and its candidate's
// line before the default recipe's verdict; the aggregator writes one
// line per candidate up to the first whose check is ok, and selects it,
// else the first of the most common answer (MajorityPick). Every other
// role's transcripts are the default recipe's.

// operandSlipShare is the share of the problem-check recipe's wrong
// synth-math candidates that copy an operand wrong (the rest carry an
// arithmetic slip).
const operandSlipShare = 2.0 / 3

// CheckFunc writes a recipe's check line of a candidate solution for
// problem p of a task of kind (datasets.KindMath or KindCode) and says
// whether the check passed.
type CheckFunc func(kind string, p datasets.Problem, solution string) (line string, ok bool)

// problemCheckOf is the check of a recipe that checks candidates against
// the problem (problem-check: ProblemCheck; pair-check: PairCheck;
// first-slip: FirstSlipCheck; candidate-first: CandidateFirstCheck), else
// nil.
func problemCheckOf(recipe string) CheckFunc {
	switch recipe {
	case spec.SupervisorsProblemCheck:
		return ProblemCheck
	case spec.SupervisorsPairCheck:
		return PairCheck
	case spec.SupervisorsFirstSlip:
		return FirstSlipCheck
	case spec.SupervisorsCandidateFirst:
		return CandidateFirstCheck
	}
	return nil
}

// checkOf is the check line the supervisors of recipe write on a task of
// kind: problemCheckOf's, or the step check (StepCheck) of the skilled
// recipe on synth-math; nil where the recipe writes none.
func checkOf(recipe, kind string) CheckFunc {
	if c := problemCheckOf(recipe); c != nil {
		return c
	}
	if recipe == spec.SupervisorsSkilled && kind == datasets.KindMath {
		return func(_ string, _ datasets.Problem, solution string) (string, bool) { return StepCheck(solution) }
	}
	return nil
}

// problemChecker is problemCheckOf the transcript's recipe.
func (r *rendering) problemChecker() CheckFunc { return problemCheckOf(r.t.cfg.Supervisors) }

// checkedSolution is solution for the problem-check recipe's supervisors:
// with probability pWrong a wrong candidate (on synth-math, of a kind
// drawn from pretrain.wrong_math where it is set, else OperandSlip for
// most and synthmath.Perturb for the rest; on synth-code the task's
// Perturb), otherwise the teacher's own.
func (t *Teacher) checkedSolution(src source, p datasets.Problem, rng *keyed.RNG, pWrong float64) (string, bool, error) {
	if !rng.Bernoulli(pWrong) {
		return src.tidy(p.Solution), true, nil
	}
	if src.task.Kind() == datasets.KindMath && t.cfg.WrongMath != nil {
		s, err := WrongMathCandidate(p, *t.cfg.WrongMath, rng)
		return s, false, err
	}
	if src.task.Kind() == datasets.KindMath && rng.Bernoulli(operandSlipShare) {
		s, err := OperandSlip(p, rng)
		return s, false, err
	}
	s, err := src.perturb(p, rng)
	if err != nil {
		return "", false, err
	}
	return src.tidy(s), false, nil
}

// OperandSlip returns a worked solution of synth-math problem p that
// copied one operand wrong and did every step right: an operand off by
// one or two, an operand replaced by its neighbour's value, or (with
// three operands or more) an operand left out, chosen by rng among those
// that change the answer. The error names the problem when its prompt
// does not parse or no slip changed the answer.
func OperandSlip(p datasets.Problem, rng *keyed.RNG) (string, error) {
	e, err := synthmath.Parse(p.Prompt)
	if err != nil {
		return "", fmt.Errorf("pretrain: operand slip of %s: %w", p.ID, err)
	}
	_, truth := e.Solve()
	n := len(e.Operands)
	for try := 0; try < 32; try++ {
		alt := synthmath.Expr{Operands: append([]int64{}, e.Operands...), Ops: append([]byte{}, e.Ops...)}
		i := rng.Intn(n)
		switch kind := rng.Intn(3); {
		case kind == 2 && n >= 3:
			alt.Operands = append(alt.Operands[:i], alt.Operands[i+1:]...)
			op := max(i-1, 0)
			alt.Ops = append(alt.Ops[:op], alt.Ops[op+1:]...)
		case kind == 1:
			j := i + 1
			if i == n-1 {
				j = i - 1
			}
			alt.Operands[i] = alt.Operands[j]
		default:
			d := []int64{-2, -1, 1, 2}[rng.Intn(4)]
			alt.Operands[i] += d
			if alt.Operands[i] < 0 {
				continue
			}
		}
		steps, ans := alt.Solve()
		if ans != truth && len(steps) > 0 {
			return synthmath.Render(steps, ans), nil
		}
	}
	return "", fmt.Errorf("pretrain: operand slip of %s: no slip changed the answer", p.ID)
}

// SolutionOperands reads the operands a synth-math worked solution used,
// in the order it used them: each step's two operands, except one that
// equals an earlier step's result not yet used (a carried value, each
// result carried once).
func SolutionOperands(solution string) []int64 {
	var out, open []int64
	take := func(v int64) {
		for k, r := range open {
			if r == v {
				open = append(open[:k], open[k+1:]...)
				return
			}
		}
		out = append(out, v)
	}
	for _, st := range synthmath.Steps(solution) {
		take(st.A)
		take(st.B)
		open = append(open, st.Result)
	}
	return out
}

// ProblemCheck is the problem-check recipe's check line of solution, a
// candidate for problem p of a task of kind (datasets.KindMath or
// KindCode), and whether the check passed (see the recipe's comment).
func ProblemCheck(kind string, p datasets.Problem, solution string) (line string, ok bool) {
	if kind == datasets.KindCode {
		return codeCheck(p, solution)
	}
	return mathCheck(p, solution)
}

func mathCheck(p datasets.Problem, solution string) (string, bool) {
	want := SolutionOperands(p.Solution)
	got := SolutionOperands(solution)
	same := len(want) == len(got)
	for k := 0; same && k < len(want); k++ {
		same = want[k] == got[k]
	}
	parts, stepsOK := stepParts(solution)
	var b strings.Builder
	b.WriteString(joinInts(want))
	b.WriteString(" / ")
	b.WriteString(joinInts(got))
	if same {
		b.WriteString(" same; ")
	} else {
		b.WriteString(" differ; ")
	}
	if len(parts) > 0 {
		b.WriteString(strings.Join(parts, ", "))
		b.WriteByte(' ')
	}
	ok := same && stepsOK
	if ok {
		b.WriteString("ok")
	} else {
		b.WriteString("wrong")
	}
	return b.String(), ok
}

func joinInts(xs []int64) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(intStrings(xs), " ")
}

// codePrograms parses the program problem p asks for and the one a
// synth-code candidate wrote; when either fails, fail is the whole check
// line to write instead.
func codePrograms(p datasets.Problem, solution string) (want, got synthcode.Program, fail string) {
	lim := synthcode.DefaultLimits()
	want, err := synthcode.Parse(p.Truth, lim)
	if err != nil {
		return nil, nil, "no reference wrong"
	}
	src, found := synthcode.ExtractProgram(solution)
	if !found {
		return nil, nil, "no program wrong"
	}
	if got, err = synthcode.Parse(src, lim); err != nil {
		return nil, nil, "no program wrong"
	}
	return want, got, ""
}

func codeCheck(p datasets.Problem, solution string) (string, bool) {
	want, got, fail := codePrograms(p, solution)
	if fail != "" {
		return fail, false
	}
	ok := true
	parts := make([]string, 0, max(len(want), len(got)))
	for k := 0; k < max(len(want), len(got)); k++ {
		switch {
		case k >= len(want):
			parts = append(parts, "extra "+got[k].String())
			ok = false
		case k >= len(got):
			parts = append(parts, want[k].String()+" missing")
			ok = false
		case want[k] != got[k]:
			parts = append(parts, want[k].String()+" not "+got[k].String())
			ok = false
		default:
			parts = append(parts, want[k].String())
		}
	}
	word := "wrong"
	if ok {
		word = "ok"
	}
	return strings.Join(parts, ", ") + " " + word, ok
}

// problemSelection is the aggregator of the recipes that check against the
// problem (problemCheckOf): one check line per candidate up to the first
// whose check passed, which it selects; with none passed, the first of the
// most common answer (MajorityPick); at the noise rate a random candidate
// instead.
func (r *rendering) problemSelection() error {
	kind := r.src.task.Kind()
	answers := r.shownAnswers()
	lines := make([]string, 0, len(r.tr.Shown)+2)
	if r.t.cfg.Selection != "" {
		lines = append(lines, answersLineOf(r.t.cfg.Selection, kind, answers))
		if k := majorityPickOf(r.t.cfg.Selection, answers); k > 0 {
			r.selectAfterChecks(lines, k, answers)
			return nil
		}
	}
	k := 0
	for i, c := range r.tr.Shown {
		if k > 0 {
			continue
		}
		line, ok := r.problemChecker()(kind, r.p, c)
		lines = append(lines, strconv.Itoa(i+1)+": "+line)
		if ok {
			k = i + 1
		}
	}
	r.selectAfterChecks(lines, k, answers)
	return nil
}
