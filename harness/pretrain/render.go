package pretrain

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthmath"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
	"github.com/marlowlab/marlow/keyed"
)

func (t *Teacher) render(src source, p datasets.Problem, role string, rng *keyed.RNG) (Transcript, error) {
	r := &rendering{t: t, src: src, p: p, rng: rng, instr: src.task.Instructions(), nz: t.cfg.Noise}
	r.malformed = rng.Bernoulli(r.nz.Malformed)
	var err error
	switch role {
	case study.Generator:
		r.tr.Prompt = workflow.GeneratorPrompt(r.instr, p)
		err = r.answer()
	case RoleReviser:
		err = r.reviser()
	case study.Worker:
		strategy := src.strategies[rng.Intn(len(src.strategies))]
		r.tr.Prompt = workflow.WorkerPrompt(r.instr, p, strategy)
		err = r.answer()
	case study.Synthesizer:
		err = r.synthesizer()
	case study.Evaluator:
		err = r.evaluator()
	case study.Aggregator:
		err = r.aggregator()
	case study.Orchestrator:
		r.orchestrator()
	default:
		return r.tr, fmt.Errorf("unknown teacher role %q (want one of %v)", role, TeacherRoles)
	}
	if err != nil {
		return r.tr, err
	}
	if r.malformed {
		switch role {
		case study.Generator, RoleReviser, study.Worker, study.Synthesizer:
			r.tr.Completion = malformAnswer(r.tr.Completion)
		}
		r.tr.Noise = append(r.tr.Noise, NoiseMalformed)
	}
	return r.tr, nil
}

// rendering is one transcript being rendered; its methods draw from rng in
// a fixed order, so a transcript is a pure function of its key.
type rendering struct {
	t         *Teacher
	src       source
	p         datasets.Problem
	rng       *keyed.RNG
	instr     string
	nz        Noise
	malformed bool
	tr        Transcript
}

// answer writes the teacher's worked solution (with a slip at the noise
// rate) as the completion.
func (r *rendering) answer() error {
	s, ok, err := r.t.solution(r.src, r.p, r.rng, r.nz.Slip)
	if err != nil {
		return err
	}
	if !ok {
		r.tr.Noise = append(r.tr.Noise, NoiseSlip)
	}
	r.tr.Completion = s
	return nil
}

// shown draws n candidate solutions to show the role, each correct with
// probability CandidateCorrect.
func (r *rendering) shown(n int) error {
	return r.shownBy(n, r.t.solution)
}

// shownBy is shown with the candidates drawn by draw.
func (r *rendering) shownBy(n int, draw func(source, datasets.Problem, *keyed.RNG, float64) (string, bool, error)) error {
	for k := 0; k < n; k++ {
		s, ok, err := draw(r.src, r.p, r.rng, 1-r.t.cfg.CandidateCorrect)
		if err != nil {
			return err
		}
		r.tr.Shown = append(r.tr.Shown, s)
		r.tr.ShownCorrect = append(r.tr.ShownCorrect, ok)
	}
	return nil
}

// reviser revises a wrong previous answer after the evaluator's feedback.
func (r *rendering) reviser() error {
	prev, err := r.src.perturb(r.p, r.rng)
	if err != nil {
		return err
	}
	prev = r.src.tidy(prev)
	r.tr.Shown, r.tr.ShownCorrect = []string{prev}, []bool{false}
	r.tr.Prompt = workflow.RevisionPrompt(r.instr, r.p, prev, feedback(r.src, r.p, prev, false))
	return r.answer()
}

// synthesizer answers from up to maxSubtasks worker solutions, or copies a
// random one at the noise rate.
func (r *rendering) synthesizer() error {
	if err := r.shown(r.rng.Range(1, r.t.maxSubtasks)); err != nil {
		return err
	}
	r.tr.Prompt = workflow.SynthesizerPrompt(r.instr, r.p, r.tr.Shown)
	if r.rng.Bernoulli(r.nz.RandomSelection) {
		k := r.rng.Intn(len(r.tr.Shown))
		r.tr.Completion = r.tr.Shown[k]
		r.tr.Noise = append(r.tr.Noise, NoiseRandomSelection)
		if !r.tr.ShownCorrect[k] {
			r.tr.Noise = append(r.tr.Noise, NoiseSlip)
		}
		return nil
	}
	return r.answer()
}

