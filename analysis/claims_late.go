package analysis

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// The late-training rules: claims c and d as the dynamics study
// (seeds/dynamics.yaml, reports/dynamics) judges them, on runs long enough
// and at a rate high enough to have a late phase. The short-run rules
// (claims.go) ask where terminal cliffs fall in a study whose recipe decays
// the rate to zero; these ask whether late events happen at all (the gate),
// whether a gradient signature predicts them, and whether the interventions
// move them. The rules the code applies, with alpha = 1 - ci:
//
//   - A study is judged by these rules when a strict majority of its
//     trained (SP or IP) run views hold their learning rate through the
//     second half (LateStudyLRShare) with LateStudyValidations validations
//     in it (LateStudy).
//   - The gate is open when some trained run view has a late event (a
//     lasting cliff or format collapse after the midpoint, late.go). A
//     closed gate makes c not testable: the replica did not produce what
//     the claim is about at these settings.
//   - Runs are grouped by condition, workflow and intervention (I1: a
//     KL coefficient above 0 on a role other than the workflow's
//     supervisory ones, AnchorRule; I6: the coherence regularizer on),
//     read from each run's stored config. The tests of where cliffs fall,
//     of the signature and of SP over IP take the runs of the main recipe
//     only: the main matrix (Arm "") and its rate rungs (rungs.go), not an
//     arm's other scale, base model or partial grid, which the rules
//     would otherwise pool with it.
//   - c, where: the rate of late cliffs in IP runs without an intervention
//     of the workflows whose stages run several agents of one role
//     (study.SameRoleWorkflows: voting and orch-workers among the
//     built-ins) is compared with IP's in the other multi-agent workflows
//     (study.OneAgentPerRoleWorkflows: eval-opt) and with SP's in the
//     former (one-sided Fisher exact tests). Holds when
//     both p-values are below alpha; against when a one-sided Fisher exact
//     test finds either other rate above it (p below alpha: the power rule
//     of exact.go); undecided otherwise; not testable when a group has no
//     run.
//   - c, signature: in each IP run (no intervention) with a late cliff the
//     amplification signature (detect.go: a role's sustained gradient
//     amplification) must begin SignatureLead or more steps before the
//     fall; in IP runs without a cliff it must be rare. Holds when a strict
//     majority of cliff runs lead and at most RareShare of the runs without
//     a cliff carry the signature; against when a one-sided exact binomial
//     test finds significantly fewer than half leading, or significantly
//     more than RareShare of the runs without a cliff carrying it (a
//     signature that does not tell the runs apart predicts nothing), each
//     p below alpha; undecided otherwise;
//     not testable with fewer than MinClaimSeeds cliff runs, or, when the
//     cliffs lead, without a run that has none to measure rarity on.
//   - c, I6: IP runs with the coherence regularizer against IP runs without
//     one in the same cells (workflow, task and scale) at the same rate,
//     base model and n_votes: an intervention arm against the main matrix.
//     Holds when the cliff rate is lower with I6 (one-sided Fisher exact,
//     p below alpha), the signature's rate is lower, and the mean ceiling
//     is at most CeilingCost lower; against when the cliff rate is higher
//     with I6 (one-sided Fisher exact, p below alpha); undecided otherwise;
//     not
//     testable without I6 runs or without plain runs beside them, or when
//     no plain run beside them has a late cliff (nothing to prevent).
//   - c's verdict: refuted when the signature test or the I6 test is
//     against; otherwise not testable when a test is not testable;
//     reproduced when all three hold; inconclusive otherwise. When I1 runs
//     lower the cliff rate (p below alpha) and I6 runs do not, DriftNotCoherence
//     is set; the report says that alone does not tell drift from
//     coherence (I1 anchors any departure from the base model, and an I6
//     whose realised scale stays near 1 acts on neither).
//   - Beside c (a finding, not a test): for I1 and I6 under IP and SP, the
//     share of runs with a lasting role format collapse (any, and late)
//     with the intervention against without one in the same recipes, with
//     a one-sided Fisher exact p-value that it is lower with it, and the
//     mean ceiling's change. c's rules count cliffs only; where a study's
//     late events are format collapses, this shows what the interventions
//     changed.
//   - d, SP over IP: runs are captured when a role is captured
//     (CaptureDefinition; for IP, whose roles have their own adapters,
//     against the dominant role of the cell's SP runs). Holds when SP's
//     rate exceeds IP's (one-sided Fisher exact, p below alpha); against
//     when IP's rate exceeds SP's by the same test; undecided otherwise;
//     not testable when either has no judged run.
//   - d, n_votes: SP voting runs of one task, one base model and one rate
//     at the smallest and the largest n_votes (the gradient-mass arms).
//     Holds when the larger count's capture rate exceeds the smaller's (p
//     below alpha); against when the smaller count's exceeds the larger's
//     by the same test; undecided otherwise; not testable with one count.
//   - d's verdict: refuted when SP over IP is against; otherwise not
//     testable when a test is not testable; reproduced when both hold;
//     inconclusive otherwise.

