package analysis

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// Strict and lenient accuracy and the role-level workflow metrics, read
// from the validation rollouts of the samples/ table (every validation
// episode: one row per agent turn in turn order and a `final` row).
//
// The workflows read a supervisory turn's output leniently, like the
// paper's code: an aggregator without a valid `Selected:` line picks the
// candidate of its first digit or candidate 1, an evaluator verdict that
// does not parse counts as Incorrect, an orchestrator without strategy
// lines has its list items taken or gets one free-choice worker (one that
// proposes too many ends the episode without an answer). Lenient
// accuracy is the workflow's final answer graded as it stands (the
// accuracy of the matrix). Strict accuracy counts an episode wrong as well
// when any supervisory turn's output did not parse: the samples'
// `compliant` column is the workflow's own parse result for those roles
// (harness/workflow sets it from the same parse that chooses the
// fallback).

// SupervisoryRoles are the roles whose output the workflows parse for
// their own control flow rather than grade as an answer (the registry's,
// sorted).
var SupervisoryRoles = study.SupervisoryRoles()

// The fallback classes as analysis counts them (the registry's words and
// meanings: study.Fallback). An orchestrator's list-items and dropped
// fallbacks both leave a strategy list and are one class here
// (study.Fallback.Class).
const (
	FallbackIncorrect  = string(study.FallbackIncorrect)
	FallbackFirstDigit = string(study.FallbackFirstDigit)
	FallbackCandidate1 = string(study.FallbackFirstCandidate)
	FallbackListItems  = string(study.FallbackListItems)
	FallbackFreeWorker = string(study.FallbackFreeWorker)
	FallbackNoAnswer   = string(study.FallbackNoAnswer)
	FallbackEnded      = string(study.FallbackEnded)
	fallbackUnknown    = "unknown-other" // not reached by the workflows' rules
)

// loggedFallbacks is the first schema version whose samples log the
// fallback the workflow took (the `fallback` column).
const loggedFallbacks = 3

// RoleStep is one supervisory role's turns at one validation.
type RoleStep struct {
	Role      string
	Turns     int            // the role's turns
	Unparsed  int            // turns whose output did not parse
	Fallbacks map[string]int // unparsed turns by fallback taken
}

// WorkflowStep is the role-level workflow metrics of one validation of a
// run view.
type WorkflowStep struct {
	Step     int64
	Episodes int
	Lenient  int // episodes whose final answer is correct
	Strict   int // of those, episodes whose supervisory turns all parsed
	Turns    int // agent turns over all episodes
	Roles    []RoleStep

	// Evaluator (eval-opt): parsed verdicts against the true correctness
	// of the generator turn they judged.
	Verdicts, Accepts          int
	FalseAccepts, FalseRejects int // accepted a wrong answer, rejected a right one
	CorrectJudged              int // parsed verdicts on a correct generator turn

	// Aggregator (voting): choices among the candidates.
	Choices, WithCorrect, PickedCorrect int // PickedCorrect counts episodes with a correct candidate
	PickedFirst                         int // choices of candidate 1

	// Orchestrator (orch-workers).
	Plans, Strategies, Workers int // orchestrator turns, strategies listed, worker turns

	// The supervisor's pick against its candidates (supervisor.go): the
	// aggregator among the generators' answers (voting), the synthesizer
	// among the workers' (orch-workers), per episode with such a turn.
	SupEpisodes     int
	SupCorrect      int     // the supervisor's answer correct
	FirstCorrect    int     // candidate 1 (generator0, worker0) correct
	MajorityCorrect int     // the most common candidate answer correct (the first in candidate order on a tie)
	OracleCorrect   int     // some candidate correct
	RandomCorrect   float64 // expected correct picks of a uniformly random candidate
	// SupDiff is, per validation problem, the summed supervisor-minus-
	// candidate-1 correctness (-1, 0 or 1 an episode) and the episodes.
	SupDiff map[string][2]int
	// Capped counts, per role, the outputs that stopped at the token cap
	// and all outputs.
	Capped map[string][2]int
}

// LenientRate is the fraction of episodes answered correctly.
func (w WorkflowStep) LenientRate() float64 { return frac(w.Lenient, w.Episodes) }

// StrictRate is the fraction answered correctly with every supervisory
// output parsed.
func (w WorkflowStep) StrictRate() float64 { return frac(w.Strict, w.Episodes) }

func frac(k, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return float64(k) / float64(n)
}

// Role returns the step's metrics of a role, or a zero RoleStep.
func (w WorkflowStep) Role(role string) RoleStep {
	for _, r := range w.Roles {
		if r.Role == role {
			return r
		}
	}
	return RoleStep{Role: role}
}