// evaluator gives a verdict on one shown answer, flipped at the noise rate.
func (r *rendering) evaluator() error {
	if err := r.supervised(1); err != nil {
		return err
	}
	r.tr.Prompt = workflow.EvaluatorPrompt(r.p, r.tr.Shown[0])
	verdict := r.tr.ShownCorrect[0]
	if r.rng.Bernoulli(r.nz.WrongVerdict) {
		verdict = !verdict
		r.tr.Noise = append(r.tr.Noise, NoiseWrongVerdict)
	}
	r.tr.Completion = workflow.FormatVerdict(verdict, feedback(r.src, r.p, r.tr.Shown[0], verdict))
	if r.malformed {
		r.tr.Completion = malformVerdict(r.tr.Completion, verdict)
	}
	if check := checkOf(r.t.cfg.Supervisors, r.src.task.Kind()); check != nil {
		line, _ := check(r.src.task.Kind(), r.p, r.tr.Shown[0])
		r.tr.Completion = "Check: " + line + "\n" + r.tr.Completion
	}
	return nil
}

// supervised draws the n candidates an evaluator or aggregator is shown:
// under the recipes that check against the problem (problemCheckOf) the
// wrong ones come from checkedSolution (as the base generators' errors
// look), else they are shown's.
func (r *rendering) supervised(n int) error {
	if r.problemChecker() == nil {
		return r.shown(n)
	}
	return r.shownBy(n, r.t.checkedSolution)
}

// aggregator selects a correct candidate among nVotes (or a count drawn
// from pretrain.n_votes_mix), or a random one at the noise rate (or when
// none is correct).
func (r *rendering) aggregator() error {
	n := r.t.nVotes
	if mix := r.t.cfg.NVotesMix; len(mix) > 0 {
		n = mix[r.rng.Intn(len(mix))]
	}
	if err := r.supervised(n); err != nil {
		return err
	}
	r.orderOutvoted()
	r.tr.Prompt = workflow.AggregatorPrompt(r.p, r.tr.Shown)
	var good []int
	for k, ok := range r.tr.ShownCorrect {
		if ok {
			good = append(good, k+1)
		}
	}
	if r.skilledMath() {
		return r.checkedSelection()
	}
	if r.problemChecker() != nil {
		return r.problemSelection()
	}
	var k int
	if len(good) == 0 || r.rng.Bernoulli(r.nz.RandomSelection) {
		k = r.rng.Range(1, len(r.tr.Shown))
		if len(good) > 0 {
			r.tr.Noise = append(r.tr.Noise, NoiseRandomSelection)
		}
	} else {
		k = good[r.rng.Intn(len(good))]
	}
	r.tr.Completion = workflow.FormatSelection(k)
	if r.malformed {
		r.tr.Completion = "Candidate " + strconv.Itoa(k) + " looks best."
	}
	return nil
}

// skilledMath says the transcript takes the skilled supervisors' recipe:
// pretrain.supervisors is skilled and the task is synth-math, whose
// worked steps a supervisor can re-do one by one. On synth-code the recipe
// is the default one: a check of a program needs running it, which the
// tiny models do not learn from these transcripts (seeds/README.md,
// "supervisors.yaml").
func (r *rendering) skilledMath() bool {
	return r.t.cfg.Supervisors == spec.SupervisorsSkilled && r.src.task.Kind() == datasets.KindMath
}

// checkedSelection is the skilled aggregator on synth-math: one line per
// candidate re-doing its steps (StepCheck), then the first candidate whose
// check passed, else the first of the most common answer (MajorityPick); at
// the noise rate a random candidate instead.
func (r *rendering) checkedSelection() error {
	answers := make([]string, len(r.tr.Shown))
	lines := make([]string, 0, len(r.tr.Shown)+1)
	k := 0
	for i, c := range r.tr.Shown {
		answers[i] = candidateAnswer(r.src.task, r.p, c)
		line, ok := StepCheck(c)
		lines = append(lines, strconv.Itoa(i+1)+": "+line)
		if ok && k == 0 {
			k = i + 1
		}
	}
	r.selectAfterChecks(lines, k, answers)
	return nil
}

