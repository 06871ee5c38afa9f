package pretrain

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthcode"
	"github.com/marlowlab/marlow/datasets/synthmath"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/keyed"
)

// Noise kinds recorded on a Transcript.
const (
	NoiseSlip            = "slip"             // the completion's solution carries a Perturb error
	NoiseWrongVerdict    = "wrong-verdict"    // the evaluator's verdict is flipped
	NoiseRandomSelection = "random-selection" // a random candidate was selected or copied
	NoiseTooMany         = "too-many"         // more strategies than allowed
	NoiseMalformed       = "malformed"        // the completion breaks its role's format
)

// Transcript is one teacher prompt/completion pair.
type Transcript struct {
	Index   int64  // position in the teacher's stream
	Task    string // task name
	Role    string // teacher role (one of TeacherRoles)
	Problem datasets.Problem
	// Prompt is the chat the workflow's prompt builder gives this role.
	Prompt     []engine.Message
	Completion string
	// Noise lists the deliberate mistakes in the completion, in the order
	// they were applied (empty for a clean completion).
	Noise []string
	// Shown holds the solutions or candidates the prompt shows (evaluator:
	// one; reviser: the previous solution; aggregator and synthesizer: all),
	// and ShownCorrect whether each is correct.
	Shown        []string
	ShownCorrect []bool
}

// HasNoise reports whether the transcript carries noise of a kind.
func (t Transcript) HasNoise(kind string) bool {
	for _, n := range t.Noise {
		if n == kind {
			return true
		}
	}
	return false
}

// source is one task the teacher writes transcripts for.
type source struct {
	task       datasets.Task
	perturb    func(datasets.Problem, *keyed.RNG) (string, error)
	strategies []string
}

// Teacher renders noisy transcripts of every role. It is a pure function
// of its configuration: Transcript(i) never depends on earlier calls.
type Teacher struct {
	cfg         Config
	sources     []source
	nVotes      int
	maxSubtasks int
	cum         []float64 // cumulative role shares in TeacherRoles order
}

// Strategy pools of the orchestrator, per task kind. They are the
// teacher's own wording for ways to approach a problem, not prompts.
var (
	mathStrategies = []string{
		"Do every multiplication first, then add and subtract left to right.",
		"Write one operation per line and carry each result forward.",
		"Find the products, then combine the terms in order.",
		"Work through the expression step by step, checking each result.",
		"Group the multiplied numbers, then sum the terms with their signs.",
		"Evaluate the products, then keep a running total.",
	}
	codeStrategies = []string{
		"Trace the first example stage by stage.",
		"Read the task line and turn each phrase into one stage.",
		"Check the output type to pick the last stage.",
		"Compare the example inputs and outputs to find the filter.",
		"Build the pipeline one stage at a time and test it on the examples.",
		"Start from the reducer and work backwards.",
	}
)

// NewTeacher returns the teacher over tasks (each a synth-math or
// synth-code task), with nVotes candidates per aggregator prompt and at most
// maxSubtasks strategies per orchestrator. With cfg.NVotesMix set, nVotes
// must be 0 and each aggregator transcript draws its count from the mix.
func NewTeacher(cfg Config, tasks []datasets.Task, nVotes, maxSubtasks int) (*Teacher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pretrain: teacher: %w", err)
	}
	if len(tasks) == 0 {
		return nil, errors.New("pretrain: teacher: no tasks")
	}
	switch {
	case len(cfg.NVotesMix) > 0 && nVotes != 0:
		return nil, fmt.Errorf("pretrain: teacher: n_votes %d given with pretrain.n_votes_mix %v; the mix sets the counts", nVotes, cfg.NVotesMix)
	case len(cfg.NVotesMix) == 0 && (nVotes < 1 || nVotes > 9):
		return nil, fmt.Errorf("pretrain: teacher: n_votes %d out of range [1, 9]", nVotes)
	}
	if maxSubtasks < 1 || maxSubtasks > 9 {
		return nil, fmt.Errorf("pretrain: teacher: max_subtasks %d out of range [1, 9]", maxSubtasks)
	}
	t := &Teacher{cfg: cfg.Clone(), nVotes: nVotes, maxSubtasks: maxSubtasks}
	for i, task := range tasks {
		if task == nil {
			return nil, fmt.Errorf("pretrain: teacher: task %d is nil", i)
		}
		var s source
		switch task.(type) {
		case *synthmath.Task:
			s = source{task: task, perturb: synthmath.Perturb, strategies: mathStrategies}
		case *synthcode.Task:
			s = source{task: task, perturb: synthcode.Perturb, strategies: codeStrategies}
		default:
			return nil, fmt.Errorf("pretrain: teacher: task %q is not synthetic; the teacher needs worked solutions (synth-math or synth-code)", task.Name())
		}
		t.sources = append(t.sources, s)
	}
	sum := 0.0
	for _, w := range cfg.Roles.Weights() {
		sum += w
	}
	acc := 0.0
	for _, w := range cfg.Roles.Weights() {
		acc += w / sum
		t.cum = append(t.cum, acc)
	}
	return t, nil
}

