// Package synthmath is the synth-math task of the CPU study: multi-step
// integer arithmetic such as "Compute 7 + 5 * 3 - 2." with a worked
// solution in a fixed step format and a final "Answer: N" line.
//
// Expressions use the usual precedence: every multiplication is done
// first, left to right, then additions and subtractions left to right.
// The worked solution shows one operation per line, "a op b = c", in that
// order, and ends with "Answer: N":
//
//	5 * 3 = 15
//	7 + 15 = 22
//	22 - 2 = 20
//	Answer: 20
//
// Operands are integers in [1, ValueMax]; intermediate and final results
// may be negative. Problem i of the train stream is a pure function of
// (Seed, i). Validation problems come from a separate stream and from the
// held-out share of the prompt space (datasets.HeldOut), which train
// problems never use, so no validation prompt equals any train prompt;
// validation prompts are also distinct from each other.
package synthmath

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/keyed"
)

// Name is the task's source name.
const Name = datasets.SourceSynthMath

// Config holds the task's seed and difficulty knobs.
type Config struct {
	Seed        uint64
	ValSize     int    // number of validation problems
	OperandsMin int    // fewest operands per expression (>= 2)
	OperandsMax int    // most operands per expression
	ValueMax    int    // operands are drawn from [1, ValueMax]
	Ops         string // operators to draw from, a non-empty subset of "+-*"
}

// DefaultConfig returns the defaults of the CPU study: 2-4 single-digit
// operands and all three operators.
func DefaultConfig() Config {
	return Config{Seed: 1, ValSize: 200, OperandsMin: 2, OperandsMax: 4, ValueMax: 9, Ops: "+-*"}
}

// Limits on the knobs, keeping prompts short and results inside int64.
const (
	maxOperands = 12
	maxValue    = 1_000_000
	maxValSize  = 100_000
	// maxMagnitude bounds ValueMax^OperandsMax so that no product overflows.
	maxMagnitude = 1e15
)

// Validate reports the first invalid knob.
func (c Config) Validate() error {
	switch {
	case c.ValSize < 0 || c.ValSize > maxValSize:
		return fmt.Errorf("synthmath: ValSize %d out of range [0, %d]", c.ValSize, maxValSize)
	case c.OperandsMin < 2:
		return fmt.Errorf("synthmath: OperandsMin %d must be at least 2", c.OperandsMin)
	case c.OperandsMax < c.OperandsMin:
		return fmt.Errorf("synthmath: OperandsMax %d is below OperandsMin %d", c.OperandsMax, c.OperandsMin)
	case c.OperandsMax > maxOperands:
		return fmt.Errorf("synthmath: OperandsMax %d exceeds %d", c.OperandsMax, maxOperands)
	case c.ValueMax < 1 || c.ValueMax > maxValue:
		return fmt.Errorf("synthmath: ValueMax %d out of range [1, %d]", c.ValueMax, maxValue)
	case c.Ops == "":
		return fmt.Errorf("synthmath: Ops is empty; want a subset of \"+-*\"")
	}
	for i := 0; i < len(c.Ops); i++ {
		if !strings.ContainsRune("+-*", rune(c.Ops[i])) {
			return fmt.Errorf("synthmath: Ops %q: operator %q is not one of \"+-*\"", c.Ops, string(c.Ops[i]))
		}
		if strings.IndexByte(c.Ops, c.Ops[i]) != i {
			return fmt.Errorf("synthmath: Ops %q repeats operator %q", c.Ops, string(c.Ops[i]))
		}
	}
	if math.Pow(float64(c.ValueMax), float64(c.OperandsMax)) > maxMagnitude {
		return fmt.Errorf("synthmath: ValueMax^OperandsMax = %d^%d exceeds %g; results could overflow",
			c.ValueMax, c.OperandsMax, float64(maxMagnitude))
	}
	return nil
}

// Task is the synth-math source; it implements datasets.Task.
type Task struct {
	cfg Config

	val datasets.ValidationOnce
}

var _ datasets.Task = (*Task)(nil)

// New validates cfg and returns the task.
func New(cfg Config) (*Task, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Task{cfg: cfg}, nil
}

// Config returns the task's configuration.
func (t *Task) Config() Config { return t.cfg }

// Name returns "synth-math".
func (t *Task) Name() string { return Name }

// Kind returns datasets.KindMath.
func (t *Task) Kind() string { return datasets.KindMath }

// Instructions tell the agent the step format and the answer line.
func (t *Task) Instructions() string {
	return "Do multiplications first, then go left to right. " +
		"Show one step per line as `a op b = c`. End with a line `Answer: N`."
}

