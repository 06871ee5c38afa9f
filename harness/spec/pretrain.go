package spec

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/harness/study"
)

// Pretrain are the settings of `marlow pretrain` for the tiny scales: the
// teacher's role mix and noise rates and the supervised training budget.
// It is the one settings struct of pretraining (harness/pretrain.Config is
// this type): its defaults are DefaultPretrain and its rules Validate, the
// same that Load applies to a spec's pretrain section. Its JSON form keys
// the checkpoints, so its tags must not change.
type Pretrain struct {
	Seed             uint64         `yaml:"seed" json:"seed"`
	Steps            map[string]int `yaml:"steps" json:"steps"` // "default" plus per-scale budgets
	BatchSize        int            `yaml:"batch_size" json:"batch_size"`
	LR               float64        `yaml:"lr" json:"lr"`
	WarmupSteps      int            `yaml:"warmup_steps" json:"warmup_steps"`
	MinLRRatio       float64        `yaml:"min_lr_ratio" json:"min_lr_ratio"`
	WeightDecay      float64        `yaml:"weight_decay" json:"weight_decay"`
	GradClip         float64        `yaml:"grad_clip" json:"grad_clip"`
	Beta1            float64        `yaml:"beta1" json:"beta1"`
	Beta2            float64        `yaml:"beta2" json:"beta2"`
	Roles            PretrainRoles  `yaml:"roles" json:"roles"`
	Noise            PretrainNoise  `yaml:"noise" json:"noise"`
	CandidateCorrect float64        `yaml:"candidate_correct" json:"candidate_correct"`
	// NVotesMix, when set, are the candidate counts of the aggregator's
	// transcripts, one drawn per transcript, instead of workflow.n_votes
	// alone: one base model then serves every n_votes in the list (for
	// ablations), and workflow.n_votes no longer enters its key. Unset
	// (the default) leaves the key and the transcripts as they were.
	NVotesMix []int `yaml:"n_votes_mix,omitempty" json:"n_votes_mix,omitempty"`
	// Supervisors selects the teacher's recipe for the supervisory roles:
	// unset (the default) keeps the recipe of the committed checkpoints
	// (and their keys); SupervisorsSkilled gives the aggregator and the
	// evaluator a check to learn on synth-math (harness/pretrain,
	// render.go): each re-does the arithmetic of the candidates' steps
	// before its verdict or selection. SupervisorsProblemCheck checks the
	// candidates against the problem itself, on both synthetic tasks: the
	// operands a synth-math candidate copied against the problem's, then
	// its steps; a synth-code candidate's stages against those the task
	// line asks for; and its wrong candidates on synth-math are mostly
	// operands copied wrong, as the base generators' are.
	// SupervisorsPairCheck is the problem-check recipe with every decision
	// written beside the two things it compares: each of the problem's
	// operands (or asked-for stages) beside the candidate's, each re-done
	// step's result beside the candidate's, each pair marked "." (same) or
	// "!" (differs), so the closing ok or wrong only looks for a "!".
	// SupervisorsFirstSlip is the pair-check recipe with each check line
	// ending at its first "!" ("7/6! wrong"), so that "wrong" always
	// follows the mark just before it and "ok" ends only a line of "."s.
	// SupervisorsCandidateFirst is the first-slip recipe with each pair
	// written the candidate's item first ("6/7!", "22 + 9 = 32/31!"), so
	// that the candidate's item is read before the right one is worked
	// out, not predicted from it.
	Supervisors string `yaml:"supervisors,omitempty" json:"supervisors,omitempty"`
	// WrongMath, when set, are the shares of the kinds of wrong synth-math
	// candidates that a checking recipe (CheckingRecipes) shows its
	// evaluator and aggregator, so that they can be
	// matched to the errors the base generators make. Unset (the default)
	// keeps the recipes' mix (an operand slip two times in three, else an
	// arithmetic slip) and the keys of the checkpoints built with it.
	WrongMath *WrongMath `yaml:"wrong_math,omitempty" json:"wrong_math,omitempty"`
	// Selection, when set (Selections), has a checking recipe's aggregator
	// copy each candidate's answer onto one line and select the first
	// candidate of an answer that more candidates share than any other;
	// only where no answer is shared by more does it write the recipe's
	// check lines and select as the recipe does. SelectionMajorityFirst
	// lists the answers ("Answers: 46; 46; 47"); SelectionMajorityAdjacent
	// marks each one equal to the one before it; SelectionMajorityMatch
	// names, after each answer, the first earlier candidate with the same
	// one, SelectionMajorityNamed also numbers each answer, and
	// SelectionMajorityTagged names every answer by the first candidate
	// that gave it, itself included; SelectionMajorityRepeat marks only
	// the answers given before, with their own number, and selects the
	// first candidate so marked whose answer leads, and
	// SelectionMajorityCompact does the same with each synth-code answer
	// written in its short code. Unset keeps the recipes' selection and
	// their keys.
	Selection string `yaml:"selection,omitempty" json:"selection,omitempty"`
	// Outvoted, when set, is the share of a majority aggregator's turns
	// (pretrain.selection) with a leading answer and a candidate without it
	// in which the teacher orders the candidates so that candidate 1 is
	// outvoted: it swaps candidate 1 with a random candidate of the other
	// kind where the draw asks for the other order. The drawn candidates
	// stay the same; only their order changes. As drawn, candidate 1 is
	// outvoted in about a third of those turns (TestOutvotedOrder's
	// stream), so most names on the line are "=1" and a model can write
	// "=1" without looking the answer up (pilot 21, seeds/README.md).
	// Unset (0) keeps the order drawn and the keys of the checkpoints
	// built with it.
	Outvoted float64 `yaml:"outvoted,omitempty" json:"outvoted,omitempty"`
}

