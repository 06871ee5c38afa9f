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
//
// The first-slip recipe (pretrain.supervisors: first-slip) writes the
// same line up to its first "!" and ends it there with "wrong"
// ("7/6! wrong"; "7/7. 4/4.; 7 + 4 = 11/11., 11 + 4 = 15/16! wrong"), so
// that each closing word follows the mark just before it: pilot 11's
// marks followed their pairs (0.997 on synth-math) while its closing word
// followed the marks of the long synth-math lines in only 0.647.
//
// The candidate-first recipe (pretrain.supervisors: candidate-first) is
// first-slip with each pair written the candidate's item first:
// "6/7! wrong"; "7/7. 4/4.; 7 + 4 = 11/11., 11 + 4 = 16/15! wrong". Pilot
// 14's first-slip lines worked each step out right and then wrote that
// same value again for the candidate's ("22 + 9 = 31/31." for a candidate
// that wrote 32), so the right item of a pair was predicted from the left
// one, not read. Here the step's left-hand side and the candidate's
// result are copied together from the candidate's line, and the right
// result is worked out after them.

// pairLine is a check line being written pair by pair; slip is its length
// just after its first "!" (0 while there is none), so the check passes
// exactly when slip is 0.
type pairLine struct {
	strings.Builder
	slip int
	pairStyle
}

// pairStyle is how a recipe writes its pair-check lines.
type pairStyle struct {
	firstSlip      bool // the line ends at its first "!" with "wrong"
	candidateFirst bool // each pair is written "got/want"
}

// pair writes "want/got" ("got/want" candidate first) and its mark.
func (l *pairLine) pair(want, got string) {
	a, b := want, got
	if l.candidateFirst {
		a, b = got, want
	}
	l.WriteString(a)
	l.WriteByte('/')
	l.WriteString(b)
	if want == got {
		l.WriteByte('.')
		return
	}
	l.mark()
}

// mark writes a "!" (a pair that differs, or a part that is missing).
func (l *pairLine) mark() {
	l.WriteByte('!')
	if l.slip == 0 {
		l.slip = l.Len()
	}
}

// end closes the line with " ok" or " wrong" (closeCheck), cut after its
// first "!" when firstSlip is set, and says whether the check passed.
func (l *pairLine) end() (string, bool) {
	ok := l.slip == 0
	if l.firstSlip && !ok {
		return l.String()[:l.slip] + " wrong", false
	}
	return closeCheck(&l.Builder, ok), ok
}

// PairCheck is the pair-check recipe's check line of solution, a
// candidate for problem p of a task of kind (datasets.KindMath or
// KindCode), and whether the check passed (see the recipe's comment).
func PairCheck(kind string, p datasets.Problem, solution string) (line string, ok bool) {
	return pairCheck(kind, p, solution, pairStyle{})
}

// FirstSlipCheck is the first-slip recipe's check line: PairCheck's, up
// to its first "!", then "wrong".
func FirstSlipCheck(kind string, p datasets.Problem, solution string) (line string, ok bool) {
	return pairCheck(kind, p, solution, pairStyle{firstSlip: true})
}

// CandidateFirstCheck is the candidate-first recipe's check line:
// FirstSlipCheck's with each pair written the candidate's item first.
func CandidateFirstCheck(kind string, p datasets.Problem, solution string) (line string, ok bool) {
	return pairCheck(kind, p, solution, pairStyle{firstSlip: true, candidateFirst: true})
}

func pairCheck(kind string, p datasets.Problem, solution string, style pairStyle) (string, bool) {
	if kind == datasets.KindCode {
		return codePairs(p, solution, style)
	}
	return mathPairs(p, solution, style)
}

func mathPairs(p datasets.Problem, solution string, style pairStyle) (string, bool) {
	l := pairLine{pairStyle: style}
	l.pairLists(intStrings(SolutionOperands(p.Solution)), intStrings(SolutionOperands(solution)), " ")
	l.WriteString("; ")
	steps := synthmath.Steps(solution)
	if len(steps) == 0 {
		l.WriteString("no steps")
		l.mark()
	}
	for i, st := range steps {
		if i > 0 {
			l.WriteString(", ")
		}
		fmt.Fprintf(&l, "%d %c %d = ", st.A, st.Op, st.B)
		l.pair(strconv.FormatInt(st.Right(), 10), strconv.FormatInt(st.Result, 10))
	}
	l.WriteString("; answer ")
	last := "-"
	if len(steps) > 0 {
		last = strconv.FormatInt(steps[len(steps)-1].Result, 10)
	}
	ans, found := answerLine(solution)
	if !found {
		ans = "-" // never a step's result, so the pair is marked
	}
	l.pair(last, ans)
	return l.end()
}

func codePairs(p datasets.Problem, solution string, style pairStyle) (string, bool) {
	want, got, fail := codePrograms(p, solution)
	if fail != "" {
		return fail, false
	}
	l := pairLine{pairStyle: style}
	l.pairLists(stageStrings(want), stageStrings(got), " ")
	return l.end()
}

// pairLists writes want and got pair by pair ("-" for the shorter list's
// missing items), joined by sep.
func (l *pairLine) pairLists(want, got []string, sep string) {
	for k := 0; k < max(len(want), len(got)); k++ {
		if k > 0 {
			l.WriteString(sep)
		}
		w, g := "-", "-"
		if k < len(want) {
			w = want[k]
		}
		if k < len(got) {
			g = got[k]
		}
		l.pair(w, g)
	}
	if len(want) == 0 && len(got) == 0 {
		l.WriteString("none")
	}
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
