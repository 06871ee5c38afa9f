package analysis

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/marlowlab/marlow/harness/study"
)

// Supervisor value: what a workflow's supervisory role adds over its
// candidates, read from the validation samples the runs already log
// (roles.go: WorkflowStep). Claims c and d are about multi-agent mechanisms
// (gradient amplification among same-role agents, a supervisory role
// captured by the dominant one); in a cell whose supervisor adds nothing
// at base the workflow is a single agent with extra steps, and those
// claims are not testable there (SupervisorRule).

// SupervisorOf is the supervisory role whose value is measured in a
// workflow ("" for a workflow without one), from the registry: the
// supervisory role that chooses among candidates (voting's aggregator,
// orch-workers' synthesizer), else its first supervisory role (eval-opt's
// evaluator).
func SupervisorOf(workflow string) string {
	sup := study.WorkflowOf(workflow).Supervisory()
	for _, r := range sup {
		if study.RoleOf(r).Chooses != "" {
			return r
		}
	}
	if len(sup) > 0 {
		return sup[0]
	}
	return ""
}

// SupervisorRule states when a cell's supervisor adds value at base; the
// report reads it from here.
func SupervisorRule(ci float64) string {
	return fmt.Sprintf("at base (the first validation of every run view of the cell, pooled: each starts from the cell's base model) "+
		"the aggregator (voting) or the synthesizer (orch-workers) adds value when its accuracy minus that of candidate 1 (generator0, worker0), "+
		"averaged per validation problem over its episodes, has a %g%% t interval over problems that lies above 0; "+
		"the evaluator (eval-opt) adds value when it accepts correct generator turns more often than incorrect ones "+
		"(parsed verdicts; one-sided Fisher exact p below %.3g). The value is measured only where there is something to choose: some candidate right at base (voting, orch-workers), "+
		"or both correct and incorrect generator turns judged (eval-opt). A cell whose supervisor is measured and adds no value is left out of claims c and d", ci*100, 1-ci)
}

// SupervisorValue is a cell's supervisor at base, pooled over the first
// validation of its run views.
type SupervisorValue struct {
	Cell     CellKey
	Role     string
	Runs     int // run views pooled
	Episodes int // episodes with a supervisor turn (voting, orch-workers) or parsed verdicts (eval-opt)

	// Voting and orch-workers: the supervisor's accuracy and that of
	// candidate 1, a uniformly random candidate, the most common answer
	// and the oracle (any candidate right).
	Sup, First, Random, Majority, Oracle float64
	Problems                             int
	Diff                                 Estimate // supervisor minus candidate 1, per problem, t interval over problems

	// Eval-opt: parsed verdicts against the judged generator turn's grade.
	TrueAccepts, FalseAccepts, TrueRejects, FalseRejects int
	P                                                    float64 // one-sided Fisher exact p that correct turns are accepted more often

	Measured bool // there was something to choose at base (SupervisorRule)
	Adds     bool // SupervisorRule
}

// AcceptRate is the evaluator's share of parsed verdicts that accept.
func (v SupervisorValue) AcceptRate() float64 {
	return frac(v.TrueAccepts+v.FalseAccepts, v.TrueAccepts+v.FalseAccepts+v.TrueRejects+v.FalseRejects)
}

// SupervisorValues is the supervisor value at base of every cell whose
// workflow has a supervisor, in the study's cell order.
func SupervisorValues(st *Study) []SupervisorValue {
	var out []SupervisorValue
	for _, c := range st.Cells {
		role := SupervisorOf(c.Key.Workflow)
		if role == "" {
			continue
		}
		v := SupervisorValue{Cell: c.Key, Role: role, P: math.NaN(), Diff: noCI(math.NaN())}
		var sum WorkflowStep
		diff := map[string][2]int{}
		for _, r := range st.Runs {
			if r.Cell != c.Key || len(r.Workflow) == 0 {
				continue
			}
			w := r.Workflow[0]
			v.Runs++
			addStep(&sum, w)
			for p, d := range w.SupDiff {
				x := diff[p]
				x[0] += d[0]
				x[1] += d[1]
				diff[p] = x
			}
		}
		setSupervisorValue(&v, sum, diff, st.Params.CI)
		out = append(out, v)
	}
	return out
}

// SupervisorValueOf is the supervisor value of role in one validation w
// (one run view, or a base model's calibration), by the rule of
// SupervisorValues at interval level ci.
func SupervisorValueOf(role string, w WorkflowStep, ci float64) SupervisorValue {
	v := SupervisorValue{Role: role, Runs: 1, P: math.NaN(), Diff: noCI(math.NaN())}
	var sum WorkflowStep
	addStep(&sum, w)
	setSupervisorValue(&v, sum, w.SupDiff, ci)
	return v
}