// SelectionMajorityFirst is the pretrain.selection value of the
// majority-first aggregator.
const SelectionMajorityFirst = "majority-first"

// SelectionMajorityAdjacent is the pretrain.selection value of the
// majority-adjacent aggregator: majority-first whose answers line marks
// each answer equal to the one before it ("Answers: 45 *; 42 -; 42 +;
// 45 -", candidate 1's answer again at the end, synth-math answers
// two digits wide), so that every comparison is of neighbours at a fixed
// distance.
const SelectionMajorityAdjacent = "majority-adjacent"

// SelectionMajorityMatch is the pretrain.selection value of the
// majority-match aggregator: majority-first whose answers line names,
// after each answer, the first earlier candidate that gave the same one
// ("Answers: 45; 42; 42 =2"), so that equality is found by looking the
// answer up among the earlier ones, as attention does, not by comparing
// two of them, and the selection copies the name.
const SelectionMajorityMatch = "majority-match"

// SelectionMajorityNamed is the pretrain.selection value of the
// majority-named aggregator: majority-match whose line writes each
// candidate's number before its answer ("Answers: 1: 45; 2: 42; 3: 42 =2"),
// so that the name copied after a lookup sits just before the answer found
// instead of being counted from its place on the line.
const SelectionMajorityNamed = "majority-named"

// SelectionMajorityTagged is the pretrain.selection value of the
// majority-tagged aggregator: majority-first whose answers line follows
// every answer with the first candidate that gave it, itself included
// ("Answers: 28 =1; 38 =2; 28 =1"), so that the name of an answer seen
// before is a copy of what followed it then, the step a two-layer model
// takes most readily, and not of what stood before it (majority-named)
// or of a place counted on the line (majority-match).
const SelectionMajorityTagged = "majority-tagged"