// SignatureLead is how many steps before a cliff's fall the amplification
// signature must begin to count as predicting it.
const SignatureLead = 20

// RareShare is the largest share of runs without a cliff that may carry
// the signature for it to be rare.
const RareShare = 0.25

// CeilingCost is the largest fall of the mean ceiling that counts as a
// small cost of an intervention.
const CeilingCost = 0.05

// Interventions a run can carry.
const (
	NoIntervention = ""
	I1             = "I1"    // per-role KL to the base model
	I6             = "I6"    // coherence regularizer
	I1I6           = "I1+I6" // both
)

// RunSettings are the settings of a run view the late rules group by.
type RunSettings struct {
	Intervention string
	// Anchored are the supervisory roles with a KL coefficient above 0
	// (AnchorRule), sorted, joined by "+"; "" when none, and for a run
	// carrying I1 (whose KL anchors every role it names).
	Anchored string
	// CoherenceForm is grpo.coherence.form: "" for the paper's form (and
	// without the regularizer), study.CoherenceStep for the step form.
	CoherenceForm string
	NVotes        int    // 0 when the config has none
	LR            string // grpo.lr as stored
	Model         string // the model settings as one string (runs of one base model share it)
}

// Settings reads a run view's settings from its stored config.
func (r *RunResult) Settings() RunSettings {
	var s RunSettings
	if r.run == nil || r.run.Manifest.Config == nil {
		return s
	}
	leaves, err := runlog.ConfigLeaves(r.run.Manifest.Config)
	if err != nil {
		return s
	}
	num := func(k string) float64 {
		v, err := strconv.ParseFloat(leaves[k], 64)
		if err != nil {
			return 0
		}
		return v
	}
	var kl, coh bool
	var model, anchored []string
	wf := study.WorkflowOf(r.TrainWorkflow)
	roles, sup := wf.Roles(), wf.Supervisory()
	for _, k := range slices.Sorted(maps.Keys(leaves)) {
		switch {
		case strings.HasPrefix(k, "grpo.kl_coef.") && num(k) > 0:
			switch role := strings.TrimPrefix(k, "grpo.kl_coef."); {
			case !slices.Contains(roles, role):
				// a role the workflow does not call: no effect
			case slices.Contains(sup, role):
				anchored = append(anchored, role)
			default:
				kl = true
			}
		case k == "grpo.coherence.lambda" && num(k) > 0:
			coh = true
		case strings.HasPrefix(k, "model.") && !placeSettings[k]:
			model = append(model, k+"="+leaves[k])
		}
	}
	switch {
	case kl && coh:
		s.Intervention = I1I6
	case kl:
		s.Intervention = I1
	case coh:
		s.Intervention = I6
	}
	if !kl {
		s.Anchored = strings.Join(anchored, "+")
	}
	// a string leaf is stored JSON-quoted
	if f, err := strconv.Unquote(leaves["grpo.coherence.form"]); err == nil {
		s.CoherenceForm = f
	}
	s.NVotes = int(num("workflow_settings.n_votes"))
	s.LR = leaves["grpo.lr"]
	s.Model = strings.Join(model, ";")
	return s
}

// AnchorRule states when a KL coefficient is intervention I1; the report
// reads it from here.
const AnchorRule = "a run carries I1 (per-role KL to the base model) when a role of its workflow other than the supervisory ones (aggregator, evaluator, orchestrator, synthesizer: the roles that judge, choose or plan) has a KL coefficient above 0 (a coefficient for a role the workflow does not call has no effect); " +
	"a KL coefficient on supervisory roles alone anchors their skill at base, which is a recipe (it keeps the supervisors adding value while the agents the claims are about train free) and not the intervention, and runs with and without such an anchor are never pooled as one recipe"

// LateStudyLRShare is the least share of the summed learning rate the
// second half of a run must carry for the late rules: a constant rate after
// a short warm-up carries about half, a cosine decay to zero about a fifth
// (the mini study's largest share was 0.214).
const LateStudyLRShare = 0.4

// LateStudyValidations is the fewest validations after the midpoint a run
// needs for the late rules: room for a lasting event (LateLasting) to begin
// late, and for two more after it.
const LateStudyValidations = 3 * LateLasting

// LateStudy reports whether a strict majority of the study's trained run
// views hold their rate through the second half (LateStudyLRShare, from
// logged rates) with LateStudyValidations validations in it, so that
// claims c and d are judged by the late-training rules.
func LateStudy(st *Study) bool {
	n, late := 0, 0
	for _, r := range st.Runs {
		if !r.Trained() {
			continue
		}
		n++
		lp := LatePhaseOf(r)
		if lp.LateValidations >= LateStudyValidations && !math.IsNaN(lp.LRShare) && lp.LRShare >= LateStudyLRShare-1e-12 {
			late++
		}
	}
	return n > 0 && 2*late > n
}

