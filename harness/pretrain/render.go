package pretrain

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
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
	for k := 0; k < n; k++ {
		s, ok, err := r.t.solution(r.src, r.p, r.rng, 1-r.t.cfg.CandidateCorrect)
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
	if err := r.shown(1); err != nil {
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
	if r.t.cfg.Supervisors == spec.SupervisorsSkilled {
		r.tr.Completion = OwnWorkHeader + "\n" + r.src.tidy(r.p.Solution) + "\n" + r.tr.Completion
	}
	return nil
}

// aggregator selects a correct candidate among nVotes (or a count drawn
// from pretrain.n_votes_mix), or a random one at the noise rate (or when
// none is correct).
func (r *rendering) aggregator() error {
	n := r.t.nVotes
	if mix := r.t.cfg.NVotesMix; len(mix) > 0 {
		n = mix[r.rng.Intn(len(mix))]
	}
	if err := r.shown(n); err != nil {
		return err
	}
	r.tr.Prompt = workflow.AggregatorPrompt(r.p, r.tr.Shown)
	var good []int
	for k, ok := range r.tr.ShownCorrect {
		if ok {
			good = append(good, k+1)
		}
	}
	if r.t.cfg.Supervisors == spec.SupervisorsSkilled {
		return r.majority()
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

// OwnWorkHeader opens the skilled evaluator's own worked solution, which
// precedes its verdict.
const OwnWorkHeader = "My own solution:"

// majority is the skilled aggregator: it lists each candidate's answer (as
// the task's verifier reads it), then selects the first candidate of the
// most common answer. On a tie between answers it selects the correct one
// when one of the tied answers is correct (the teacher can tell), else the
// first tied candidate; at the noise rate it selects a random candidate
// instead.
func (r *rendering) majority() error {
	answers := make([]string, len(r.tr.Shown))
	lines := make([]string, len(r.tr.Shown))
	for i, c := range r.tr.Shown {
		answers[i] = candidateAnswer(r.src, r.p, c)
		shown := answers[i]
		if shown == "" {
			shown = "none"
		}
		lines[i] = "Candidate " + strconv.Itoa(i+1) + ": " + shown
	}
	k := MajorityPick(answers, r.tr.ShownCorrect)
	if r.rng.Bernoulli(r.nz.RandomSelection) {
		k = r.rng.Range(1, len(r.tr.Shown))
		r.tr.Noise = append(r.tr.Noise, NoiseRandomSelection)
	}
	sel := workflow.FormatSelection(k)
	if r.malformed {
		sel = "Candidate " + strconv.Itoa(k) + " looks best."
	}
	r.tr.Completion = strings.Join(lines, "\n") + "\n" + sel
	return nil
}

// candidateAnswer is the answer the task's verifier reads from a shown
// solution, on one line ("" when it finds none).
func candidateAnswer(src source, p datasets.Problem, solution string) string {
	v := src.task.Verify(context.Background(), p, solution)
	return strings.Join(strings.Fields(v.Answer), " ")
}

// MajorityPick is the skilled aggregator's choice (1-based) among
// candidates with the given answers ("" for none, which never counts as a
// vote) and correctness: the first candidate of the most common answer;
// among answers tied for most common, the correct one if there is one,
// else the first in candidate order. With no answer at all it is
// candidate 1.
func MajorityPick(answers []string, correct []bool) int {
	count := map[string]int{}
	top := 0
	for _, a := range answers {
		if a == "" {
			continue
		}
		count[a]++
		top = max(top, count[a])
	}
	pick := 0
	for i, a := range answers {
		if a == "" || count[a] != top {
			continue
		}
		if pick == 0 {
			pick = i + 1
		}
		if correct[i] {
			return i + 1
		}
	}
	if pick == 0 {
		return 1
	}
	return pick
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
