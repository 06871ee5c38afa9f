// Package workflow runs workflow declarations (package study: the four
// built-in ones, single, eval-opt, voting and orch-workers, and those a
// workflow file declares) as batched, deterministic episodes over an
// engine.Engine.
//
// It owns everything about what agents see and say: the prompt layout of
// each role kind (marlow's own short wording, parameterised by the role and
// the task's instructions), the output formats of the kinds that do not
// answer the problem directly (verdicts, selections, strategy lists)
// together with tolerant parsers that are strict about compliance, and the
// per-request seed derivation. The pretraining teacher renders its
// transcripts with these same builders and formatting functions, so a
// format is written down once.
//
// One interpreter (Interp, interp.go) runs every declaration: a
// per-episode state machine that asks for the calls of the next stage and
// absorbs their completions by kind into typed state (verdicts, the
// selected candidate, the strategies, and how each supervisory turn was
// read, fallbacks included). Lookup derives a workflow's roles, settings
// check and turn counts from its declaration. Runner.Run drives the
// episodes stage-synchronously: every agent call of one stage, across all
// (problem, rollout) episodes of a batch, goes to the engine in a single
// Generate call. Every agent's own answer is regraded with the task's
// verifier, so per-agent correctness is known as well as the broadcast
// outcome.
package workflow

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/study"
)

// AllRoles lists every role type (the registry's, study.Roles), sorted.
var AllRoles = func() []string {
	out := slices.Clone(study.Roles)
	slices.Sort(out)
	return out
}()

// SystemPrompt is the fixed system message of a role. instructions are the
// task's answer-format instructions (datasets.Task.Instructions) and are
// appended for the roles that write an answer; maxSubtasks is used by the
// orchestrator only. The text is deliberately short: the tiny CPU models read
// it with a context of about a thousand characters.
func SystemPrompt(role, instructions string, maxSubtasks int) string {
	var s string
	switch role {
	case study.Generator:
		s = "You are the generator. Solve the problem."
	case study.Evaluator:
		return "You are the evaluator. Check the solution. Reply `Verdict: Correct` or `Verdict: Incorrect`, then `Feedback:` and one line."
	case study.Aggregator:
		return "You are the aggregator. Pick the best candidate. End with `Selected: K`."
	case study.Orchestrator:
		return fmt.Sprintf("You are the orchestrator. Do not solve. Give at most %d distinct strategies, one per line: `Strategy K: ...`.", maxSubtasks)
	case study.Worker:
		s = "You are a worker. Solve the problem with the given strategy."
	case study.Synthesizer:
		s = "You are the synthesizer. Compare the solutions and give the final answer."
	default:
		// A declared role: its kind's wording.
		switch study.RoleOf(role).Kind {
		case study.Answerer:
			s = "You are the " + role + ". Solve the problem."
		case study.Judge:
			return "You are the " + role + ". Check the solution. Reply `Verdict: Correct` or `Verdict: Incorrect`, then `Feedback:` and one line."
		case study.Selector:
			return "You are the " + role + ". Pick the best candidate. End with `Selected: K`."
		case study.Planner:
			return fmt.Sprintf("You are the %s. Do not solve. Give at most %d distinct strategies, one per line: `Strategy K: ...`.", role, maxSubtasks)
		case study.SynthesizerKind:
			s = "You are the " + role + ". Compare the solutions and give the final answer."
		default:
			return ""
		}
	}
	if instructions = strings.TrimSpace(instructions); instructions != "" {
		s += " " + instructions
	}
	return s
}

func chat(system, user string) []engine.Message {
	return []engine.Message{{Role: "system", Content: system}, {Role: "user", Content: user}}
}

func problemLine(p datasets.Problem) string {
	return "Problem: " + strings.TrimSpace(p.Prompt)
}

// The prompt layouts of the role kinds. Each takes the role whose system
// prompt it opens with; the exported builders below are the built-in
// roles' (the pretraining teacher renders with them).

// answerPrompt: an answerer that sees the problem only.
func answerPrompt(role, instructions string, p datasets.Problem) []engine.Message {
	return chat(SystemPrompt(role, instructions, 0), problemLine(p))
}

// revisionPrompt: an answerer in a loop's later round after its judge's
// Incorrect or unparsable verdict.
func revisionPrompt(role, instructions string, p datasets.Problem, previous, feedback string) []engine.Message {
	var b strings.Builder
	b.WriteString(problemLine(p))
	b.WriteString("\nPrevious solution:\n")
	b.WriteString(strings.TrimSpace(previous))
	b.WriteString("\nFeedback: ")
	if f := strings.TrimSpace(feedback); f != "" {
		b.WriteString(f)
	} else {
		b.WriteString("none")
	}
	b.WriteString("\nIt was judged wrong. Try a different approach.")
	return chat(SystemPrompt(role, instructions, 0), b.String())
}