// RunEvents are the late events of one trained run view with what the
// rules read beside them.
type RunEvents struct {
	Run         string
	Cell        CellKey
	Condition   string
	Settings    RunSettings
	Events      LateEvents
	Ceiling     float64
	Signature   int64 // first step closing a sustained amplification window of any role, -1 when none
	SignatureBy string
	// SignatureSameRole: the role that carries the signature has two or
	// more agents, so its window required their gradients' cosine above
	// amp_cos as well as the norm; false for a role with one agent, tested
	// on its norm alone (detect.go).
	SignatureSameRole bool
	Leads             bool // a late cliff with the signature SignatureLead or more steps before its fall
	Captured          bool // a role captured (SP by detect.go; IP against the cell's SP dominant role)
	CaptureJudge      bool // the run has capture comparisons
	MainRecipe        bool // of the main matrix or a rate rung (rungs.go)
}

// Gate is the dynamics study's gate: did any run break late?
type Gate struct {
	Runs            []RunEvents // every trained run view, in the study's order
	Late            int         // runs with a late event
	EarlyOnly       int         // runs whose events are all early
	None            int         // runs without an event
	LateCliffs      int         // runs with a late cliff
	LateCollapses   int         // runs with a late format collapse
	Open            bool        // Late > 0
	CliffControlled bool        // the late-event detectors have a shown positive control
	Rungs           []string    // the study's rate rungs (rungs.go), sorted
}

// LateTest is one test of the late rules.
type LateTest struct {
	Outcome Outcome
	Reason  LateReason
	Rates   []LateRate // the groups the test compares, in the order the rule names them
	P       []float64  // the p-values of the claim's direction, in the order the rule names them
	// PAgainst are the one-sided p-values of the opposite direction, one
	// per comparison of P: the test is against only when one is below
	// alpha (the power rule, exact.go).
	PAgainst []float64
	// Detectable is, per comparison, the smallest difference of rates a
	// one-sided exact test at alpha could detect against the claim with
	// these numbers of runs (NaN: none could); set when the test is
	// undecided.
	Detectable []float64
	Diff       float64 // the I6 test: mean ceiling with I6 minus without (NaN otherwise)
}

// LateRate is one group's count with its exact interval.
type LateRate struct {
	Group string
	Rate
}

// LateReason is what decided a late test.
type LateReason int

// Reasons of late tests.
const (
	LateNoReason        LateReason = iota
	GateClosed                     // no trained run has a late event
	NoGroup                        // a group the test compares has no run
	NoLateControl                  // a detector the test rests on has no positive control
	Significant                    // the p-values are below alpha
	OppositeSignificant            // a one-sided exact test rejects the claim's direction at alpha
	NotSignificant                 // no one-sided test rejects either direction at alpha
	NoLateCliff                    // no IP run (no intervention) has a late cliff
	OneCliffRun                    // fewer than MinClaimSeeds IP runs have a late cliff
	NoQuietRun                     // every IP run has a late cliff, so rarity cannot be measured
	MostLead                       // a strict majority of cliff runs lead, and the signature is rare
	FewLead                        // significantly fewer than half of the cliff runs lead (one-sided binomial)
	CommonSignature                // the signature is significantly more common than RareShare in the runs without a cliff
	Between                        // neither
	OneCount                       // one n_votes value only
	NothingToPrevent               // no IP run without the intervention has a late cliff
	NoSupervisorValue              // the test's runs are all in cells whose supervisor adds no value at base
)

// LateCliffClaim is claim c under the late rules.
type LateCliffClaim struct {
	Verdict          Verdict
	Where, Signature LateTest
	I6               LateTest
	// QuietSignature says, for the signature test's IP runs without a
	// cliff that carry the signature, which role carries it first: what a
	// common signature, and so an against, rests on.
	QuietSignature    []SignatureRole
	DriftNotCoherence bool     // I1 lowered the cliff rate and I6 did not
	I1                LateTest // I1 against plain IP, by the I6 test's rule; its first p-value (cliff rate lower with I1) sets DriftNotCoherence
}

// LateCaptureClaim is claim d under the late rules.
type LateCaptureClaim struct {
	Verdict   Verdict
	SPOverIP  LateTest
	NVotes    LateTest
	NVotesLo  int
	NVotesHi  int
	NVotesFor string // the task of the n_votes comparison
}

// LateClaims are the gate and claims c and d under the late rules.
type LateClaims struct {
	Gate          Gate
	Cliffs        LateCliffClaim
	Capture       LateCaptureClaim
	Interventions []InterventionCollapse // what I1 and I6 did to format collapses, beside claim c
	// ByRate are the late cliffs of the main recipe (without the cells
	// Excluded) per learning rate, from the lowest, and RateTrend the test
	// of the highest rate over the lowest: nil and NaN without a rate rung.
	ByRate    []RateCliffs
	RateTrend RateTrend
	Alpha     float64
	// Excluded are the cells whose runs claims c and d leave out: their
	// supervisor adds no value at base (SupervisorRule).
	Excluded []CellKey
	// Ungated are claims c and d with every cell's runs, beside the gated
	// verdicts when Excluded is not empty (nil otherwise): what the rules
	// would read without the supervisor-value gate.
	UngatedCliffs  *LateCliffClaim
	UngatedCapture *LateCaptureClaim
}