// maxDraws bounds rejection sampling against the held-out prompt share.
const maxDraws = 1000

// Train returns problem i of the train stream.
func (t *Task) Train(i int64) (datasets.Problem, error) {
	if i < 0 {
		return datasets.Problem{}, fmt.Errorf("synthmath: negative train cursor %d", i)
	}
	rng := keyed.NewRNG(t.cfg.Seed, "synthmath/train", uint64(i))
	for d := 0; d < maxDraws; d++ {
		e := t.draw(rng)
		prompt := e.Prompt()
		if datasets.HeldOut(t.cfg.Seed, prompt) {
			continue
		}
		return makeProblem(fmt.Sprintf("sm-train-%06d", i), e), nil
	}
	return datasets.Problem{}, fmt.Errorf("synthmath: train problem %d: every one of %d draws fell in the held-out share", i, maxDraws)
}

// Validation returns the fixed validation set: ValSize distinct problems
// whose prompts lie in the held-out share of the prompt space. It fails
// when the knobs allow too few distinct held-out prompts.
func (t *Task) Validation() ([]datasets.Problem, error) {
	return t.val.Get(t.buildValidation)
}

func (t *Task) buildValidation() ([]datasets.Problem, error) {
	draw := func(j uint64) (Expr, string, bool) {
		e := t.draw(keyed.NewRNG(t.cfg.Seed, "synthmath/val", j))
		return e, e.Prompt(), true
	}
	return datasets.HeldOutValidation("synthmath", t.cfg.Seed, t.cfg.ValSize, draw, func(k int, e Expr) datasets.Problem {
		return makeProblem(fmt.Sprintf("sm-val-%04d", k), e)
	})
}

// draw generates one expression from rng.
func (t *Task) draw(rng *keyed.RNG) Expr {
	n := rng.Range(t.cfg.OperandsMin, t.cfg.OperandsMax)
	e := Expr{Operands: make([]int64, n), Ops: make([]byte, n-1)}
	for k := range e.Operands {
		e.Operands[k] = int64(rng.Range(1, t.cfg.ValueMax))
	}
	for k := range e.Ops {
		e.Ops[k] = t.cfg.Ops[rng.Intn(len(t.cfg.Ops))]
	}
	return e
}

func makeProblem(id string, e Expr) datasets.Problem {
	steps, ans := e.solve(-1, 0)
	return datasets.Problem{
		ID:       id,
		Prompt:   e.Prompt(),
		Truth:    strconv.FormatInt(ans, 10),
		Solution: Render(steps, ans),
	}
}

// Verify grades output against p.Truth: the last "Answer:" line must hold
// exactly the true integer.
func (t *Task) Verify(ctx context.Context, p datasets.Problem, output string) datasets.Verdict {
	return Verify(p, output)
}

// Verify is the context-free grader behind Task.Verify.
func Verify(p datasets.Problem, output string) datasets.Verdict {
	want, err := strconv.ParseInt(strings.TrimSpace(p.Truth), 10, 64)
	if err != nil {
		return datasets.Verdict{Reason: fmt.Sprintf("bad ground truth %q for %s", p.Truth, p.ID)}
	}
	ans, ok := ExtractAnswer(output)
	if !ok {
		return datasets.Verdict{Reason: "no answer line"}
	}
	got, ok := parseAnswer(ans)
	if !ok {
		return datasets.Verdict{Answer: ans, Reason: fmt.Sprintf("not an integer: %q", ans)}
	}
	if got != want {
		return datasets.Verdict{Answer: ans, Reason: fmt.Sprintf("wrong: got %d want %d", got, want)}
	}
	return datasets.Verdict{Correct: true, Answer: ans, Reason: "ok"}
}

var answerRE = regexp.MustCompile(`(?i)answer[ \t]*:[ \t]*([^\n]*)`)

// ExtractAnswer returns the text after the last "Answer:" in text
// (case-insensitive, spaces around the colon allowed), up to the end of
// its line and trimmed; ok is false when there is none.
func ExtractAnswer(text string) (string, bool) {
	m := answerRE.FindAllStringSubmatch(text, -1)
	if len(m) == 0 {
		return "", false
	}
	return strings.TrimSpace(m[len(m)-1][1]), true
}

// parseAnswer reads an integer answer, tolerating a leading "+", spaces
// after a sign and one trailing period.
func parseAnswer(s string) (int64, bool) {
	s = strings.TrimSuffix(strings.TrimSpace(s), ".")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = strings.TrimSpace(s[1:])
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}