// Config returns the teacher's configuration.
func (t *Teacher) Config() Config { return t.cfg.Clone() }

// Transcript returns transcript i of the teacher's stream: task i mod the
// number of tasks, that task's train problem at cursor i / tasks, and a
// role drawn from the role mix, all keyed by (seed, i).
func (t *Teacher) Transcript(i int64) (Transcript, error) {
	if i < 0 {
		return Transcript{}, fmt.Errorf("pretrain: negative transcript index %d", i)
	}
	n := int64(len(t.sources))
	src := t.sources[i%n]
	p, err := src.task.Train(i / n)
	if err != nil {
		return Transcript{}, fmt.Errorf("pretrain: transcript %d: %w", i, err)
	}
	rng := keyed.NewRNG(t.cfg.Seed, "pretrain/transcript", uint64(i))
	u := rng.Float64()
	role := TeacherRoles[len(TeacherRoles)-1]
	for k, c := range t.cum {
		if u < c {
			role = TeacherRoles[k]
			break
		}
	}
	tr, err := t.render(src, p, role, rng)
	if err != nil {
		return Transcript{}, fmt.Errorf("pretrain: transcript %d (%s, %s, %s): %w", i, src.task.Name(), role, p.ID, err)
	}
	tr.Index, tr.Task, tr.Role, tr.Problem = i, src.task.Name(), role, p
	return tr, nil
}

// RenderRole renders a transcript of one role for problem p of the task
// named task, with the stream keyed by (seed, "pretrain/role", key); tests
// and tools use it to get a transcript of a given role directly.
func (t *Teacher) RenderRole(task, role string, p datasets.Problem, key uint64) (Transcript, error) {
	for _, src := range t.sources {
		if src.task.Name() != task {
			continue
		}
		tr, err := t.render(src, p, role, keyed.NewRNG(t.cfg.Seed, "pretrain/role", key))
		if err != nil {
			return Transcript{}, fmt.Errorf("pretrain: %s transcript of %s: %w", role, p.ID, err)
		}
		tr.Task, tr.Role, tr.Problem = task, role, p
		return tr, nil
	}
	return Transcript{}, fmt.Errorf("pretrain: teacher has no task %q", task)
}

// solution returns a worked solution of p: the teacher's own, or with
// probability pSlip a perturbed one; correct says which.
func (t *Teacher) solution(src source, p datasets.Problem, rng *keyed.RNG, pSlip float64) (text string, correct bool, err error) {
	if rng.Bernoulli(pSlip) {
		s, err := src.perturb(p, rng)
		if err != nil {
			return "", false, err
		}
		return src.tidy(s), false, nil
	}
	return src.tidy(p.Solution), true, nil
}