// setSupervisorValue fills v from the pooled counts sum and the per-problem
// supervisor-minus-candidate-1 sums diff (SupervisorRule).
func setSupervisorValue(v *SupervisorValue, sum WorkflowStep, diff map[string][2]int, ci float64) {
	if v.Role == study.Evaluator {
		v.Episodes = sum.Verdicts
		v.TrueAccepts = sum.Accepts - sum.FalseAccepts
		v.FalseAccepts = sum.FalseAccepts
		v.FalseRejects = sum.FalseRejects
		v.TrueRejects = sum.Verdicts - sum.Accepts - sum.FalseRejects
		right, wrong := sum.CorrectJudged, sum.Verdicts-sum.CorrectJudged
		if right > 0 && wrong > 0 {
			v.Measured = true
			v.P = FisherGreater(v.TrueAccepts, right, v.FalseAccepts, wrong)
			v.Adds = Rejects(v.P, 1-ci)
		}
		return
	}
	v.Episodes = sum.SupEpisodes
	n := float64(sum.SupEpisodes)
	v.Sup, v.First, v.Random = float64(sum.SupCorrect)/n, float64(sum.FirstCorrect)/n, sum.RandomCorrect/n
	v.Majority, v.Oracle = float64(sum.MajorityCorrect)/n, float64(sum.OracleCorrect)/n
	var per []float64
	for _, p := range slices.Sorted(maps.Keys(diff)) {
		per = append(per, float64(diff[p][0])/float64(diff[p][1]))
	}
	v.Problems = len(per)
	v.Diff = seedEstimate(per, ci, -1, 1)
	v.Measured = sum.OracleCorrect > 0
	v.Adds = v.Diff.HasCI() && v.Diff.Lo > 0
}

// TrueAcceptRate is the evaluator's share of accepts among its parsed
// verdicts on correct generator turns (NaN without such verdicts).
func (v SupervisorValue) TrueAcceptRate() float64 {
	return frac(v.TrueAccepts, v.TrueAccepts+v.FalseRejects)
}

// FalseAcceptRate is the evaluator's share of accepts among its parsed
// verdicts on incorrect generator turns (NaN without such verdicts).
func (v SupervisorValue) FalseAcceptRate() float64 {
	return frac(v.FalseAccepts, v.FalseAccepts+v.TrueRejects)
}

// Wilson is the Wilson score interval at level ci of a binomial
// proportion of k successes in n trials ([0, 1] when n is 0).
func Wilson(k, n int, ci float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	z := math.Sqrt2 * math.Erfinv(ci)
	fn := float64(n)
	p := float64(k) / fn
	d := 1 + z*z/fn
	mid := (p + z*z/(2*fn)) / d
	half := z / d * math.Sqrt(p*(1-p)/fn+z*z/(4*fn*fn))
	return max(0, mid-half), min(1, mid+half)
}

// addStep adds a validation's supervisor counts to sum.
func addStep(sum *WorkflowStep, w WorkflowStep) {
	sum.Verdicts += w.Verdicts
	sum.Accepts += w.Accepts
	sum.FalseAccepts += w.FalseAccepts
	sum.FalseRejects += w.FalseRejects
	sum.CorrectJudged += w.CorrectJudged
	sum.SupEpisodes += w.SupEpisodes
	sum.SupCorrect += w.SupCorrect
	sum.FirstCorrect += w.FirstCorrect
	sum.MajorityCorrect += w.MajorityCorrect
	sum.OracleCorrect += w.OracleCorrect
	sum.RandomCorrect += w.RandomCorrect
	sum.Plans += w.Plans
	sum.Strategies += w.Strategies
}

// valuedCells maps each cell whose supervisor value was measured to
// whether it adds value at base.
func valuedCells(vs []SupervisorValue) map[CellKey]bool {
	out := map[CellKey]bool{}
	for _, v := range vs {
		if v.Measured {
			out[v.Cell] = v.Adds
		}
	}
	return out
}

// SupervisorAt is a run view's supervisor metrics at one validation: the
// supervisor's pick against its candidates, the evaluator's verdicts, the
// orchestrator's plans, and each role's share of outputs at the token cap.
type SupervisorAt struct {
	Step                                 int64
	Sup, First, Random, Majority, Oracle float64 // NaN without supervisor turns
	AcceptRate                           float64 // evaluator, parsed verdicts; NaN without
	TrueAccepts, FalseAccepts            int
	TrueRejects, FalseRejects            int
	StrategiesPerPlan                    float64 // NaN without plans
	Capped                               map[string]float64
}