// selectAfterChecks ends a checking aggregator's completion: its check
// lines, then the selection of candidate k (1-based) whose check passed,
// or with none passed (k 0) the first of the most common answer
// (MajorityPick); at the noise rate a random candidate instead, and a
// malformed selection line when the transcript carries that noise.
func (r *rendering) selectAfterChecks(lines []string, k int, answers []string) {
	if k == 0 {
		k = MajorityPick(answers)
	}
	if r.rng.Bernoulli(r.nz.RandomSelection) {
		k = r.rng.Range(1, len(r.tr.Shown))
		r.tr.Noise = append(r.tr.Noise, NoiseRandomSelection)
	}
	sel := workflow.FormatSelection(k)
	if r.malformed {
		sel = "Candidate " + strconv.Itoa(k) + " looks best."
	}
	r.tr.Completion = strings.Join(append(lines, sel), "\n")
}

// StepCheck re-does the arithmetic of a synth-math worked solution: each
// step "a op b = c" is written again with its right result, followed by
// "not c" when c was wrong, the steps joined by ", ", then "ok" when every
// step's result was right and the answer line equals the last step's
// result, else "wrong". A solution without steps or without an answer is
// "wrong".
func StepCheck(solution string) (line string, ok bool) {
	parts, ok := stepParts(solution)
	word := "wrong"
	if ok {
		word = "ok"
	}
	if len(parts) == 0 {
		return word, false
	}
	return strings.Join(parts, ", ") + " " + word, ok
}

// stepParts are StepCheck's re-done steps and whether every step and the
// answer line were right.
func stepParts(solution string) (parts []string, ok bool) {
	steps := synthmath.Steps(solution)
	parts = make([]string, len(steps))
	ok = len(steps) > 0
	for i, st := range steps {
		right := st
		right.Result = st.Right()
		parts[i] = right.String()
		if right.Result != st.Result {
			ok = false
			parts[i] += " not " + strconv.FormatInt(st.Result, 10)
		}
	}
	if ok {
		ans, found := answerLine(solution)
		ok = found && ans == strconv.FormatInt(steps[len(steps)-1].Result, 10)
	}
	return parts, ok
}

// answerLine is the value of a solution's last "Answer:" line.
func answerLine(solution string) (string, bool) {
	ans, found := "", false
	for _, line := range strings.Split(solution, "\n") {
		if v, isAnswer := strings.CutPrefix(strings.TrimSpace(line), "Answer:"); isAnswer {
			ans, found = strings.TrimSpace(v), true
		}
	}
	return ans, found
}

// candidateAnswer is the answer the task's verifier reads from a shown
// solution, on one line ("" when it finds none).
func candidateAnswer(task datasets.Task, p datasets.Problem, solution string) string {
	return answerText(task.Verify(context.Background(), p, solution))
}

// shownAnswers are the answers of the candidates shown, in order, as the
// task's verifier reads them (candidateAnswer).
func (r *rendering) shownAnswers() []string {
	answers := make([]string, len(r.tr.Shown))
	for i, c := range r.tr.Shown {
		answers[i] = candidateAnswer(r.src.task, r.p, c)
	}
	return answers
}

// answerText is a verdict's answer on one line, its runs of white space
// one space each.
func answerText(v datasets.Verdict) string {
	return strings.Join(strings.Fields(v.Answer), " ")
}

// MajorityPick is the skilled aggregator's choice (1-based) when no
// candidate's check passed: the first candidate of the most common answer
// among answers ("" for none, which never counts; ties go to the earliest
// candidate); with no answer at all, candidate 1.
func MajorityPick(answers []string) int {
	count, top := tally(answers)
	for i, a := range answers {
		if a != "" && count[a] == top {
			return i + 1
		}
	}
	return 1
}

// tally counts the non-empty answers and returns the counts and the
// largest.
func tally(answers []string) (count map[string]int, top int) {
	count = map[string]int{}
	for _, a := range answers {
		if a != "" {
			count[a]++
			top = max(top, count[a])
		}
	}
	return count, top
}

// orchestrator proposes up to maxSubtasks strategies, one too many at the
// noise rate.
func (r *rendering) orchestrator() {
	n := r.rng.Range(1, r.t.maxSubtasks)
	if r.rng.Bernoulli(r.nz.TooManyStrategies) {
		n = r.t.maxSubtasks + 1
		r.tr.Noise = append(r.tr.Noise, NoiseTooMany)
	}
	r.tr.Prompt = workflow.OrchestratorPrompt(r.p, r.t.maxSubtasks)
	list := pickStrategies(r.src.strategies, n, r.rng)
	r.tr.Completion = workflow.FormatStrategies(list)
	if r.malformed {
		r.tr.Completion = numberedList(list)
	}
}