// SelectionMajorityRepeat is the pretrain.selection value of the
// majority-repeat aggregator: its answers line marks each answer that an
// earlier candidate gave too with the candidate's own number ("Answers:
// 28; 38; 28 =3"), and it selects the first marked candidate whose answer
// leads (with three candidates, the first marked one). The model then
// only has to tell whether an answer was seen before, not which candidate
// gave it (the step the named and tagged lines failed at: pilots 24 to
// 27), and the number it writes is its own place.
const SelectionMajorityRepeat = "majority-repeat"

// SelectionMajorityCompact is the pretrain.selection value of the
// majority-compact aggregator: majority-repeat whose line writes each
// synth-code answer as the program's short code ("Answers: +3rd1; *3rd1;
// +3rd1 =3" for "map +3 | rev | drop 1" and "map *3 | rev | drop 1",
// synthcode.Program.Code) and synth-math answers as they are. Under
// majority-repeat the tiny models' marks on synth-code did not depend on
// whether the program had been seen before (pilot 32: the third answer
// marked in 33 to 48% of turns whatever the pattern), as two programs
// mostly differ in one character of 10 to 34; the validation programs'
// codes are 2 to 6 characters, nearly as short as a synth-math answer.
const SelectionMajorityCompact = "majority-compact"

// Selections are the pretrain.selection values.
var Selections = []string{SelectionMajorityFirst, SelectionMajorityAdjacent, SelectionMajorityMatch, SelectionMajorityNamed, SelectionMajorityTagged, SelectionMajorityRepeat, SelectionMajorityCompact}

// WrongMath are the shares of the kinds of wrong synth-math candidates a
// checking recipe's supervisors are shown; they are normalised.
type WrongMath struct {
	// Slip: one step's result wrong and carried to the answer
	// (synthmath.Perturb).
	Slip float64 `yaml:"slip" json:"slip"`
	// DropLast: the last operand left out, every step right.
	DropLast float64 `yaml:"drop_last" json:"drop_last"`
	// Operand: an operand copied wrong (off by one or two, its
	// neighbour's value, or left out), every step right.
	Operand float64 `yaml:"operand" json:"operand"`
	// Answer: every step right and an answer line that differs from the
	// last step's result.
	Answer float64 `yaml:"answer" json:"answer"`
}

// The kinds of wrong synth-math solutions, named as WrongMath's keys.
const (
	WrongSlip     = "slip"
	WrongDropLast = "drop_last"
	WrongOperand  = "operand"
	WrongAnswer   = "answer"
)

// WrongMathKinds name the shares of WrongMath.Weights, in its order.
var WrongMathKinds = []string{WrongSlip, WrongDropLast, WrongOperand, WrongAnswer}

// Weights returns the shares in WrongMathKinds order.
func (w WrongMath) Weights() []float64 { return []float64{w.Slip, w.DropLast, w.Operand, w.Answer} }

// SupervisorsSkilled is the pretrain.supervisors value of the skilled
// supervisors recipe.
const SupervisorsSkilled = "skilled"

// SupervisorsProblemCheck is the pretrain.supervisors value of the
// problem-check supervisors recipe.
const SupervisorsProblemCheck = "problem-check"

// SupervisorsPairCheck is the pretrain.supervisors value of the
// pair-check supervisors recipe.
const SupervisorsPairCheck = "pair-check"

// SupervisorsFirstSlip is the pretrain.supervisors value of the
// first-slip supervisors recipe.
const SupervisorsFirstSlip = "first-slip"

// SupervisorsCandidateFirst is the pretrain.supervisors value of the
// candidate-first supervisors recipe.
const SupervisorsCandidateFirst = "candidate-first"

// SupervisorRecipes are the allowed values of pretrain.supervisors
// ("" is the default recipe).
var SupervisorRecipes = []string{SupervisorsSkilled, SupervisorsProblemCheck, SupervisorsPairCheck, SupervisorsFirstSlip, SupervisorsCandidateFirst}

// CheckingRecipes are the supervisors recipes that check each candidate
// against the problem (and so take pretrain.wrong_math).
var CheckingRecipes = []string{SupervisorsProblemCheck, SupervisorsPairCheck, SupervisorsFirstSlip, SupervisorsCandidateFirst}