// InterventionCollapse is what an intervention did to the lasting format
// collapses (late.go) of one condition's runs: the runs with it against
// the runs without any of the same recipes (pairedRuns). It is a finding
// beside claim c, not one of its tests: c's rules count cliffs, and a
// study whose late events are format collapses would otherwise not show
// what the interventions changed.
type InterventionCollapse struct {
	Intervention string
	Condition    string
	Recipes      int  // recipes (cell, rate, base model, n_votes) with both
	With         Rate // runs with the intervention that had a role's format collapse
	Without      Rate // runs without one that had a role's format collapse
	LateWith     Rate // runs with the intervention that had a late format collapse
	LateWithout  Rate
	P            float64 // one-sided Fisher exact p-value that the rate without exceeds the rate with
	CeilingDiff  float64 // mean ceiling with the intervention minus without
}

// CompareLate applies the late-training rules to the study.
func CompareLate(st *Study) *LateClaims {
	return compareLate(st, valuedCells(SupervisorValues(st)))
}

// compareLate applies the late rules; claims c and d take only the runs of
// cells whose supervisor adds value at base (valued; a cell absent from it
// has no supervisor to judge and is kept). A test that has runs without
// that exclusion and none with it is not testable for want of supervisor
// value (NoSupervisorValue), as is one left without a group to compare
// that has its groups without the exclusion.
func compareLate(st *Study, valued map[CellKey]bool) *LateClaims {
	lc := &LateClaims{Alpha: 1 - st.Params.CI}
	lc.Gate = gateOf(st)
	kept := lc.Gate
	kept.Runs = nil
	excluded := map[CellKey]bool{}
	for _, e := range lc.Gate.Runs {
		if adds, ok := valued[e.Cell]; ok && !adds {
			excluded[e.Cell] = true
			continue
		}
		kept.Runs = append(kept.Runs, e)
	}
	for _, c := range st.Cells {
		if excluded[c.Key] {
			lc.Excluded = append(lc.Excluded, c.Key)
		}
	}
	lc.Cliffs = lateClaimC(st, kept, lc.Alpha)
	lc.Capture = lateClaimD(st, kept, lc.Alpha)
	if len(lc.Excluded) > 0 {
		all := lateClaimC(st, lc.Gate, lc.Alpha)
		allD := lateClaimD(st, lc.Gate, lc.Alpha)
		lc.UngatedCliffs, lc.UngatedCapture = &all, &allD
		for _, x := range []struct{ got, without *LateTest }{
			{&lc.Cliffs.Where, &all.Where}, {&lc.Cliffs.Signature, &all.Signature}, {&lc.Cliffs.I6, &all.I6}, {&lc.Cliffs.I1, &all.I1},
			{&lc.Capture.SPOverIP, &allD.SPOverIP}, {&lc.Capture.NVotes, &allD.NVotes},
		} {
			if x.got.Outcome == Untestable && (x.without.Outcome != Untestable || (x.got.Reason == NoGroup && x.without.Reason != NoGroup)) {
				x.got.Reason = NoSupervisorValue
			}
		}
		lc.Cliffs.Verdict = combine(lc.Cliffs.Signature.Outcome == Against || lc.Cliffs.I6.Outcome == Against, lc.Cliffs.Where, lc.Cliffs.Signature, lc.Cliffs.I6)
		lc.Capture.Verdict = combine(lc.Capture.SPOverIP.Outcome == Against, lc.Capture.SPOverIP, lc.Capture.NVotes)
	}
	lc.Interventions = interventionCollapses(lc.Gate, st.Params.CI)
	lc.ByRate, lc.RateTrend = CliffsByRate(kept, st.Params.CI)
	return lc
}

func gateOf(st *Study) Gate {
	g := Gate{CliffControlled: st.controlled(LateEventDetector), Rungs: RateRungs(st)}
	dominant := cellDominants(st)
	for _, r := range st.Runs {
		if !r.Trained() {
			continue
		}
		e := RunEvents{Run: r.RunID, Cell: r.Cell, Condition: r.Condition, Settings: r.Settings(), Events: r.Late,
			Ceiling: r.Metrics.Ceiling, Signature: -1, MainRecipe: r.Cell.Arm == "" || slices.Contains(g.Rungs, r.Cell.Arm)}
		for _, a := range r.Amplification {
			if a.Amplified && (e.Signature < 0 || a.Sustained < e.Signature) {
				e.Signature, e.SignatureBy, e.SignatureSameRole = a.Sustained, a.Role, a.Cosine
			}
		}
		if c := r.Late.Cliff; c.Late && e.Signature >= 0 && e.Signature <= c.FallStep-SignatureLead {
			e.Leads = true
		}
		caps := r.Capture
		if r.Condition == study.IP {
			if d, ok := dominant[r.Cell]; ok {
				caps = r.CaptureAgainst(d)
			}
		}
		for _, c := range caps {
			e.CaptureJudge = true
			e.Captured = e.Captured || c.Captured
		}
		switch {
		case r.Late.Late:
			g.Late++
		case r.Late.Early:
			g.EarlyOnly++
		default:
			g.None++
		}
		if r.Late.Cliff.Late {
			g.LateCliffs++
		}
		if r.Late.LateCollapse() {
			g.LateCollapses++
		}
		g.Runs = append(g.Runs, e)
	}
	g.Open = g.Late > 0
	return g
}