// debatePrompt: an answerer in a loop's later round that sees its own
// previous answer and the other agents' previous answers, numbered from 1.
func debatePrompt(role, instructions string, p datasets.Problem, own string, others []string) []engine.Message {
	var b strings.Builder
	b.WriteString(problemLine(p))
	b.WriteString("\nYour previous answer:\n")
	b.WriteString(strings.TrimSpace(own))
	b.WriteString(numbered("Other answer", others))
	b.WriteString("\nWeigh the other answers, then answer again.")
	return chat(SystemPrompt(role, instructions, 0), b.String())
}

// judgePrompt: a judge reading one solution (FormatVerdict's output).
func judgePrompt(role string, p datasets.Problem, solution string) []engine.Message {
	return chat(SystemPrompt(role, "", 0), problemLine(p)+"\nSolution:\n"+strings.TrimSpace(solution))
}

// selectorPrompt: a selector reading the candidates, numbered from 1
// (FormatSelection's output).
func selectorPrompt(role string, p datasets.Problem, candidates []string) []engine.Message {
	return chat(SystemPrompt(role, "", 0), problemLine(p)+numbered("Candidate", candidates))
}

// plannerPrompt: a planner asked for at most most strategies
// (FormatStrategies' output).
func plannerPrompt(role string, p datasets.Problem, most int) []engine.Message {
	return chat(SystemPrompt(role, "", most), problemLine(p))
}

// strategyPrompt: an answerer of a planner's fan-out, with one strategy;
// an empty one (the planner proposed none) leaves the method to it.
func strategyPrompt(role, instructions string, p datasets.Problem, strategy string) []engine.Message {
	s := strings.TrimSpace(strategy)
	if s == "" {
		s = "any"
	}
	return chat(SystemPrompt(role, instructions, 0), problemLine(p)+"\nStrategy: "+s)
}

// synthesizerPrompt: a synthesizer reading the solutions, numbered from 1;
// it answers in the task's format.
func synthesizerPrompt(role, instructions string, p datasets.Problem, solutions []string) []engine.Message {
	return chat(SystemPrompt(role, instructions, 0), problemLine(p)+numbered("Solution", solutions))
}

// GeneratorPrompt is the first (or only) generator turn: the problem and the
// task's answer instructions. The single workflow's generator, eval-opt's
// first turn and every voting generator use it.
func GeneratorPrompt(instructions string, p datasets.Problem) []engine.Message {
	return answerPrompt(study.Generator, instructions, p)
}

// RevisionPrompt is an eval-opt generator turn after an Incorrect or
// unparsable verdict: the problem, the generator's previous solution and the
// evaluator's feedback, with a request for a different approach.
func RevisionPrompt(instructions string, p datasets.Problem, previous, feedback string) []engine.Message {
	return revisionPrompt(study.Generator, instructions, p, previous, feedback)
}

// DebatePrompt is a debate generator's later turn: its previous answer
// and the other generators'.
func DebatePrompt(instructions string, p datasets.Problem, own string, others []string) []engine.Message {
	return debatePrompt(study.Generator, instructions, p, own, others)
}

// EvaluatorPrompt asks the evaluator to judge one solution. Its expected
// output is FormatVerdict's.
func EvaluatorPrompt(p datasets.Problem, solution string) []engine.Message {
	return judgePrompt(study.Evaluator, p, solution)
}

// AggregatorPrompt shows the aggregator every candidate, numbered from 1.
// Its expected output is FormatSelection's.
func AggregatorPrompt(p datasets.Problem, candidates []string) []engine.Message {
	return selectorPrompt(study.Aggregator, p, candidates)
}

// OrchestratorPrompt asks for at most maxSubtasks strategies. Its expected
// output is FormatStrategies'.
func OrchestratorPrompt(p datasets.Problem, maxSubtasks int) []engine.Message {
	return plannerPrompt(study.Orchestrator, p, maxSubtasks)
}

// WorkerPrompt asks a worker to solve the whole problem with one strategy.
// An empty strategy (the orchestrator proposed none) leaves the method to
// the worker.
func WorkerPrompt(instructions string, p datasets.Problem, strategy string) []engine.Message {
	return strategyPrompt(study.Worker, instructions, p, strategy)
}

// SynthesizerPrompt shows the synthesizer the workers' solutions, numbered
// from 1; it answers in the task's format.
func SynthesizerPrompt(instructions string, p datasets.Problem, solutions []string) []engine.Message {
	return synthesizerPrompt(study.Synthesizer, instructions, p, solutions)
}

// RenderPrompt renders chat messages as plain text for logs: each message
// as "[role]" on its own line followed by its content.
func RenderPrompt(msgs []engine.Message) string {
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("[")
		b.WriteString(m.Role)
		b.WriteString("]\n")
		b.WriteString(m.Content)
	}
	return b.String()
}

// numbered renders candidates as "<label> 1:\n...\n<label> 2:\n...".
func numbered(label string, texts []string) string {
	var b strings.Builder
	for i, t := range texts {
		b.WriteString("\n")
		b.WriteString(label)
		b.WriteString(" ")
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString(":\n")
		b.WriteString(strings.TrimSpace(t))
	}
	return b.String()
}