type episodeKey struct {
	problem string
	rollout int64
}

// WorkflowSteps computes the metrics of every validation of a run in
// workflow wf from its samples, by step; nil when it has no validation
// samples.
func WorkflowSteps(r *runlog.Run, wf string) []WorkflowStep {
	logged := r.Manifest.SchemaVersion >= loggedFallbacks
	bySteps := map[int64]map[episodeKey][]*runlog.SampleRow{}
	order := map[int64][]episodeKey{}
	for i := range r.Samples {
		s := &r.Samples[i]
		if s.Split != "val" || s.Workflow != wf {
			continue
		}
		m := bySteps[s.Step]
		if m == nil {
			m = map[episodeKey][]*runlog.SampleRow{}
			bySteps[s.Step] = m
		}
		k := episodeKey{s.ProblemID, s.Rollout}
		if _, ok := m[k]; !ok {
			order[s.Step] = append(order[s.Step], k)
		}
		m[k] = append(m[k], s)
	}
	steps := make([]int64, 0, len(bySteps))
	for st := range bySteps {
		steps = append(steps, st)
	}
	slices.Sort(steps)
	out := make([]WorkflowStep, 0, len(steps))
	for _, st := range steps {
		w := WorkflowStep{Step: st}
		roles := map[string]*RoleStep{}
		for _, k := range order[st] {
			addEpisode(&w, roles, bySteps[st][k], logged)
		}
		for _, role := range SupervisoryRoles {
			if rs, ok := roles[role]; ok {
				w.Roles = append(w.Roles, *rs)
			}
		}
		out = append(out, w)
	}
	return out
}

// addEpisode adds one episode's rows (in turn order) to w.
// logged says the rows carry the fallback column.
func addEpisode(w *WorkflowStep, roles map[string]*RoleStep, rows []*runlog.SampleRow, logged bool) {
	var final *runlog.SampleRow
	allParsed := true
	var lastGen *runlog.SampleRow
	var candidates, workers []*runlog.SampleRow
	for _, s := range rows {
		switch s.Role {
		case "final":
			final = s
			continue
		case study.Generator:
			lastGen = s
			candidates = append(candidates, s)
		case study.Worker:
			w.Workers++
			workers = append(workers, s)
		}
		w.Turns++
		if w.Capped == nil {
			w.Capped = map[string][2]int{}
		}
		c := w.Capped[s.Role]
		if s.Finish == engine.FinishLength {
			c[0]++
		}
		c[1]++
		w.Capped[s.Role] = c
		switch s.Role {
		case study.Aggregator:
			addPick(w, s, candidates)
		case study.Synthesizer:
			addPick(w, s, workers)
		}
		if !slices.Contains(SupervisoryRoles, s.Role) {
			continue
		}
		rs := roles[s.Role]
		if rs == nil {
			rs = &RoleStep{Role: s.Role, Fallbacks: map[string]int{}}
			roles[s.Role] = rs
		}
		rs.Turns++
		if !s.Compliant {
			allParsed = false
			rs.Unparsed++
			if logged {
				rs.Fallbacks[loggedFallbackOf(s)]++
			} else {
				rs.Fallbacks[derivedFallbackOf(s, len(candidates))]++
			}
		}
		switch s.Role {
		case study.Evaluator:
			if s.Compliant && lastGen != nil {
				accept := s.Parsed == "Correct"
				w.Verdicts++
				if accept {
					w.Accepts++
				}
				if lastGen.Correct {
					w.CorrectJudged++
				}
				if accept && !lastGen.Correct {
					w.FalseAccepts++
				}
				if !accept && lastGen.Correct {
					w.FalseRejects++
				}
			}
		case study.Aggregator:
			w.Choices++
			if s.Parsed == "1" {
				w.PickedFirst++
			}
			if slices.ContainsFunc(candidates, func(c *runlog.SampleRow) bool { return c.Correct }) {
				w.WithCorrect++
				if s.Correct {
					w.PickedCorrect++
				}
			}
		case study.Orchestrator:
			w.Plans++
			for _, line := range strings.Split(s.Parsed, "\n") {
				if strings.TrimSpace(line) != "" {
					w.Strategies++
				}
			}
		}
	}
	if final == nil {
		return
	}
	w.Episodes++
	if final.Correct {
		w.Lenient++
		if allParsed {
			w.Strict++
		}
	}
}