// cellDominants is, per cell, the dominant role most often named by its SP
// runs (the first by name on a tie).
func cellDominants(st *Study) map[CellKey]string {
	votes := map[CellKey]map[string]int{}
	for _, r := range st.Runs {
		if r.Condition != study.SP {
			continue
		}
		for _, d := range r.Dominance {
			if d.DominantRole == "" {
				continue
			}
			if votes[r.Cell] == nil {
				votes[r.Cell] = map[string]int{}
			}
			votes[r.Cell][d.DominantRole]++
		}
	}
	out := map[CellKey]string{}
	for c, v := range votes {
		best := ""
		for _, role := range slices.Sorted(maps.Keys(v)) {
			if best == "" || v[role] > v[best] {
				best = role
			}
		}
		out[c] = best
	}
	return out
}

// rateOf counts the runs matching in and, of those, the ones matching hit.
func rateOf(g Gate, group string, ci float64, in, hit func(RunEvents) bool) LateRate {
	k, n := 0, 0
	for _, e := range g.Runs {
		if in(e) {
			n++
			if hit(e) {
				k++
			}
		}
	}
	return LateRate{Group: group, Rate: ClopperPearson(k, n, ci)}
}

// Plain reports whether the run view is of the main recipe (the main
// matrix or a rate rung) and carries no intervention: the runs where,
// signature and SP over IP judge.
func (e RunEvents) Plain() bool { return e.MainRecipe && e.Settings.Intervention == NoIntervention }

// plainIP selects the IP runs of the main recipe without an intervention in
// the workflows wfs.
func plainIP(wfs ...string) func(RunEvents) bool {
	return func(e RunEvents) bool {
		return e.Condition == study.IP && e.Plain() && slices.Contains(wfs, e.Cell.Workflow)
	}
}

func lateCliffHit(e RunEvents) bool { return e.Events.Cliff.Late }

// exceeds is the one-sided comparison of rate a over each of bs by
// Fisher's exact test: Holds when every p-value of a over b is below
// alpha; Against when, for some b, the p-value of b over a is (the power
// rule: a point estimate at or below b is not enough); Undecided otherwise,
// with the smallest difference detectable against the claim.
func exceeds(a LateRate, alpha float64, bs ...LateRate) LateTest {
	t := LateTest{Rates: append([]LateRate{a}, bs...), Diff: math.NaN()}
	for _, r := range t.Rates {
		if r.N == 0 {
			t.Outcome, t.Reason = Untestable, NoGroup
			return t
		}
	}
	sig, against := true, false
	for _, b := range bs {
		p, q := FisherGreater(a.K, a.N, b.K, b.N), FisherGreater(b.K, b.N, a.K, a.N)
		t.P = append(t.P, p)
		t.PAgainst = append(t.PAgainst, q)
		t.Detectable = append(t.Detectable, FisherDetectable(b.N, a.N, alpha))
		against = against || Rejects(q, alpha)
		sig = sig && Rejects(p, alpha)
	}
	switch {
	case against:
		t.Outcome, t.Reason = Against, OppositeSignificant
	case sig:
		t.Outcome, t.Reason = Holds, Significant
	default:
		t.Outcome, t.Reason = Undecided, NotSignificant
	}
	return t
}

func lateClaimC(st *Study, g Gate, alpha float64) LateCliffClaim {
	ci := st.Params.CI
	var c LateCliffClaim
	v := rateOf(g, "IP "+SameRoleWorkflowsText("and"), ci, plainIP(cliffWorkflows()...), lateCliffHit)
	e := rateOf(g, "IP "+OneAgentPerRoleWorkflowsText("and"), ci, plainIP(study.OneAgentPerRoleWorkflows()...), lateCliffHit)
	s := rateOf(g, "SP "+SameRoleWorkflowsText("and"), ci, func(x RunEvents) bool {
		return x.Condition == study.SP && x.Plain() && slices.Contains(cliffWorkflows(), x.Cell.Workflow)
	}, lateCliffHit)
	c.Where = exceeds(v, alpha, e, s)
	c.Signature = signatureTest(g, ci, alpha)
	c.QuietSignature = quietSignatureRoles(g)
	c.I6 = interventionTest(g, I6, ci, alpha)
	c.I1 = interventionTest(g, I1, ci, alpha)
	for _, t := range []*LateTest{&c.Where, &c.Signature, &c.I6, &c.I1} {
		switch {
		case !g.Open:
			t.Outcome, t.Reason = Untestable, GateClosed
		case !g.CliffControlled && t.Outcome != Untestable:
			t.Outcome, t.Reason = Untestable, NoLateControl
		}
	}
	if c.Signature.Outcome != Untestable && !st.controlled(AmplificationDetector) {
		c.Signature.Outcome, c.Signature.Reason = Untestable, NoLateControl
	}
	i1Lower := len(c.I1.P) > 0 && Rejects(c.I1.P[0], alpha)
	i6Lower := len(c.I6.P) > 0 && Rejects(c.I6.P[0], alpha)
	c.DriftNotCoherence = g.Open && i1Lower && len(c.I6.Rates) > 0 && c.I6.Rates[0].N > 0 && !i6Lower
	c.Verdict = combine(c.Signature.Outcome == Against || c.I6.Outcome == Against, c.Where, c.Signature, c.I6)
	return c
}

