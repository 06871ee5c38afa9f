// Package synthcode is the synth-code task of the CPU study: the answer to
// each problem is a short program in a small pipeline language over a list
// of integers (see Parse for the grammar), interpreted in Go and checked
// against hidden tests; an output is correct only when every hidden test
// passes, as in DeepCoder.
//
// A prompt describes a hidden reference program in short English and shows
// a few input/output examples:
//
//	List task: keep those above 3, then double each, then return the sum.
//	Examples:
//	[3 1 5 7] -> 24
//	[4 0 2] -> 8
//
// The agent answers with the program in a fenced code block; the last
// fenced block of its output is graded. The teacher solution traces the
// first example stage by stage and gives the reference program:
//
//	Trace [3 1 5 7]: [5 7] [10 14] 24
//	```
//	filter >3 | map *2 | sum
//	```
//
// Generation rejects programs whose outputs are constant over the tests,
// programs with a stage whose removal changes no test output, and programs
// with no near-miss variant that fails a hidden test, so every problem has
// informative tests and a Perturb result. Problem i of the train stream is
// a pure function of (Seed, i); validation problems come from a separate
// stream and from the held-out share of the prompt space
// (datasets.HeldOut), which train problems never use, so no validation
// prompt equals a train prompt. The interpreter runs untrusted text under
// step, length and magnitude limits and needs no sandbox: it has no I/O.
package synthcode

import (
	"context"
	"fmt"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/keyed"
)

// Name is the task's source name.
const Name = datasets.SourceSynthCode

// Config holds the task's seed and difficulty knobs.
type Config struct {
	Seed       uint64
	ValSize    int     // number of validation problems
	StagesMin  int     // fewest stages per program, reducer included
	StagesMax  int     // most stages per program
	ReduceProb float64 // probability that a program of 2+ stages ends in a reducer
	ValueMax   int     // list elements are drawn from [0, ValueMax]
	ListMin    int     // shortest test input list
	ListMax    int     // longest test input list
	Examples   int     // input/output examples shown in the prompt
	Hidden     int     // hidden tests used by Verify
}

// DefaultConfig returns the defaults of the CPU study.
func DefaultConfig() Config {
	return Config{Seed: 1, ValSize: 200, StagesMin: 2, StagesMax: 3, ReduceProb: 0.6,
		ValueMax: 9, ListMin: 3, ListMax: 6, Examples: 2, Hidden: 5}
}

// MaxPrompt is the longest generated prompt; longer draws are redrawn.
const MaxPrompt = 160

// Validate reports the first invalid knob.
func (c Config) Validate() error {
	switch {
	case c.ValSize < 0 || c.ValSize > 100_000:
		return fmt.Errorf("synthcode: ValSize %d out of range [0, 100000]", c.ValSize)
	case c.StagesMin < 1 || c.StagesMax < c.StagesMin || c.StagesMax > 6:
		return fmt.Errorf("synthcode: stages [%d, %d] invalid; want 1 <= StagesMin <= StagesMax <= 6", c.StagesMin, c.StagesMax)
	case !(c.ReduceProb >= 0 && c.ReduceProb <= 1):
		return fmt.Errorf("synthcode: ReduceProb %v out of range [0, 1]", c.ReduceProb)
	case c.ValueMax < 2 || c.ValueMax > 99:
		return fmt.Errorf("synthcode: ValueMax %d out of range [2, 99]", c.ValueMax)
	case c.ListMin < 1 || c.ListMax < c.ListMin || c.ListMax > 10:
		return fmt.Errorf("synthcode: list lengths [%d, %d] invalid; want 1 <= ListMin <= ListMax <= 10", c.ListMin, c.ListMax)
	case c.Examples < 1 || c.Examples > 4:
		return fmt.Errorf("synthcode: Examples %d out of range [1, 4]", c.Examples)
	case c.Hidden < 1 || c.Hidden > 20:
		return fmt.Errorf("synthcode: Hidden %d out of range [1, 20]", c.Hidden)
	}
	return nil
}

// Task is the synth-code source; it implements datasets.Task.
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

// Name returns "synth-code".
func (t *Task) Name() string { return Name }

// Kind returns datasets.KindCode.
func (t *Task) Kind() string { return datasets.KindCode }

// Instructions describe the language and the answer format.
func (t *Task) Instructions() string {
	return "Write a pipeline program inside a ``` fenced code block, e.g.\n```\nfilter >3 | map *2 | sum\n```\n" +
		"Stages: map +k/-k/*k, filter >k/<k/even/odd, sort, rev, take k, drop k; " +
		"it may end with sum, max, min, len, first or last."
}