// PretrainRoles are the shares of teacher transcripts per role (reviser is
// eval-opt's revision turn of the generator); they are normalised.
type PretrainRoles struct {
	Generator    float64 `yaml:"generator" json:"generator"`
	Reviser      float64 `yaml:"reviser" json:"reviser"`
	Evaluator    float64 `yaml:"evaluator" json:"evaluator"`
	Aggregator   float64 `yaml:"aggregator" json:"aggregator"`
	Orchestrator float64 `yaml:"orchestrator" json:"orchestrator"`
	Worker       float64 `yaml:"worker" json:"worker"`
	Synthesizer  float64 `yaml:"synthesizer" json:"synthesizer"`
}

// PretrainNoise are the teacher's deliberate error rates.
type PretrainNoise struct {
	Slip              float64 `yaml:"slip" json:"slip"`
	WrongVerdict      float64 `yaml:"wrong_verdict" json:"wrong_verdict"`
	RandomSelection   float64 `yaml:"random_selection" json:"random_selection"`
	TooManyStrategies float64 `yaml:"too_many_strategies" json:"too_many_strategies"`
	Malformed         float64 `yaml:"malformed" json:"malformed"`
}

// DefaultPretrain returns the defaults of the pretrain section, the
// settings the committed checkpoints were built with.
func DefaultPretrain() Pretrain {
	var p Pretrain
	p.setDefaults()
	return p
}

// StepsFor returns the step budget of a scale: its own entry, else
// "default".
func (p Pretrain) StepsFor(scale string) int {
	if n, ok := p.Steps[scale]; ok {
		return n
	}
	return p.Steps["default"]
}

// Clone returns a copy that shares nothing with p (Steps is copied).
func (p Pretrain) Clone() Pretrain {
	p.Steps = maps.Clone(p.Steps)
	p.NVotesMix = slices.Clone(p.NVotesMix)
	if p.WrongMath != nil {
		w := *p.WrongMath
		p.WrongMath = &w
	}
	return p
}

// Weights returns the role shares in the order generator, reviser,
// evaluator, aggregator, orchestrator, worker, synthesizer.
func (r PretrainRoles) Weights() []float64 {
	return []float64{r.Generator, r.Reviser, r.Evaluator, r.Aggregator, r.Orchestrator, r.Worker, r.Synthesizer}
}

// String renders the budget knobs on one line, for logs.
func (p Pretrain) String() string {
	keys := slices.Sorted(maps.Keys(p.Steps))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, p.Steps[k])
	}
	return fmt.Sprintf("steps {%s} batch %d lr %g warmup %d seed %d", strings.Join(parts, ", "), p.BatchSize, p.LR, p.WarmupSteps, p.Seed)
}

// Validate reports every invalid setting, each naming its key
// (pretrain.<key>), by the rules Load applies to a spec's pretrain section.
func (p Pretrain) Validate() error {
	errs := &errList{}
	validatePretrain(p, checker{errs: errs, prefix: "pretrain"})
	out := make([]error, len(errs.items))
	for i, fe := range errs.items {
		out[i] = fmt.Errorf("%s: %s", fe.Path, fe.Msg)
	}
	return errors.Join(out...)
}

func (p *Pretrain) setDefaults() {
	*p = Pretrain{Seed: 1, Steps: map[string]int{"default": 900}, BatchSize: 8, LR: 5e-3,
		WarmupSteps: 30, MinLRRatio: 0.1, WeightDecay: 0, GradClip: 1, Beta1: 0.9, Beta2: 0.95,
		Roles: PretrainRoles{Generator: 0.50, Reviser: 0.06, Evaluator: 0.10, Aggregator: 0.07,
			Orchestrator: 0.07, Worker: 0.12, Synthesizer: 0.08},
		Noise:            PretrainNoise{Slip: 0.15, WrongVerdict: 0.1, RandomSelection: 0.1, TooManyStrategies: 0.05, Malformed: 0.03},
		CandidateCorrect: 0.5}
}