// combine is a claim's verdict: refuted when refute, else not testable when
// a test is not testable, reproduced when all hold, inconclusive otherwise.
func combine(refute bool, tests ...LateTest) Verdict {
	if refute {
		return Refuted
	}
	all := true
	for _, t := range tests {
		if t.Outcome == Untestable {
			return NotTestable
		}
		all = all && t.Outcome == Holds
	}
	if all {
		return Reproduced
	}
	return Inconclusive
}

// quietIP selects the signature test's runs without a cliff: the IP runs
// of the main recipe without an intervention, in every workflow, that have
// no late cliff.
func quietIP(e RunEvents) bool { return plainIP(study.Workflows...)(e) && !lateCliffHit(e) }

// SignatureRole counts the runs whose signature a role carries first.
type SignatureRole struct {
	Role     string
	SameRole bool // the role has two or more agents (norm and same-role cosine); false: one agent, norm alone
	Runs     int
}

// quietSignatureRoles are the roles that carry the signature first in the
// signature test's IP runs without a cliff, most runs first (ties by
// role, then in the order the runs come).
func quietSignatureRoles(g Gate) []SignatureRole {
	var out []SignatureRole
	for _, e := range g.Runs {
		if !quietIP(e) || e.Signature < 0 {
			continue
		}
		i := slices.IndexFunc(out, func(r SignatureRole) bool { return r.Role == e.SignatureBy && r.SameRole == e.SignatureSameRole })
		if i < 0 {
			out = append(out, SignatureRole{Role: e.SignatureBy, SameRole: e.SignatureSameRole})
			i = len(out) - 1
		}
		out[i].Runs++
	}
	slices.SortStableFunc(out, func(a, b SignatureRole) int {
		return cmp.Or(b.Runs-a.Runs, strings.Compare(a.Role, b.Role))
	})
	return out
}

// signatureTest is claim c's second test under the late rules. By the
// power rule it is against only when a one-sided exact binomial test
// rejects the claim's direction: the cliff runs that lead significantly
// fewer than half, or the runs without a cliff that carry the signature
// significantly more than RareShare.
func signatureTest(g Gate, ci, alpha float64) LateTest {
	t := LateTest{Diff: math.NaN()}
	in := plainIP(study.Workflows...)
	lead := rateOf(g, "IP cliff runs whose signature leads", ci, func(e RunEvents) bool { return in(e) && lateCliffHit(e) },
		func(e RunEvents) bool { return e.Leads })
	quiet := rateOf(g, "IP runs without a cliff that carry the signature", ci, quietIP, func(e RunEvents) bool { return e.Signature >= 0 })
	t.Rates = []LateRate{lead, quiet}
	switch {
	case lead.N == 0:
		t.Outcome, t.Reason = Untestable, NoLateCliff
		return t
	case lead.N < MinClaimSeeds:
		t.Outcome, t.Reason = Untestable, OneCliffRun
		return t
	}
	t.P = []float64{BinomGE(lead.K, lead.N, 0.5)}
	t.PAgainst = []float64{BinomLE(lead.K, lead.N, 0.5)}
	t.Detectable = []float64{BinomDetectable(lead.N, 0.5, alpha)}
	if quiet.N > 0 {
		t.PAgainst = append(t.PAgainst, BinomGE(quiet.K, quiet.N, RareShare))
	}
	switch {
	case Rejects(t.PAgainst[0], alpha):
		t.Outcome, t.Reason = Against, FewLead
	case quiet.N > 0 && Rejects(t.PAgainst[1], alpha):
		t.Outcome, t.Reason = Against, CommonSignature
	case quiet.N == 0:
		t.Outcome, t.Reason = Untestable, NoQuietRun
	case 2*lead.K > lead.N && quiet.Value() <= RareShare+1e-12:
		t.Outcome, t.Reason = Holds, MostLead
	default:
		t.Outcome, t.Reason = Undecided, Between
	}
	return t
}

// recipe is what an intervention test holds fixed between the runs with
// and without the intervention: the cell of the main matrix, the rate, the
// base model, the supervisors' anchor (AnchorRule) and n_votes.
type recipe struct {
	cell                CellKey
	lr, model, anchored string
	nVotes              int
}

