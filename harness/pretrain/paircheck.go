package pretrain

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthcode"
	"github.com/marlowlab/marlow/datasets/synthmath"
)

// The pair-check recipe (pretrain.supervisors: pair-check) is the
// problem-check recipe (same candidates, same roles, same selection rule)
// with a check line whose every decision sits beside the two things it
// compares. Pilot 10 (seeds/README.md) read the problem and the candidate
// right in over 96% of its problem-check lines and still judged them near
// chance: one "same" or "differ" after two lists asks a small model to
// compare every pair at once. Here each pair is written "want/got" and
// marked at once, "." when they agree and "!" when they differ, and the
// closing "ok" or "wrong" only has to see whether a "!" was written:
//
//   - synth-math: the problem's operands beside the candidate's ("7/6!",
//     "-" where one list is shorter), then each of the candidate's steps
//     re-done with its right result beside the candidate's
//     ("11 + 4 = 15/16!"), then the last step's result beside the answer
//     line's ("answer 20/20."):
//     "7/6! 4/4. 4/4. 5/5.; 6 + 4 = 10/10., 10 + 4 = 14/14., 14 + 5 = 19/19.; answer 19/19. wrong"
//   - synth-code: each stage the task line asks for beside the
//     candidate's: "filter >3/filter >3. map *2/map +2! wrong".
//
// The check passes exactly when the problem-check recipe's does.

// pair writes "want/got" and its mark, and reports whether they agree.
func pair(b *strings.Builder, want, got string) bool {
	b.WriteString(want)
	b.WriteByte('/')
	b.WriteString(got)
	if want == got {
		b.WriteByte('.')
		return true
	}
	b.WriteByte('!')
	return false
}

// PairCheck is the pair-check recipe's check line of solution, a
// candidate for problem p of a task of kind (datasets.KindMath or
// KindCode), and whether the check passed (see the recipe's comment).
func PairCheck(kind string, p datasets.Problem, solution string) (line string, ok bool) {
	if kind == datasets.KindCode {
		return codePairs(p, solution)
	}
	return mathPairs(p, solution)
}

func mathPairs(p datasets.Problem, solution string) (string, bool) {
	var b strings.Builder
	ok := pairLists(&b, intStrings(SolutionOperands(p.Solution)), intStrings(SolutionOperands(solution)), " ")
	b.WriteString("; ")
	steps := synthmath.Steps(solution)
	if len(steps) == 0 {
		b.WriteString("no steps!")
		ok = false
	}
	for i, st := range steps {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %c %d = ", st.A, st.Op, st.B)
		ok = pair(&b, strconv.FormatInt(st.Right(), 10), strconv.FormatInt(st.Result, 10)) && ok
	}
	b.WriteString("; answer ")
	last := "-"
	if len(steps) > 0 {
		last = strconv.FormatInt(steps[len(steps)-1].Result, 10)
	}
	ans, found := answerLine(solution)
	if !found {
		ans = "-"
	}
	ok = pair(&b, last, ans) && found && len(steps) > 0 && ok
	return closeCheck(&b, ok), ok
}

func codePairs(p datasets.Problem, solution string) (string, bool) {
	want, got, fail := codePrograms(p, solution)
	if fail != "" {
		return fail, false
	}
	var b strings.Builder
	ok := pairLists(&b, stageStrings(want), stageStrings(got), " ")
	return closeCheck(&b, ok), ok
}

// pairLists writes want and got pair by pair ("-" for the shorter list's
// missing items), joined by sep, and reports whether every pair agreed.
func pairLists(b *strings.Builder, want, got []string, sep string) bool {
	ok := true
	for k := 0; k < max(len(want), len(got)); k++ {
		if k > 0 {
			b.WriteString(sep)
		}
		w, g := "-", "-"
		if k < len(want) {
			w = want[k]
		}
		if k < len(got) {
			g = got[k]
		}
		ok = pair(b, w, g) && ok
	}
	if len(want) == 0 && len(got) == 0 {
		b.WriteString("none")
	}
	return ok
}

// closeCheck ends a check line with " ok" or " wrong".
func closeCheck(b *strings.Builder, ok bool) string {
	if ok {
		b.WriteString(" ok")
	} else {
		b.WriteString(" wrong")
	}
	return b.String()
}

func intStrings(xs []int64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.FormatInt(x, 10)
	}
	return out
}

func stageStrings(p synthcode.Program) []string {
	out := make([]string, len(p))
	for i, st := range p {
		out[i] = st.String()
	}
	return out
}
