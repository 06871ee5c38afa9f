package analysis

import (
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// Late events: what a long run at a constant learning rate does after it
// has learned. The terminal-cliff test (metrics.go) asks whether a run ended
// below its ceiling; the late-event detectors ask when a run broke and
// whether it stayed broken, which is what the dynamics study's gate and its
// claims rest on:
//
//   - A cliff is the first validation at which accuracy is at or below the
//     best accuracy so far (the peak) minus max(cliff_abs, cliff_rel x
//     (peak - base)), and stays there for LateLasting validations in a row
//     (the fall's own included). A fall in the last LateLasting-1
//     validations cannot be told from noise yet and is not a cliff.
//   - A role's format collapse is the first validation at which its format
//     compliance is at or below its first validation's minus
//     capture_format_drop, and stays there for LateLasting validations.
//   - An event is late when its step lies after the midpoint of the run's
//     validation span (Cliff.MidStep: step 200 of a 400-step run validated
//     from step 0), early otherwise.
//
// The detectors read only the evals rows, so they apply to every run view;
// they are shown to fire on the late positive control and to stay silent on
// the steady one (controls_slow_test.go), and the early control's events
// are early.

// LateLasting is how many validations in a row an event must last.
const LateLasting = 3

// LateEvents are the events of one run view.
type LateEvents struct {
	MidStep float64 // the step that ends the first half of the validation span
	Cliff   LateCliff
	// StrictCliff is the cliff rule on strict accuracy (episodes right
	// with every supervisory turn in format, roles.go), shown beside the
	// claims, which count Cliff; Found false and FallStep -1 without
	// validation samples at every validation (StrictKnown false).
	StrictCliff LateCliff
	StrictKnown bool
	Collapses   []RoleCollapse // one per role that collapsed, by step then role
	First       int64          // step of the earliest event, -1 when none
	Late        bool           // some event lies after MidStep
	Early       bool           // some event lies at or before MidStep
}

// LateCollapse reports whether some role's format collapse lies after
// MidStep.
func (ev LateEvents) LateCollapse() bool {
	return slices.ContainsFunc(ev.Collapses, func(c RoleCollapse) bool { return c.Late })
}

// LateCliff is the evidence of the lasting-fall test on one curve.
type LateCliff struct {
	Found     bool
	Base      float64 // accuracy at the first validation
	Peak      float64 // the best accuracy before the fall (of the whole curve when none)
	PeakStep  int64
	Threshold float64 // max(cliff_abs, cliff_rel x (Peak - Base))
	FallStep  int64   // -1 when none
	FallAcc   float64 // NaN when none
	Lasting   int     // validations in a row from FallStep at or below Peak - Threshold
	Late      bool    // Found and FallStep > MidStep
}

// RoleCollapse is the lasting format collapse of one role.
type RoleCollapse struct {
	Role       string
	Step       int64
	FormatBase float64 // format compliance at the first validation
	FormatAt   float64 // at Step
	LenBase    float64 // mean output length in tokens at the first validation
	LenAt      float64 // at Step
	Late       bool    // Step > MidStep
	// The role's training-time entropy and perplexity (steps rows, mean
	// over the LateWindow steps up to the first validation after the LoRA
	// warm-up, and up to Step; NaN without rows): degenerate text raises
	// both, a role copying another's format need not.
	EntropyBase, EntropyAt       float64
	PerplexityBase, PerplexityAt float64
}

// LateWindow is how many training steps the entropy and perplexity of a
// collapsing role are averaged over.
const LateWindow = 20

// DetectLateEvents runs the late-event detectors on a run view's curve and
// its validation rows for the workflow (roles other than "*"); steps are
// the run's step rows (for the collapsing roles' entropy and perplexity).
func DetectLateEvents(curve []Point, evals []runlog.EvalRow, steps []runlog.StepRow, p Params) LateEvents {
	ev := LateEvents{First: -1}
	if len(curve) == 0 {
		ev.Cliff = LateCliff{FallStep: -1, FallAcc: math.NaN(), Peak: math.NaN(), Base: math.NaN()}
		return ev
	}
	first, last := curve[0].Step, curve[len(curve)-1].Step
	ev.MidStep = float64(first) + float64(last-first)/2
	ev.Cliff = lateCliff(curve, p, ev.MidStep)
	ev.Collapses = roleCollapses(evals, p, ev.MidStep)
	for i := range ev.Collapses {
		c := &ev.Collapses[i]
		from := curve[0].Step + AmpWarmupSteps
		c.EntropyBase, c.PerplexityBase = stepMeans(steps, c.Role, from, from+LateWindow-1)
		c.EntropyAt, c.PerplexityAt = stepMeans(steps, c.Role, c.Step-LateWindow+1, c.Step)
	}
	note := func(step int64, late bool) {
		if ev.First < 0 || step < ev.First {
			ev.First = step
		}
		ev.Late = ev.Late || late
		ev.Early = ev.Early || !late
	}
	if ev.Cliff.Found {
		note(ev.Cliff.FallStep, ev.Cliff.Late)
	}
	for _, c := range ev.Collapses {
		note(c.Step, c.Late)
	}
	return ev
}

// StrictCliffOf sets ev's strict cliff from the role-level workflow
// metrics of the run view's validations (WorkflowSteps), when there is one
// per validation of the curve.
func (ev *LateEvents) StrictCliffOf(curve []Point, ws []WorkflowStep, p Params) {
	ev.StrictCliff, ev.StrictKnown = LateCliff{FallStep: -1, FallAcc: math.NaN(), Peak: math.NaN(), Base: math.NaN()}, false
	if len(curve) == 0 || len(ws) != len(curve) {
		return
	}
	strict := make([]Point, len(ws))
	for i, w := range ws {
		if w.Step != curve[i].Step || w.Episodes == 0 {
			return
		}
		strict[i] = Point{Step: w.Step, Acc: w.StrictRate()}
	}
	ev.StrictCliff, ev.StrictKnown = lateCliff(strict, p, ev.MidStep), true
}

// stepMeans are the mean entropy and perplexity of a role's step rows with
// step in [lo, hi]; NaN without rows.
func stepMeans(steps []runlog.StepRow, role string, lo, hi int64) (entropy, perplexity float64) {
	var se, sp float64
	var ne, np int
	for _, s := range steps {
		if s.Role != role || s.Step < lo || s.Step > hi {
			continue
		}
		if !math.IsNaN(s.Entropy) {
			se += s.Entropy
			ne++
		}
		if !math.IsNaN(s.Perplexity) {
			sp += s.Perplexity
			np++
		}
	}
	entropy, perplexity = math.NaN(), math.NaN()
	if ne > 0 {
		entropy = se / float64(ne)
	}
	if np > 0 {
		perplexity = sp / float64(np)
	}
	return entropy, perplexity
}

// lateCliff finds the first lasting fall below the running peak.
func lateCliff(curve []Point, p Params, mid float64) LateCliff {
	c := LateCliff{Base: curve[0].Acc, Peak: curve[0].Acc, PeakStep: curve[0].Step, FallStep: -1, FallAcc: math.NaN()}
	thr := func(peak float64) float64 { return math.Max(p.CliffAbs, p.CliffRel*(peak-c.Base)) }
	for i := 1; i < len(curve); i++ {
		bar := c.Peak - thr(c.Peak) + 1e-12
		n := 0
		for j := i; j < len(curve) && curve[j].Acc <= bar; j++ {
			n++
		}
		if n >= LateLasting {
			c.Found, c.FallStep, c.FallAcc, c.Lasting = true, curve[i].Step, curve[i].Acc, n
			c.Threshold = thr(c.Peak)
			c.Late = float64(c.FallStep) > mid
			return c
		}
		if curve[i].Acc > c.Peak {
			c.Peak, c.PeakStep = curve[i].Acc, curve[i].Step
		}
	}
	c.Threshold = thr(c.Peak)
	return c
}

// roleCollapses finds each role's first lasting format collapse.
func roleCollapses(evals []runlog.EvalRow, p Params, mid float64) []RoleCollapse {
	by := map[string][]runlog.EvalRow{}
	for _, e := range evals {
		if e.Role == "*" || math.IsNaN(e.FormatRate) {
			continue
		}
		by[e.Role] = append(by[e.Role], e)
	}
	var out []RoleCollapse
	for _, role := range slices.Sorted(maps.Keys(by)) {
		rows := by[role]
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].Step < rows[j].Step })
		base := rows[0]
		bar := base.FormatRate - p.CaptureFormatDrop + 1e-12
		for i := 1; i < len(rows); i++ {
			n := 0
			for j := i; j < len(rows) && rows[j].FormatRate <= bar; j++ {
				n++
			}
			if n >= LateLasting {
				out = append(out, RoleCollapse{Role: role, Step: rows[i].Step, FormatBase: base.FormatRate, FormatAt: rows[i].FormatRate,
					LenBase: base.MeanLen, LenAt: rows[i].MeanLen, Late: float64(rows[i].Step) > mid})
				break
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out
}

// Trained reports whether a run view trains a multi-agent policy (SP or IP).
func (r *RunResult) Trained() bool { return r.Condition == study.SP || r.Condition == study.IP }
