package pretrain

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthmath"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
	"github.com/marlowlab/marlow/keyed"
)

// The kinds of wrong synth-math solutions (spec.WrongMathKinds): a
// checking recipe can show its supervisors wrong candidates in a stated
// mix of them (pretrain.wrong_math; WrongMathCandidate), and calibration
// sorts the base generators' wrong solutions into the same kinds
// (MathErrorKind), so that the mix can be matched to the errors the
// supervisors will meet.

// WrongMathCandidate returns a wrong worked solution of synth-math
// problem p of a kind drawn from the shares of w (spec.WrongMath): an
// arithmetic slip carried to the answer (synthmath.Perturb), the last
// operand left out, an operand copied wrong (OperandSlip), or every step
// right and an answer line that differs from the last step's result.
// Where the last operand cannot be left out (fewer than three operands, or
// its absence keeps the answer) it writes an operand slip instead. The
// error names the problem when its prompt does not parse or no slip of
// the kind changed the answer.
func WrongMathCandidate(p datasets.Problem, w spec.WrongMath, rng *keyed.RNG) (string, error) {
	weights := w.Weights()
	sum := 0.0
	for _, v := range weights {
		sum += max(v, 0)
	}
	u, kind := rng.Float64()*sum, len(weights)-1
	for k, v := range weights {
		if u < max(v, 0) {
			kind = k
			break
		}
		u -= max(v, 0)
	}
	switch spec.WrongMathKinds[kind] {
	case spec.WrongSlip:
		return synthmath.Perturb(p, rng)
	case spec.WrongOperand:
		return OperandSlip(p, rng)
	}
	e, err := synthmath.Parse(p.Prompt)
	if err != nil {
		return "", fmt.Errorf("pretrain: wrong candidate of %s: %w", p.ID, err)
	}
	steps, ans := e.Solve()
	if spec.WrongMathKinds[kind] == spec.WrongAnswer {
		d := []int64{-10, -2, -1, 1, 2, 10}[rng.Intn(6)]
		return synthmath.Render(steps, ans+d), nil
	}
	n := len(e.Operands) // spec.WrongDropLast
	if n < 3 {
		return OperandSlip(p, rng)
	}
	short := synthmath.Expr{Operands: e.Operands[:n-1], Ops: e.Ops[:n-2]}
	steps, got := short.Solve()
	if got == ans {
		return OperandSlip(p, rng)
	}
	return synthmath.Render(steps, got), nil
}

// KindOther is MathErrorKind's kind of a wrong solution that is none of
// spec.WrongMathKinds (no steps, or more than one kind of error).
const KindOther = "other"

// MathErrorKind sorts a wrong worked solution of synth-math problem p
// into one of spec.WrongMathKinds, by what it did against the teacher's
// solution: "slip" (the problem's operands and a wrong step), "drop_last"
// (every step right on the operands less the last), "operand" (every
// step right on other operands), "answer" (the problem's operands, every
// step right, and an answer line that is not the last step's result, or
// none), else KindOther. It reads operands as SolutionOperands does.
func MathErrorKind(p datasets.Problem, solution string) string {
	want, got := SolutionOperands(p.Solution), SolutionOperands(solution)
	steps := synthmath.Steps(solution)
	if len(steps) == 0 {
		return KindOther
	}
	stepsOK := true
	for _, st := range steps {
		stepsOK = stepsOK && st.Correct()
	}
	same := slices.Equal(want, got)
	switch {
	case same && !stepsOK:
		return spec.WrongSlip
	case !stepsOK:
		return KindOther
	case len(want) > 0 && slices.Equal(want[:len(want)-1], got):
		return spec.WrongDropLast
	case !same:
		return spec.WrongOperand
	}
	if ans, found := answerLine(solution); !found || ans != strconv.FormatInt(steps[len(steps)-1].Result, 10) {
		return spec.WrongAnswer
	}
	return KindOther
}

// GeneratorErrors counts a workflow's generator turns at base, the first
// answers only (eval-opt's revisions answer feedback and are left out),
// and sorts the wrong ones by MathErrorKind.
type GeneratorErrors struct {
	Turns, Wrong int
	Kinds        map[string]int // by spec.WrongMathKinds and KindOther
}

func generatorErrorsOf(eps []*workflow.Episode) GeneratorErrors {
	g := GeneratorErrors{Kinds: map[string]int{}}
	for _, ep := range eps {
		for _, tu := range ep.Turns {
			if tu.Role != study.Generator || tu.Iteration > 0 || !tu.Graded {
				continue
			}
			g.Turns++
			if !tu.Verdict.Correct {
				g.Wrong++
				g.Kinds[MathErrorKind(ep.Problem, tu.Completion.Text)]++
			}
		}
	}
	return g
}

// errorsMarkdown writes the table of the base generators' wrong synth-math
// answers by kind, the mix pretrain.wrong_math can be matched to.
func (c Calibration) errorsMarkdown(b *strings.Builder) {
	rows := c.rowsWith(func(r CalRow) bool { return r.Errors != nil && r.Errors.Turns > 0 })
	if len(rows) == 0 {
		return
	}
	kinds := append(slices.Clone(spec.WrongMathKinds), KindOther)
	b.WriteString("\n### Wrong generator answers by kind\n\n")
	b.WriteString("The generators' first answers (eval-opt's revisions left out) that are wrong, sorted by the kinds of pretrain.wrong_math " +
		"(MathErrorKind): slip, a wrong step with the problem's operands; drop_last, right steps on the operands less the last; " +
		"operand, right steps on other operands; answer, right steps and an answer line that is not the last result; other, the rest. " +
		"A checking recipe's wrong candidates can be set to this mix.\n\n")
	b.WriteString("| task | workflow | generator turns | wrong | " + strings.Join(kinds, " | ") + " |\n")
	b.WriteString("|---|---|---:|---:|" + strings.Repeat("---:|", len(kinds)) + "\n")
	for _, r := range rows {
		e := *r.Errors
		fmt.Fprintf(b, "| %s | %s | %d | %d |", r.Task, r.Workflow, e.Turns, e.Wrong)
		for _, k := range kinds {
			fmt.Fprintf(b, " %d |", e.Kinds[k])
		}
		b.WriteByte('\n')
	}
}