func recipeOf(e RunEvents) recipe {
	return recipe{cell: e.Cell.Main(), lr: e.Settings.LR, model: e.Settings.Model, anchored: e.Settings.Anchored, nVotes: e.Settings.NVotes}
}

// pairedRuns selects the runs of condition cond whose recipe (recipeOf)
// has runs with the intervention iv and runs without any, in the study's
// order, and counts those recipes: an intervention's arm against the main
// matrix's runs of its cells, rate, base model and n_votes. Each run's
// recipe is computed once.
func pairedRuns(g Gate, cond, iv string) (paired Gate, recipes int) {
	keys := make([]recipe, len(g.Runs))
	// has marks the recipes that have runs with the intervention ([0]) and
	// without any ([1])
	has := map[recipe][2]bool{}
	for i, e := range g.Runs {
		if e.Condition != cond {
			continue
		}
		keys[i] = recipeOf(e)
		x := has[keys[i]]
		switch e.Settings.Intervention {
		case iv:
			x[0] = true
		case NoIntervention:
			x[1] = true
		}
		has[keys[i]] = x
	}
	for _, x := range has {
		if x[0] && x[1] {
			recipes++
		}
	}
	for i, e := range g.Runs {
		if x := has[keys[i]]; e.Condition == cond && x[0] && x[1] {
			paired.Runs = append(paired.Runs, e)
		}
	}
	return paired, recipes
}

// carries selects the runs with the intervention iv (NoIntervention: the
// runs without any).
func carries(iv string) func(RunEvents) bool {
	return func(e RunEvents) bool { return e.Settings.Intervention == iv }
}

// CollapseDrift lists the conditions under which I1 lowered the format-
// collapse rate (p below alpha) and I6, compared in the same way, did not
// (claim c's reading of I1 against I6, DriftNotCoherence, applied to
// collapses; the report says why that alone does not tell drift from
// coherence). Without a shown positive control of the late-event
// detectors it names none: their counts are then descriptive only.
func (lc *LateClaims) CollapseDrift() []string {
	if !lc.Gate.CliffControlled {
		return nil
	}
	// lowered: whether iv lowered cond's rate, and whether it was compared
	lowered := func(iv, cond string) (yes, compared bool) {
		for _, x := range lc.Interventions {
			if x.Intervention == iv && x.Condition == cond {
				return Rejects(x.P, lc.Alpha), true
			}
		}
		return false, false
	}
	var out []string
	for _, cond := range []string{study.IP, study.SP} {
		i1, ok1 := lowered(I1, cond)
		i6, ok6 := lowered(I6, cond)
		if ok1 && ok6 && i1 && !i6 {
			out = append(out, cond)
		}
	}
	return out
}

// ceilingDiff is the mean ceiling of the paired runs with the intervention
// iv minus that of the paired runs without any (NaN when a side is empty).
func ceilingDiff(paired Gate, iv string) float64 {
	var ceilW, ceilO []float64
	for _, e := range paired.Runs {
		switch e.Settings.Intervention {
		case iv:
			ceilW = append(ceilW, e.Ceiling)
		case NoIntervention:
			ceilO = append(ceilO, e.Ceiling)
		}
	}
	if len(ceilW) == 0 || len(ceilO) == 0 {
		return math.NaN()
	}
	return sum(ceilW)/float64(len(ceilW)) - sum(ceilO)/float64(len(ceilO))
}

// interventionCollapses compares, for I1 and I6 under IP and SP, the
// format-collapse rates of the runs with the intervention and of the runs
// without any in the same recipes; pairs without runs are left out.
func interventionCollapses(g Gate, ci float64) []InterventionCollapse {
	collapsed := func(e RunEvents) bool { return len(e.Events.Collapses) > 0 }
	lateCollapsed := func(e RunEvents) bool { return e.Events.LateCollapse() }
	without := carries(NoIntervention)
	var out []InterventionCollapse
	for _, iv := range []string{I1, I6} {
		with := carries(iv)
		for _, cond := range []string{study.IP, study.SP} {
			paired, recipes := pairedRuns(g, cond, iv)
			if recipes == 0 {
				continue
			}
			x := InterventionCollapse{Intervention: iv, Condition: cond, Recipes: recipes,
				With: rateOf(paired, "", ci, with, collapsed).Rate, Without: rateOf(paired, "", ci, without, collapsed).Rate,
				LateWith: rateOf(paired, "", ci, with, lateCollapsed).Rate, LateWithout: rateOf(paired, "", ci, without, lateCollapsed).Rate,
				CeilingDiff: ceilingDiff(paired, iv)}
			x.P = FisherGreater(x.Without.K, x.Without.N, x.With.K, x.With.N)
			out = append(out, x)
		}
	}
	return out
}

