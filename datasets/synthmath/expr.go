package synthmath

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/keyed"
)

// Expr is an arithmetic expression: Operands[0] Ops[0] Operands[1] ...
type Expr struct {
	Operands []int64
	Ops      []byte // each '+', '-' or '*'; len(Ops) == len(Operands)-1
}

// Prompt renders the problem statement, e.g. "Compute 7 + 5 * 3 - 2.".
func (e Expr) Prompt() string {
	var b strings.Builder
	b.WriteString("Compute ")
	for k, v := range e.Operands {
		if k > 0 {
			b.WriteByte(' ')
			b.WriteByte(e.Ops[k-1])
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(v, 10))
	}
	b.WriteByte('.')
	return b.String()
}

// Parse reads a prompt written by Prompt back into an expression.
func Parse(prompt string) (Expr, error) {
	body, ok := strings.CutPrefix(strings.TrimSpace(prompt), "Compute ")
	if !ok {
		return Expr{}, fmt.Errorf("synthmath: prompt %q does not start with \"Compute \"", prompt)
	}
	body, ok = strings.CutSuffix(body, ".")
	if !ok {
		return Expr{}, fmt.Errorf("synthmath: prompt %q does not end with \".\"", prompt)
	}
	f := strings.Fields(body)
	if len(f) < 3 || len(f)%2 == 0 {
		return Expr{}, fmt.Errorf("synthmath: prompt %q: want operands separated by operators", prompt)
	}
	var e Expr
	for k, tok := range f {
		if k%2 == 1 {
			if len(tok) != 1 || !strings.Contains("+-*", tok) {
				return Expr{}, fmt.Errorf("synthmath: prompt %q: token %d %q is not an operator", prompt, k+1, tok)
			}
			e.Ops = append(e.Ops, tok[0])
			continue
		}
		v, err := strconv.ParseInt(tok, 10, 64)
		if err != nil || v < 0 || v > maxValue {
			return Expr{}, fmt.Errorf("synthmath: prompt %q: token %d %q is not an operand in [0, %d]", prompt, k+1, tok, maxValue)
		}
		e.Operands = append(e.Operands, v)
	}
	if len(e.Operands) > maxOperands {
		return Expr{}, fmt.Errorf("synthmath: prompt %q has %d operands, more than %d", prompt, len(e.Operands), maxOperands)
	}
	return e, nil
}

// Step is one line of a worked solution: A Op B = Result.
type Step struct {
	A, B   int64
	Op     byte
	Result int64
}

// String renders the step as "a op b = c".
func (s Step) String() string {
	return fmt.Sprintf("%d %c %d = %d", s.A, s.Op, s.B, s.Result)
}

// Right is the step's right result: its operation applied to its operands.
func (s Step) Right() int64 { return apply(s.A, s.Op, s.B) }

// Correct reports whether the step's arithmetic is right.
func (s Step) Correct() bool {
	return apply(s.A, s.Op, s.B) == s.Result
}

func apply(a int64, op byte, b int64) int64 {
	switch op {
	case '+':
		return a + b
	case '-':
		return a - b
	default:
		return a * b
	}
}

// Solve returns the worked steps and the value of e.
func (e Expr) Solve() ([]Step, int64) { return e.solve(-1, 0) }

// solve evaluates e in the documented order. When slip >= 0 the result of
// step number slip is off by delta and the error is carried through the
// later steps.
func (e Expr) solve(slip int, delta int64) ([]Step, int64) {
	steps := []Step{}
	do := func(a int64, op byte, b int64) int64 {
		r := apply(a, op, b)
		if len(steps) == slip {
			r += delta
		}
		steps = append(steps, Step{A: a, B: b, Op: op, Result: r})
		return r
	}
	// Additive terms: each is a run of factors joined by '*'.
	var terms []int64
	var signs []byte
	cur := e.Operands[0]
	for k, op := range e.Ops {
		next := e.Operands[k+1]
		if op == '*' {
			cur = do(cur, '*', next)
			continue
		}
		terms = append(terms, cur)
		signs = append(signs, op)
		cur = next
	}
	terms = append(terms, cur)
	acc := terms[0]
	for k, op := range signs {
		acc = do(acc, op, terms[k+1])
	}
	return steps, acc
}

// Render writes steps one per line followed by "Answer: N".
func Render(steps []Step, answer int64) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteString(s.String())
		b.WriteByte('\n')
	}
	b.WriteString("Answer: ")
	b.WriteString(strconv.FormatInt(answer, 10))
	return b.String()
}

// Steps parses the "a op b = c" lines of a worked solution, skipping lines
// of any other shape (such as the Answer line).
func Steps(solution string) []Step {
	out := []Step{}
	for _, line := range strings.Split(solution, "\n") {
		f := strings.Fields(line)
		if len(f) != 5 || f[3] != "=" || len(f[1]) != 1 || !strings.Contains("+-*", f[1]) {
			continue
		}
		a, err1 := strconv.ParseInt(f[0], 10, 64)
		b, err2 := strconv.ParseInt(f[2], 10, 64)
		c, err3 := strconv.ParseInt(f[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, Step{A: a, B: b, Op: f[1][0], Result: c})
	}
	return out
}

// slipDeltas are the arithmetic slips Perturb chooses from.
var slipDeltas = []int64{-10, -2, -1, 1, 2, 10}

// Perturb returns a worked solution of p with exactly one wrong step
// result, chosen by rng, carried through the later steps to a wrong final
// answer. Because operands are nonzero, every later step keeps the error,
// so the final answer always differs from p.Truth. The error names the
// problem when its prompt cannot be parsed.
func Perturb(p datasets.Problem, rng *keyed.RNG) (string, error) {
	e, err := Parse(p.Prompt)
	if err != nil {
		return "", fmt.Errorf("synthmath: perturb %s: %w", p.ID, err)
	}
	clean, truth := e.Solve()
	for try := 0; try < 16; try++ {
		slip := rng.Intn(len(clean))
		delta := slipDeltas[rng.Intn(len(slipDeltas))]
		if s := clean[slip]; s.Op == '*' && rng.Bernoulli(0.5) {
			// Off by one factor, as in 7 * 6 = 48 for 42.
			delta = s.A
			if rng.Bernoulli(0.5) {
				delta = -s.A
			}
			if delta == 0 {
				delta = 1
			}
		}
		steps, ans := e.solve(slip, delta)
		if ans != truth {
			return Render(steps, ans), nil
		}
	}
	return "", fmt.Errorf("synthmath: perturb %s: no slip changed the answer", p.ID)
}