// SupervisorAtStep reads the supervisor metrics of one validation.
func SupervisorAtStep(w WorkflowStep) SupervisorAt {
	n := float64(w.SupEpisodes)
	a := SupervisorAt{Step: w.Step, Sup: math.NaN(), First: math.NaN(), Random: math.NaN(), Majority: math.NaN(), Oracle: math.NaN(),
		AcceptRate: frac(w.Accepts, w.Verdicts), StrategiesPerPlan: frac(w.Strategies, w.Plans), Capped: map[string]float64{}}
	if w.SupEpisodes > 0 {
		a.Sup, a.First, a.Random = float64(w.SupCorrect)/n, float64(w.FirstCorrect)/n, w.RandomCorrect/n
		a.Majority, a.Oracle = float64(w.MajorityCorrect)/n, float64(w.OracleCorrect)/n
	}
	a.TrueAccepts, a.FalseAccepts = w.Accepts-w.FalseAccepts, w.FalseAccepts
	a.TrueRejects, a.FalseRejects = w.Verdicts-w.Accepts-w.FalseRejects, w.FalseRejects
	for role, c := range w.Capped {
		a.Capped[role] = frac(c[0], c[1])
	}
	return a
}

// SameRoleCosine summarises the cosine between same-role agents' gradients
// (steps.agent_cos_mean) over the step rows of the trained run views (SP
// and IP) whose role has two or more agents: the premise of gradient
// amplification among same-role agents, which needs their gradients to
// point the same way.
type SameRoleCosine struct {
	Steps int     // step rows with a same-role cosine
	Mean  float64 // their mean cosine (NaN without any)
	Above int     // step rows with a cosine above amp_cos
}

// SameRoleCosines measures the same-role cosine over the study's trained
// run views (each run once, its first view).
func SameRoleCosines(st *Study) SameRoleCosine {
	var c SameRoleCosine
	var sum float64
	seen := map[string]bool{}
	for _, r := range st.Runs {
		if !r.Trained() || seen[r.RunID] {
			continue
		}
		seen[r.RunID] = true
		for _, s := range r.Steps() {
			if s.Role == "*" || math.IsNaN(s.AgentCosMean) {
				continue
			}
			c.Steps++
			sum += s.AgentCosMean
			if s.AgentCosMean > st.Params.AmpCos {
				c.Above++
			}
		}
	}
	c.Mean = math.NaN()
	if c.Steps > 0 {
		c.Mean = sum / float64(c.Steps)
	}
	return c
}

// CoherenceScales summarises the coherence regularizer's realised factor
// (steps.coherence_scale) and the cosine it acts on (coherence_cos) over
// the step rows of the run views trained with it (I6), each run once.
type CoherenceScales struct {
	// Form is the regularizer's form: "" for the paper's (each role's
	// gradient scaled; Steps count role-steps and the scales are the
	// roles' factors) or "step" (the optimizer's step scaled; Steps count
	// adapter-steps and the scales are the step factors, logged on the "*"
	// rows).
	Form          string
	Runs, Steps   int
	MeanScale     float64 // NaN without steps
	MinScale      float64
	MeanCos       float64 // the roles' cosine to their gradient EMA
	ScaledBelow09 int     // steps whose factor was below 0.9
}

// CoherenceScalesOf measures the I6 runs' realised scales, one entry per
// form with runs (the paper's first).
func CoherenceScalesOf(st *Study) []CoherenceScales {
	var out []CoherenceScales
	for _, form := range []string{"", study.CoherenceStep} {
		if c := coherenceScalesOf(st, form); c.Runs > 0 {
			out = append(out, c)
		}
	}
	return out
}

func coherenceScalesOf(st *Study, form string) CoherenceScales {
	c := CoherenceScales{Form: form, MeanScale: math.NaN(), MinScale: math.NaN(), MeanCos: math.NaN()}
	var sumS, sumC float64
	var nCos int
	seen := map[string]bool{}
	for _, r := range st.Runs {
		if !r.Trained() || seen[r.RunID] {
			continue
		}
		set := r.Settings()
		if (set.Intervention != I6 && set.Intervention != I1I6) || set.CoherenceForm != form {
			continue
		}
		seen[r.RunID] = true
		c.Runs++
		for _, s := range r.Steps() {
			if s.Role != "*" && !math.IsNaN(s.CoherenceCos) {
				sumC += s.CoherenceCos
				nCos++
			}
			// the paper's form: each role's factor; the step form: the
			// adapter's step factor on the "*" row
			if (s.Role == "*") != (form == study.CoherenceStep) || math.IsNaN(s.CoherenceScale) {
				continue
			}
			c.Steps++
			sumS += s.CoherenceScale
			if math.IsNaN(c.MinScale) || s.CoherenceScale < c.MinScale {
				c.MinScale = s.CoherenceScale
			}
			if s.CoherenceScale < 0.9 {
				c.ScaledBelow09++
			}
		}
	}
	if c.Steps > 0 {
		c.MeanScale = sumS / float64(c.Steps)
	}
	if nCos > 0 {
		c.MeanCos = sumC / float64(nCos)
	}
	return c
}