const maxDraws = 2000

// Train returns problem i of the train stream.
func (t *Task) Train(i int64) (datasets.Problem, error) {
	if i < 0 {
		return datasets.Problem{}, fmt.Errorf("synthcode: negative train cursor %d", i)
	}
	rng := keyed.NewRNG(t.cfg.Seed, "synthcode/train", uint64(i))
	for d := 0; d < maxDraws; d++ {
		g, ok := t.draw(rng)
		if !ok || datasets.HeldOut(t.cfg.Seed, g.prompt) {
			continue
		}
		return g.problem(fmt.Sprintf("sc-train-%06d", i)), nil
	}
	return datasets.Problem{}, fmt.Errorf("synthcode: train problem %d: no acceptable draw in %d tries; loosen the knobs", i, maxDraws)
}

// Validation returns the fixed validation set: ValSize problems with
// distinct prompts from the held-out share of the prompt space.
func (t *Task) Validation() ([]datasets.Problem, error) {
	return t.val.Get(t.buildValidation)
}

func (t *Task) buildValidation() ([]datasets.Problem, error) {
	draw := func(j uint64) (generated, string, bool) {
		g, ok := t.draw(keyed.NewRNG(t.cfg.Seed, "synthcode/val", j))
		return g, g.prompt, ok
	}
	return datasets.HeldOutValidation("synthcode", t.cfg.Seed, t.cfg.ValSize, draw, func(k int, g generated) datasets.Problem {
		return g.problem(fmt.Sprintf("sc-val-%04d", k))
	})
}

// Verify grades output: the program in its last fenced code block must
// pass every hidden test of p.
func (t *Task) Verify(ctx context.Context, p datasets.Problem, output string) datasets.Verdict {
	return Verify(ctx, p, output)
}

// Verify is the grader behind Task.Verify. Reasons: "no code block",
// "syntax error ...", "no hidden tests", "test N: bad input ...",
// "test N: runtime error: ...", "test N: got X want Y", or "ok".
func Verify(ctx context.Context, p datasets.Problem, output string) datasets.Verdict {
	src, ok := ExtractProgram(output)
	if !ok {
		return datasets.Verdict{Reason: "no code block"}
	}
	v := datasets.Verdict{Answer: src}
	lim := DefaultLimits()
	prog, err := Parse(src, lim)
	if err != nil {
		v.Reason = err.Error()
		return v
	}
	if len(p.Tests) == 0 {
		v.Reason = fmt.Sprintf("no hidden tests for %s", p.ID)
		return v
	}
	for k, tc := range p.Tests {
		if err := ctx.Err(); err != nil {
			v.Reason = fmt.Sprintf("canceled before test %d: %v", k+1, err)
			return v
		}
		in, err := ParseList(tc.Input)
		if err != nil {
			v.Reason = fmt.Sprintf("test %d: bad input: %v", k+1, err)
			return v
		}
		got, err := Run(prog, in, lim)
		if err != nil {
			v.Reason = fmt.Sprintf("test %d: runtime error: %v", k+1, err)
			return v
		}
		if s := got.String(); s != strings.TrimSpace(tc.Output) {
			v.Reason = fmt.Sprintf("test %d: got %s want %s", k+1, s, strings.TrimSpace(tc.Output))
			return v
		}
	}
	v.Correct = true
	v.Reason = "ok"
	return v
}

// ExtractProgram returns the content of the last complete ``` fenced block
// in text, trimmed; ok is false when there is none. The rest of the
// opening fence's line is an info string (e.g. "text") and is dropped
// unless it starts like a program, so "```sum```" and "```\nsum\n```" both
// give "sum".
func ExtractProgram(text string) (string, bool) {
	var fences []int
	for i := 0; ; {
		j := strings.Index(text[i:], "```")
		if j < 0 {
			break
		}
		fences = append(fences, i+j)
		i += j + 3
	}
	if len(fences) < 2 {
		return "", false
	}
	last := len(fences) / 2 * 2 // fences pair up in order: open, close, ...
	body := text[fences[last-2]+3 : fences[last-1]]
	if nl := strings.IndexByte(body, '\n'); nl >= 0 {
		info := strings.TrimSpace(body[:nl])
		if info == "" || !startsLikeProgram(info) {
			body = body[nl+1:]
		}
	}
	return strings.TrimSpace(body), true
}

func startsLikeProgram(line string) bool {
	word := line
	if i := strings.IndexAny(line, " \t|"); i >= 0 {
		word = line[:i]
	}
	switch word {
	case "map", "filter", "sort", "rev", "take", "drop", "sum", "max", "min", "len", "first", "last":
		return true
	}
	return false
}