// interventionTest compares IP runs with the intervention against IP runs
// without one of the same recipe (recipeOf), in the recipes that have both.
func interventionTest(g Gate, iv string, ci, alpha float64) LateTest {
	t := LateTest{Diff: math.NaN()}
	paired, _ := pairedRuns(g, study.IP, iv)
	with, without := carries(iv), carries(NoIntervention)
	cw := rateOf(paired, "IP with "+iv+": late cliffs", ci, with, lateCliffHit)
	co := rateOf(paired, "IP without: late cliffs", ci, without, lateCliffHit)
	sigHit := func(e RunEvents) bool { return e.Signature >= 0 }
	sw := rateOf(paired, "IP with "+iv+": signature", ci, with, sigHit)
	so := rateOf(paired, "IP without: signature", ci, without, sigHit)
	t.Rates = []LateRate{cw, co, sw, so}
	if cw.N == 0 || co.N == 0 {
		t.Outcome, t.Reason = Untestable, NoGroup
		return t
	}
	if co.K == 0 {
		// without a cliff to prevent, an intervention that removes the
		// signature says nothing about the cliffs
		t.Outcome, t.Reason = Untestable, NothingToPrevent
		return t
	}
	t.Diff = ceilingDiff(paired, iv)
	p := FisherGreater(co.K, co.N, cw.K, cw.N)
	t.P = []float64{p}
	t.PAgainst = []float64{FisherGreater(cw.K, cw.N, co.K, co.N)}
	cliffsLower := Rejects(p, alpha)
	sigLower := sw.Value() < so.Value()-1e-12
	switch {
	case cliffsLower && sigLower && t.Diff >= -CeilingCost-1e-12:
		t.Outcome, t.Reason = Holds, Significant
	case Rejects(t.PAgainst[0], alpha):
		// more cliffs with the intervention than without, significantly
		t.Outcome, t.Reason = Against, OppositeSignificant
	default:
		t.Outcome, t.Reason = Undecided, Between
		t.Detectable = []float64{FisherDetectable(cw.N, co.N, alpha)}
	}
	return t
}

func lateClaimD(st *Study, g Gate, alpha float64) LateCaptureClaim {
	ci := st.Params.CI
	var d LateCaptureClaim
	capHit := func(e RunEvents) bool { return e.Captured }
	judged := func(cond string) func(RunEvents) bool {
		return func(e RunEvents) bool {
			return e.Condition == cond && e.Settings.Intervention == NoIntervention && e.CaptureJudge
		}
	}
	main := func(cond string) func(RunEvents) bool {
		return func(e RunEvents) bool { return judged(cond)(e) && e.Plain() }
	}
	sp := rateOf(g, "SP runs captured", ci, main(study.SP), capHit)
	ip := rateOf(g, "IP runs captured", ci, main(study.IP), capHit)
	d.SPOverIP = exceeds(sp, alpha, ip)
	if d.SPOverIP.Outcome != Untestable && !st.controlled(CaptureDetector) {
		d.SPOverIP.Outcome, d.SPOverIP.Reason = Untestable, NoLateControl
	}
	// n_votes: SP voting runs of one task, one base model and one rate
	type key struct{ task, model, lr string }
	counts := map[key]map[int]bool{}
	for _, e := range g.Runs {
		if judged(study.SP)(e) && e.Cell.Workflow == study.Voting && e.Settings.NVotes > 0 {
			k := key{e.Cell.Task, e.Settings.Model, e.Settings.LR}
			if counts[k] == nil {
				counts[k] = map[int]bool{}
			}
			counts[k][e.Settings.NVotes] = true
		}
	}
	d.NVotes = LateTest{Outcome: Untestable, Reason: OneCount, Diff: math.NaN()}
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b key) int {
		return strings.Compare(a.task+"\x00"+a.model+"\x00"+a.lr, b.task+"\x00"+b.model+"\x00"+b.lr)
	})
	for _, k := range keys {
		ns := slices.Sorted(maps.Keys(counts[k]))
		if len(ns) < 2 {
			continue
		}
		lo, hi := ns[0], ns[len(ns)-1]
		at := func(n int) func(RunEvents) bool {
			return func(e RunEvents) bool {
				return judged(study.SP)(e) && e.Cell.Workflow == study.Voting && e.Cell.Task == k.task && e.Settings.Model == k.model &&
					e.Settings.LR == k.lr && e.Settings.NVotes == n
			}
		}
		rh := rateOf(g, "SP voting at n_votes "+strconv.Itoa(hi), ci, at(hi), capHit)
		rl := rateOf(g, "SP voting at n_votes "+strconv.Itoa(lo), ci, at(lo), capHit)
		d.NVotes = exceeds(rh, alpha, rl)
		d.NVotesLo, d.NVotesHi, d.NVotesFor = lo, hi, k.task
		break
	}
	if d.NVotes.Outcome != Untestable && !st.controlled(CaptureDetector) {
		d.NVotes.Outcome, d.NVotes.Reason = Untestable, NoLateControl
	}
	d.Verdict = combine(d.SPOverIP.Outcome == Against, d.SPOverIP, d.NVotes)
	return d
}
