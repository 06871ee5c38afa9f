// Package workflowtest provides test doubles for the workflows and the
// training loop: a tiny addition task that meets datasets.Task, and
// simulated agents that play every role in the workflows' own output
// formats, with a chance of being right that grows with the adapter's skill
// in the fake engine. Everything is a pure function of its inputs.
package workflowtest

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
	"github.com/marlowlab/marlow/keyed"
)

// Task is a tiny math task: "Compute A + B." with small integers.
type Task struct {
	ValSize int // validation set size (default 8)
}

// Name implements datasets.Task.
func (Task) Name() string { return "test-add" }

// Kind implements datasets.Task.
func (Task) Kind() string { return datasets.KindMath }

// Instructions implements datasets.Task.
func (Task) Instructions() string { return "End with a line `Answer: N`." }

func problem(id string, key uint64) datasets.Problem {
	h := keyed.SplitMix64(key)
	a, b := int(h%50), int((h>>20)%50)
	s := a + b
	return datasets.Problem{
		ID:       id,
		Prompt:   fmt.Sprintf("Compute %d + %d.", a, b),
		Truth:    strconv.Itoa(s),
		Solution: fmt.Sprintf("%d + %d = %d\nAnswer: %d", a, b, s, s),
	}
}

// Train implements datasets.Task.
func (Task) Train(i int64) (datasets.Problem, error) {
	if i < 0 {
		return datasets.Problem{}, fmt.Errorf("test-add: negative train cursor %d", i)
	}
	return problem(fmt.Sprintf("train-%d", i), uint64(i)), nil
}

// Validation implements datasets.Task.
func (t Task) Validation() ([]datasets.Problem, error) {
	n := t.ValSize
	if n == 0 {
		n = 8
	}
	out := make([]datasets.Problem, n)
	for i := range out {
		out[i] = problem(fmt.Sprintf("val-%d", i), uint64(1<<40+i))
	}
	return out, nil
}

// Verify implements datasets.Task: the last line "Answer: N" must equal the
// truth.
func (Task) Verify(_ context.Context, p datasets.Problem, output string) datasets.Verdict {
	ans, ok := answer(output)
	if !ok {
		return datasets.Verdict{Reason: "no Answer line"}
	}
	if ans != p.Truth {
		return datasets.Verdict{Answer: ans, Reason: "wrong answer " + ans}
	}
	return datasets.Verdict{Correct: true, Answer: ans, Reason: "ok"}
}

func answer(text string) (string, bool) {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "Answer:"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// RoleOf identifies the role of a prompt by its system message.
func RoleOf(msgs []engine.Message) string {
	if len(msgs) == 0 {
		return ""
	}
	for _, r := range workflow.AllRoles {
		s := workflow.SystemPrompt(r, "", 1)
		if i := strings.Index(s, "."); i > 0 && strings.HasPrefix(msgs[0].Content, s[:i+1]) {
			return r
		}
	}
	return ""
}

// Agents simulates every role. The chance that an agent does its job right
// is sigmoid(Bias + skill); Malformed is the chance of an output without the
// role's format; TooMany the orchestrator's chance of proposing one strategy
// more than allowed.
type Agents struct {
	Bias      float64
	Malformed float64
	TooMany   float64
	MaxSub    int // orchestrator's allowed strategies (default 3)
}

// uniform returns the n-th uniform draw in [0, 1) of a request.
func uniform(seed uint64, n int) float64 {
	return float64(keyed.SplitMix64(seed+uint64(n)*0x632be59bd9b4e019)>>11) / float64(1<<53)
}

// truth computes the sum in the problem line of a user message.
func truth(user string) int {
	line := strings.SplitN(user, "\n", 2)[0]
	var a, b int
	fmt.Sscanf(strings.TrimPrefix(line, "Problem: "), "Compute %d + %d.", &a, &b)
	return a + b
}

// Respond is a fake.Responder.
func (g Agents) Respond(req engine.Request, skill float64) string {
	p := 1 / (1 + math.Exp(-(g.Bias + skill)))
	user := req.Messages[len(req.Messages)-1].Content
	s := truth(user)
	right := uniform(req.Seed, 0) < p
	malformed := uniform(req.Seed, 1) < g.Malformed
	solve := func(right bool) string {
		if malformed {
			return "it is about " + strconv.Itoa(s)
		}
		if right {
			return fmt.Sprintf("sum %d\nAnswer: %d", s, s)
		}
		return fmt.Sprintf("sum %d\nAnswer: %d", s+1, s+1)
	}
	switch RoleOf(req.Messages) {
	case study.Generator, study.Worker:
		return solve(right)
	case study.Evaluator:
		if malformed {
			return "looks fine"
		}
		sol := user[strings.Index(user, "Solution:\n")+len("Solution:\n"):]
		ans, _ := answer(sol)
		isRight := ans == strconv.Itoa(s)
		return workflow.FormatVerdict(isRight == right, "check the sum")
	case study.Aggregator, study.Synthesizer:
		cands := strings.Count(user, ":\n")
		best := 0
		for i := 1; i <= cands; i++ {
			if strings.Contains(user, fmt.Sprintf(" %d:\nsum %d\nAnswer: %d", i, s, s)) {
				best = i
				break
			}
		}
		pick := 1 + int(uniform(req.Seed, 2)*float64(cands))
		if right && best > 0 {
			pick = best
		}
		if RoleOf(req.Messages) == study.Synthesizer {
			return solve(right && best > 0 || pick == best)
		}
		if malformed {
			return "the " + strconv.Itoa(pick) + " one"
		}
		return workflow.FormatSelection(pick)
	case study.Orchestrator:
		max := g.MaxSub
		if max == 0 {
			max = 3
		}
		n := 2
		if uniform(req.Seed, 3) < g.TooMany {
			n = max + 1
		}
		list := make([]string, n)
		for i := range list {
			list[i] = "way " + strconv.Itoa(i+1)
		}
		if malformed {
			return "just add them"
		}
		return workflow.FormatStrategies(list)
	}
	return "?"
}