// tidy shapes a task's worked solution into the teacher's answer: a
// synth-code solution keeps only its fenced program (the trace line is
// dropped: it is not graded, and the tiny models learn the translation from
// the task line to the program far more easily without it); a synth-math
// solution is kept whole, since its steps are the required format.
func (s source) tidy(solution string) string {
	if s.task.Kind() != datasets.KindCode {
		return solution
	}
	var keep []string
	for _, line := range strings.Split(solution, "\n") {
		if !strings.HasPrefix(line, "Trace ") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// pickStrategies draws n distinct strategies from pool; beyond the pool's
// size it adds numbered variants, which are distinct too.
func pickStrategies(pool []string, n int, rng *keyed.RNG) []string {
	perm := rng.Perm(len(pool))
	out := make([]string, n)
	for k := range out {
		if k < len(pool) {
			out[k] = pool[perm[k]]
		} else {
			out[k] = fmt.Sprintf("%s (variant %d)", pool[perm[k%len(pool)]], k/len(pool)+1)
		}
	}
	return out
}

// numberedList writes strategies as "1. ..." lines, a format the
// orchestrator parser accepts only as a non-compliant fallback.
func numberedList(list []string) string {
	lines := make([]string, len(list))
	for k, s := range list {
		lines[k] = strconv.Itoa(k+1) + ". " + s
	}
	return strings.Join(lines, "\n")
}

// malformAnswer breaks a worked solution's answer format: the math
// "Answer:" line becomes prose, and code loses its fences.
func malformAnswer(s string) string {
	if strings.Contains(s, "```") {
		var keep []string
		for _, line := range strings.Split(s, "\n") {
			if strings.TrimSpace(line) != "```" {
				keep = append(keep, line)
			}
		}
		return strings.Join(keep, "\n")
	}
	lines := strings.Split(s, "\n")
	for k, line := range lines {
		if v, ok := strings.CutPrefix(line, "Answer: "); ok {
			lines[k] = "So the result is " + v + "."
		}
	}
	return strings.Join(lines, "\n")
}

// malformVerdict replaces the verdict line with prose that the verdict
// parser does not accept.
func malformVerdict(s string, correct bool) string {
	word := "wrong"
	if correct {
		word = "right"
	}
	lines := strings.Split(s, "\n")
	lines[0] = "The solution looks " + word + "."
	return strings.Join(lines, "\n")
}

// feedback is the evaluator's one-line feedback on solution for a verdict:
// for a wrong solution judged Incorrect it names the first wrong step (math)
// or an example the program fails (code).
func feedback(src source, p datasets.Problem, solution string, verdict bool) string {
	if verdict {
		if src.task.Kind() == datasets.KindCode {
			return "It matches the examples."
		}
		return "Each step checks out."
	}
	if src.task.Kind() == datasets.KindCode {
		return codeFeedback(p, solution)
	}
	for k, s := range synthmath.Steps(solution) {
		if !s.Correct() {
			right := s.A + s.B
			switch s.Op {
			case '-':
				right = s.A - s.B
			case '*':
				right = s.A * s.B
			}
			return fmt.Sprintf("Step %d is wrong: %d %c %d = %d.", k+1, s.A, s.Op, s.B, right)
		}
	}
	if v := synthmath.Verify(p, solution); !v.Correct {
		return "The steps do not follow the order of operations."
	}
	return "Check the steps again."
}

// codeFeedback names the first shown example the solution's program fails.
func codeFeedback(p datasets.Problem, solution string) string {
	src, ok := synthcode.ExtractProgram(solution)
	if !ok {
		return "There is no code block."
	}
	lim := synthcode.DefaultLimits()
	prog, err := synthcode.Parse(src, lim)
	if err != nil {
		return "The program does not parse."
	}
	for _, ex := range synthcode.Examples(p.Prompt) {
		in, err := synthcode.ParseList(ex.Input)
		if err != nil {
			continue
		}
		got, err := synthcode.Run(prog, in, lim)
		if err != nil {
			return "On " + ex.Input + " it fails to run."
		}
		if g := got.String(); g != ex.Output {
			return "On " + ex.Input + " it gives " + g + ", want " + ex.Output + "."
		}
	}
	if v := synthcode.Verify(context.Background(), p, solution); !v.Correct {
		return "It fails a hidden test."
	}
	return "Check the stages again."
}