// pretrainRoleKeys name the shares of PretrainRoles.Weights (the
// registry's teacher roles, in their order).
var pretrainRoleKeys = study.TeacherRoles

func validatePretrain(p Pretrain, c checker) {
	if _, ok := p.Steps["default"]; !ok {
		c.errf("steps", "needs a `default` entry")
	}
	for _, k := range sortedKeys(p.Steps) {
		c.rangeInt("steps."+k, p.Steps[k], 1, 1_000_000)
	}
	c.rangeInt("batch_size", p.BatchSize, 1, 4096)
	c.rangeFloat("lr", p.LR, 0, 1, true)
	c.minInt("warmup_steps", p.WarmupSteps, 0)
	c.rangeFloat("min_lr_ratio", p.MinLRRatio, 0, 1, false)
	c.rangeFloat("weight_decay", p.WeightDecay, 0, 0.999, false)
	c.rangeFloat("grad_clip", p.GradClip, 0, 1e9, false)
	c.rangeFloat("beta1", p.Beta1, 0, 0.999999, false)
	c.rangeFloat("beta2", p.Beta2, 0, 0.999999, false)
	sum := 0.0
	for i, v := range p.Roles.Weights() {
		c.rangeFloat("roles."+pretrainRoleKeys[i], v, 0, 1e6, false)
		if v > 0 {
			sum += v
		}
	}
	if !(sum > 0) {
		c.errf("roles", "at least one role needs a positive share")
	}
	n := p.Noise
	c.rangeFloat("noise.slip", n.Slip, 0, 1, false)
	c.rangeFloat("noise.wrong_verdict", n.WrongVerdict, 0, 1, false)
	c.rangeFloat("noise.random_selection", n.RandomSelection, 0, 1, false)
	c.rangeFloat("noise.too_many_strategies", n.TooManyStrategies, 0, 1, false)
	c.rangeFloat("noise.malformed", n.Malformed, 0, 1, false)
	c.rangeFloat("candidate_correct", p.CandidateCorrect, 0, 1, false)
	if p.Supervisors != "" {
		c.oneOf("supervisors", p.Supervisors, SupervisorRecipes)
	}
	if p.Selection != "" {
		c.oneOf("selection", p.Selection, Selections)
		if !slices.Contains(CheckingRecipes, p.Supervisors) {
			c.errf("selection", "needs a checking supervisors recipe (%s), not %q: the other recipes' aggregators select as their own rule says", strings.Join(CheckingRecipes, ", "), p.Supervisors)
		}
	}
	c.rangeFloat("outvoted", p.Outvoted, 0, 1, false)
	if p.Outvoted > 0 && p.Selection == "" {
		c.errf("outvoted", "needs pretrain.selection (%s): only the majority aggregators' turns are reordered", strings.Join(Selections, ", "))
	}
	if w := p.WrongMath; w != nil {
		if !slices.Contains(CheckingRecipes, p.Supervisors) {
			c.errf("wrong_math", "needs a checking supervisors recipe (%s), not %q: only those show their supervisors wrong candidates by kind", strings.Join(CheckingRecipes, ", "), p.Supervisors)
		}
		sum := 0.0
		for i, v := range w.Weights() {
			c.rangeFloat("wrong_math."+WrongMathKinds[i], v, 0, 1e6, false)
			if v > 0 {
				sum += v
			}
		}
		if !(sum > 0) {
			c.errf("wrong_math", "at least one kind needs a positive share")
		}
	}
	seen := map[int]bool{}
	for i, n := range p.NVotesMix {
		k := fmt.Sprintf("n_votes_mix[%d]", i)
		c.rangeInt(k, n, 2, 9)
		if seen[n] {
			c.errf(k, "duplicate candidate count %d", n)
		}
		seen[n] = true
	}
}
