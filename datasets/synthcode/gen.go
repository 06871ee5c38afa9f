package synthcode

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/keyed"
)

// generated is one drawn problem before it gets an id.
type generated struct {
	prog     Program
	examples []datasets.Test
	hidden   []datasets.Test
	prompt   string
}

func (g generated) problem(id string) datasets.Problem {
	first, _ := ParseList(g.examples[0].Input)
	return datasets.Problem{
		ID:       id,
		Prompt:   g.prompt,
		Truth:    g.prog.String(),
		Solution: render(g.prog, first),
		Tests:    g.hidden,
	}
}

// draw generates one candidate problem; ok is false when the draw is
// rejected (see the package doc), and the caller draws again from the same
// stream.
func (t *Task) draw(rng *keyed.RNG) (generated, bool) {
	c := t.cfg
	prog := t.drawProgram(rng)
	inputs := make([][]int64, c.Examples+c.Hidden)
	for k := range inputs {
		xs := make([]int64, rng.Range(c.ListMin, c.ListMax))
		for j := range xs {
			xs[j] = int64(rng.Range(0, c.ValueMax))
		}
		inputs[k] = xs
	}
	outs, ok := outputs(prog, inputs)
	if !ok {
		return generated{}, false
	}
	distinct := false
	for _, o := range outs[1:] {
		distinct = distinct || o != outs[0]
	}
	if !distinct {
		return generated{}, false
	}
	// Every stage must matter on the tests.
	for s := range prog {
		rest := append(append(Program{}, prog[:s]...), prog[s+1:]...)
		if len(rest) == 0 {
			break
		}
		if o, ok := outputs(rest, inputs); ok && equal(o, outs) {
			return generated{}, false
		}
	}
	g := generated{prog: prog}
	for k, xs := range inputs {
		tc := datasets.Test{Input: FormatList(xs), Output: outs[k]}
		if k < c.Examples {
			g.examples = append(g.examples, tc)
		} else {
			g.hidden = append(g.hidden, tc)
		}
	}
	hasMiss := false
	for _, alt := range nearMisses(prog) {
		if failsSome(alt, g.hidden) {
			hasMiss = true
			break
		}
	}
	if !hasMiss {
		return generated{}, false
	}
	g.prompt = prompt(prog, g.examples)
	if len(g.prompt) > MaxPrompt {
		return generated{}, false
	}
	return g, true
}

func (t *Task) drawProgram(rng *keyed.RNG) Program {
	c := t.cfg
	n := rng.Range(c.StagesMin, c.StagesMax)
	reduce := n >= 2 && rng.Bernoulli(c.ReduceProb)
	prog := make(Program, 0, n)
	for len(prog) < n {
		if reduce && len(prog) == n-1 {
			prog = append(prog, Stage{Op: reducerNames[rng.Intn(len(reducerNames))]})
			break
		}
		st := drawTransform(rng, c.ValueMax)
		if len(prog) > 0 && prog[len(prog)-1].Op == st.Op {
			continue // no two stages of the same kind in a row
		}
		prog = append(prog, st)
	}
	return prog
}

var reducerNames = []string{"sum", "max", "min", "len", "first", "last"}

// drawTransform draws a list-to-list stage; map and filter are drawn three
// times as often as the others.
func drawTransform(rng *keyed.RNG, valueMax int) Stage {
	switch r := rng.Intn(10); {
	case r < 3:
		switch rng.Intn(3) {
		case 0:
			return Stage{Op: "map", Sym: "+", K: int64(rng.Range(1, 5))}
		case 1:
			return Stage{Op: "map", Sym: "-", K: int64(rng.Range(1, 5))}
		default:
			return Stage{Op: "map", Sym: "*", K: int64(rng.Range(2, 4))}
		}
	case r < 6:
		switch rng.Intn(4) {
		case 0:
			return Stage{Op: "filter", Sym: ">", K: int64(rng.Range(1, valueMax-1))}
		case 1:
			return Stage{Op: "filter", Sym: "<", K: int64(rng.Range(1, valueMax-1))}
		case 2:
			return Stage{Op: "filter", Sym: "even"}
		default:
			return Stage{Op: "filter", Sym: "odd"}
		}
	case r == 6:
		return Stage{Op: "sort"}
	case r == 7:
		return Stage{Op: "rev"}
	case r == 8:
		return Stage{Op: "take", K: int64(rng.Range(1, 3))}
	default:
		return Stage{Op: "drop", K: int64(rng.Range(1, 3))}
	}
}