// addPick adds a supervisor's turn against its candidates (in candidate
// order) to w's supervisor-value counts.
func addPick(w *WorkflowStep, sup *runlog.SampleRow, cands []*runlog.SampleRow) {
	if len(cands) == 0 {
		return
	}
	w.SupEpisodes++
	b01 := func(ok bool) int {
		if ok {
			return 1
		}
		return 0
	}
	w.SupCorrect += b01(sup.Correct)
	w.FirstCorrect += b01(cands[0].Correct)
	count := map[string]int{}
	best := cands[0]
	right := 0
	for _, c := range cands {
		right += b01(c.Correct)
		a := strings.TrimSpace(c.Parsed)
		if a == "" {
			continue
		}
		count[a]++
		if b := strings.TrimSpace(best.Parsed); b == "" || count[a] > count[b] {
			best = c
		}
	}
	w.MajorityCorrect += b01(best.Correct)
	w.OracleCorrect += b01(right > 0)
	w.RandomCorrect += float64(right) / float64(len(cands))
	if w.SupDiff == nil {
		w.SupDiff = map[string][2]int{}
	}
	d := w.SupDiff[sup.ProblemID]
	d[0] += b01(sup.Correct) - b01(cands[0].Correct)
	d[1]++
	w.SupDiff[sup.ProblemID] = d
}

// loggedFallbackOf names the fallback class an unparsed supervisory turn
// took from the samples' fallback column (schema 3 on); a turn the
// workflow logged no word for (a synthesizer without an answer, an
// orchestrator that proposed too many strategies) takes its role's
// Unlogged class in the registry.
func loggedFallbackOf(s *runlog.SampleRow) string {
	if s.Fallback != "" {
		return string(study.Fallback(s.Fallback).Class())
	}
	if f := study.RoleOf(s.Role).Unlogged; f != study.NoFallback {
		return string(f)
	}
	return fallbackUnknown
}

// derivedFallbackOf names the fallback an unparsed supervisory turn took
// in a log older than schema 3, which has no fallback column, from what
// the logs keep of it (n candidates before an aggregator turn): the
// output and the parsed value, by the role's kind, so a selector's
// (the aggregator's) fallback is told apart
// by whether its first digit named the selected candidate. An
// orchestrator that proposed too many strategies (FallbackEnded) cannot be
// told apart from list-items without the run's max_subtasks and counts
// as list-items here.
func derivedFallbackOf(s *runlog.SampleRow, n int) string {
	switch study.RoleOf(s.Role).Kind {
	case study.Judge:
		return FallbackIncorrect
	case study.SynthesizerKind:
		return FallbackNoAnswer
	case study.Planner:
		if strings.TrimSpace(s.Parsed) == "" {
			return FallbackFreeWorker
		}
		return FallbackListItems
	case study.Selector:
		for _, c := range s.Completion {
			if c >= '0' && c <= '9' {
				if d := int(c - '0'); d >= 1 && d <= n && strconv.Itoa(d) == s.Parsed {
					return FallbackFirstDigit
				}
				break
			}
		}
		return FallbackCandidate1
	}
	return fallbackUnknown
}

// Fallbacks are the fallback classes a role can take, in print order
// (the registry's).
func Fallbacks(role string) []string {
	var out []string
	for _, f := range study.RoleOf(role).Fallbacks {
		out = append(out, string(f))
	}
	return out
}

// FinalWorkflowStep returns the metrics of the run view's last validation
// with samples, ok false when it has none.
func (r *RunResult) FinalWorkflowStep() (WorkflowStep, bool) {
	if len(r.Workflow) == 0 {
		return WorkflowStep{}, false
	}
	return r.Workflow[len(r.Workflow)-1], true
}

// FinalRates are a run view's strict and lenient final accuracy: like
// Metrics.Final, the mean over its last 3 validations with samples (fewer
// when it has fewer); ok is false without any.
func (r *RunResult) FinalRates() (strict, lenient float64, ok bool) {
	var n int
	for _, w := range r.Workflow[max(0, len(r.Workflow)-3):] {
		if w.Episodes == 0 {
			continue
		}
		strict += w.StrictRate()
		lenient += w.LenientRate()
		n++
	}
	if n == 0 {
		return math.NaN(), math.NaN(), false
	}
	return strict / float64(n), lenient / float64(n), true
}

// strictLenient sets a condition's strict and lenient final accuracy: the
// mean over its runs of each run's FinalRates, with the seed part of the
// interval rule (a t interval over seeds; no interval with one seed),
// since the strict grade is not resampled over problems.
func strictLenient(cs *CondSummary, runs []*RunResult, ci float64) {
	var strict, lenient []float64
	for _, r := range runs {
		if s, l, ok := r.FinalRates(); ok {
			strict = append(strict, s)
			lenient = append(lenient, l)
		}
	}
	cs.StrictFinal = seedEstimate(strict, ci, 0, 1)
	cs.LenientFinal = seedEstimate(lenient, ci, 0, 1)
}