// outputs runs prog on every input; ok is false on any runtime error.
func outputs(prog Program, inputs [][]int64) ([]string, bool) {
	out := make([]string, len(inputs))
	for k, xs := range inputs {
		v, err := Run(prog, xs, DefaultLimits())
		if err != nil {
			return nil, false
		}
		out[k] = v.String()
	}
	return out, true
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// failsSome reports whether prog fails at least one test.
func failsSome(prog Program, tests []datasets.Test) bool {
	for _, tc := range tests {
		xs, err := ParseList(tc.Input)
		if err != nil {
			return true
		}
		v, err := Run(prog, xs, DefaultLimits())
		if err != nil || v.String() != tc.Output {
			return true
		}
	}
	return false
}

// phrase describes one stage in English.
func phrase(s Stage) string {
	k := strconv.FormatInt(s.K, 10)
	switch s.Op {
	case "map":
		switch {
		case s.Sym == "+":
			return "add " + k + " to each"
		case s.Sym == "-":
			return "subtract " + k + " from each"
		case s.K == 2:
			return "double each"
		case s.K == 3:
			return "triple each"
		default:
			return "multiply each by " + k
		}
	case "filter":
		switch s.Sym {
		case ">":
			return "keep those above " + k
		case "<":
			return "keep those below " + k
		default:
			return "keep the " + s.Sym + " ones"
		}
	case "sort":
		return "sort them"
	case "rev":
		return "reverse them"
	case "take":
		return "keep the first " + k
	case "drop":
		return "drop the first " + k
	case "sum":
		return "return the sum"
	case "max":
		return "return the largest"
	case "min":
		return "return the smallest"
	case "len":
		return "return the count"
	case "first":
		return "return the first"
	default:
		return "return the last"
	}
}

// Describe renders prog as the English task line of a prompt, e.g.
// "keep those above 3, then double each, then return the sum".
func Describe(prog Program) string {
	parts := make([]string, len(prog))
	for i, s := range prog {
		parts[i] = phrase(s)
	}
	return strings.Join(parts, ", then ")
}

func prompt(prog Program, examples []datasets.Test) string {
	var b strings.Builder
	b.WriteString("List task: ")
	b.WriteString(Describe(prog))
	b.WriteString(".\nExamples:")
	for _, e := range examples {
		b.WriteString("\n")
		b.WriteString(e.Input)
		b.WriteString(" -> ")
		b.WriteString(e.Output)
	}
	return b.String()
}

// Examples parses the shown examples back out of a prompt.
func Examples(prompt string) []datasets.Test {
	out := []datasets.Test{}
	for _, line := range strings.Split(prompt, "\n") {
		in, o, ok := strings.Cut(line, " -> ")
		if !ok {
			continue
		}
		if _, err := ParseList(in); err != nil {
			continue
		}
		out = append(out, datasets.Test{Input: strings.TrimSpace(in), Output: strings.TrimSpace(o)})
	}
	return out
}

// Trace renders the value after each stage of prog on input, e.g.
// "Trace [3 1 5 7]: [5 7] [10 14] 24"; a runtime error ends the trace with
// "error".
func Trace(prog Program, input []int64) string {
	var b strings.Builder
	b.WriteString("Trace ")
	b.WriteString(FormatList(input))
	b.WriteString(":")
	for s := range prog {
		b.WriteByte(' ')
		v, err := Run(prog[:s+1], input, DefaultLimits())
		if err != nil {
			b.WriteString("error")
			break
		}
		b.WriteString(v.String())
	}
	return b.String()
}

// render writes a worked solution: the trace line and the fenced program.
func render(prog Program, input []int64) string {
	return Trace(prog, input) + "\n```\n" + prog.String() + "\n```"
}

// nearMisses lists the programs one small edit away from prog, in a fixed
// order: a constant off by one or two, or one operation swapped for a
// related one.
func nearMisses(prog Program) []Program {
	var out []Program
	with := func(i int, s Stage) {
		alt := append(Program{}, prog...)
		alt[i] = s
		out = append(out, alt)
	}
	for i, s := range prog {
		consts := func(lo int64) {
			for _, d := range []int64{-2, -1, 1, 2} {
				if k := s.K + d; k >= lo {
					t := s
					t.K = k
					with(i, t)
				}
			}
		}
		switch s.Op {
		case "map":
			consts(1)
			for _, sym := range []string{"+", "-", "*"} {
				if sym != s.Sym {
					t := s
					t.Sym = sym
					with(i, t)
				}
			}
		case "filter":
			switch s.Sym {
			case "even":
				with(i, Stage{Op: "filter", Sym: "odd"})
			case "odd":
				with(i, Stage{Op: "filter", Sym: "even"})
			case ">":
				consts(0)
				with(i, Stage{Op: "filter", Sym: "<", K: s.K})
			default:
				consts(0)
				with(i, Stage{Op: "filter", Sym: ">", K: s.K})
			}
		case "take", "drop":
			consts(0)
			other := map[string]string{"take": "drop", "drop": "take"}[s.Op]
			with(i, Stage{Op: other, K: s.K})
		case "sort":
			with(i, Stage{Op: "rev"})
		case "rev":
			with(i, Stage{Op: "sort"})
		default:
			for _, r := range reducerNames {
				if r != s.Op {
					with(i, Stage{Op: r})
				}
			}
		}
	}
	return out
}

// Perturb returns a worked solution for p whose program is a near miss of
// the reference (a constant off by one or two, or a related operation),
// chosen by rng among those that fail at least one hidden test, with the
// trace line recomputed for it. It fails when p's reference program does
// not parse or no near miss fails a hidden test (generated problems always
// have one).
func Perturb(p datasets.Problem, rng *keyed.RNG) (string, error) {
	src, ok := ExtractProgram(p.Solution)
	if !ok {
		src = p.Truth
	}
	prog, err := Parse(src, DefaultLimits())
	if err != nil {
		return "", fmt.Errorf("synthcode: perturb %s: reference program: %w", p.ID, err)
	}
	cands := nearMisses(prog)
	rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	var input []int64
	if ex := Examples(p.Prompt); len(ex) > 0 {
		input, _ = ParseList(ex[0].Input)
	}
	for _, alt := range cands {
		if failsSome(alt, p.Tests) {
			return render(alt, input), nil
		}
	}
	return "", fmt.Errorf("synthcode: perturb %s: none of %d near misses fails a hidden test", p.ID, len(cands))
}
