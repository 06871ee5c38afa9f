package analysis

import (
	"fmt"
	"math"
	"sort"

	"github.com/marlowlab/marlow/harness/runlog"
)

// Point is one validation of a workflow: its step and final-answer accuracy.
type Point struct {
	Step int64
	Acc  float64
}

// Curve returns the validation-accuracy curve of a run in one workflow: the
// evals rows with Workflow == workflow, Role "*" and Split "val", sorted by
// step. Two rows at one step, or an accuracy outside [0,1], are errors.
func Curve(r *runlog.Run, workflow string) ([]Point, error) {
	var pts []Point
	for i, e := range r.Evals {
		if e.Workflow != workflow || e.Role != "*" || e.Split != "val" {
			continue
		}
		if math.IsNaN(e.Accuracy) || e.Accuracy < 0 || e.Accuracy > 1 {
			return nil, fmt.Errorf("run %s: evals row %d (step %d, workflow %s): accuracy %v not in [0,1]", r.Manifest.RunID, i, e.Step, workflow, e.Accuracy)
		}
		pts = append(pts, Point{Step: e.Step, Acc: e.Accuracy})
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Step < pts[j].Step })
	for i := 1; i < len(pts); i++ {
		if pts[i].Step == pts[i-1].Step {
			return nil, fmt.Errorf("run %s: two validation rows for workflow %s at step %d", r.Manifest.RunID, workflow, pts[i].Step)
		}
	}
	return pts, nil
}

// Metrics are the ceiling/floor summary of one validation curve.
type Metrics struct {
	Base        float64 // accuracy at the first validation (step 0)
	Ceiling     float64 // highest validation accuracy
	CeilingStep int64   // first step reaching the ceiling
	Final       float64 // mean of the last 3 validations (fewer if the curve is shorter)
	Floor       float64 // lowest accuracy over the last 25% of the step span
	Drop        float64 // Ceiling - Final
	AUC         float64 // trapezoidal area under the curve divided by the step span; Base for one point
	Evals       int     // number of validations
	Cliff       Cliff
}

// Cliff is the evidence of the terminal-cliff test.
type Cliff struct {
	Cliff     bool    // Drop >= Threshold and the fall happened after the first half
	Threshold float64 // max(cliff_abs, cliff_rel * (Ceiling - Base))
	MidStep   float64 // the step that ends the first half of the curve's span
	// FallStep is the first validation after the ceiling whose accuracy is at
	// or below Ceiling - Threshold; -1 when there is none.
	FallStep int64
	FallAcc  float64 // accuracy at FallStep (NaN when none)
}

// ComputeMetrics summarises a validation curve (sorted by step, as returned
// by Curve).
func ComputeMetrics(pts []Point, p Params) (Metrics, error) {
	var m Metrics
	if len(pts) == 0 {
		return m, fmt.Errorf("empty validation curve")
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Step <= pts[i-1].Step {
			return m, fmt.Errorf("validation curve not strictly increasing in step at index %d (step %d after %d)", i, pts[i].Step, pts[i-1].Step)
		}
	}
	m.Evals = len(pts)
	m.Base = pts[0].Acc
	m.Ceiling, m.CeilingStep = pts[0].Acc, pts[0].Step
	for _, q := range pts[1:] {
		if q.Acc > m.Ceiling {
			m.Ceiling, m.CeilingStep = q.Acc, q.Step
		}
	}
	k := min(3, len(pts))
	var s float64
	for _, q := range pts[len(pts)-k:] {
		s += q.Acc
	}
	m.Final = s / float64(k)
	first, last := pts[0].Step, pts[len(pts)-1].Step
	span := float64(last - first)
	m.Floor = math.Inf(1)
	for _, q := range pts {
		if float64(q.Step) >= float64(last)-0.25*span {
			m.Floor = math.Min(m.Floor, q.Acc)
		}
	}
	m.Drop = m.Ceiling - m.Final
	if len(pts) == 1 || span == 0 {
		m.AUC = m.Base
	} else {
		var a float64
		for i := 1; i < len(pts); i++ {
			a += 0.5 * (pts[i].Acc + pts[i-1].Acc) * float64(pts[i].Step-pts[i-1].Step)
		}
		m.AUC = a / span
	}
	c := Cliff{FallStep: -1, FallAcc: math.NaN()}
	c.Threshold = math.Max(p.CliffAbs, p.CliffRel*(m.Ceiling-m.Base))
	c.MidStep = float64(first) + span/2
	for _, q := range pts {
		if q.Step > m.CeilingStep && q.Acc <= m.Ceiling-c.Threshold+1e-12 {
			c.FallStep, c.FallAcc = q.Step, q.Acc
			break
		}
	}
	c.Cliff = m.Drop >= c.Threshold-1e-12 && c.FallStep >= 0 && float64(c.FallStep) > c.MidStep
	m.Cliff = c
	return m, nil
}

// ProblemMatrix holds per-problem validation correctness of one run in one
// workflow: Correct[i][j] is the mean correctness over rollouts of problem
// Problems[j] at step Steps[i].
//
// The correctness of a validation episode's final answer is read from the
// samples rows with Split "val", the workflow, and Role "final" (the
// workflow writes one such row per validation episode holding the final
// answer). For the single workflow, whose generator's answer is the final
// answer, generator rows are used when no "final" rows exist. Only problems
// present at every step are kept, so that problems can be resampled.
type ProblemMatrix struct {
	Steps    []int64
	Problems []string
	Correct  [][]float64
	Source   string // the role whose rows were used: "final" or "generator"
}

// Problems builds the ProblemMatrix of a run in a workflow for the given
// validation steps. It returns nil when the run has no usable samples.
func Problems(r *runlog.Run, workflow string, steps []int64) *ProblemMatrix {
	src := "final"
	rows := pickSamples(r, workflow, src)
	if len(rows) == 0 && workflow == "single" {
		src = "generator"
		rows = pickSamples(r, workflow, src)
	}
	if len(rows) == 0 || len(steps) == 0 {
		return nil
	}
	type agg struct{ sum, n float64 }
	byStep := map[int64]map[string]*agg{}
	for _, s := range rows {
		ps := byStep[s.Step]
		if ps == nil {
			ps = map[string]*agg{}
			byStep[s.Step] = ps
		}
		a := ps[s.ProblemID]
		if a == nil {
			a = &agg{}
			ps[s.ProblemID] = a
		}
		if s.Correct {
			a.sum++
		}
		a.n++
	}
	first := byStep[steps[0]]
	if first == nil {
		return nil
	}
	var probs []string
	for pid := range first {
		ok := true
		for _, st := range steps[1:] {
			if byStep[st] == nil || byStep[st][pid] == nil {
				ok = false
				break
			}
		}
		if ok {
			probs = append(probs, pid)
		}
	}
	if len(probs) == 0 {
		return nil
	}
	sort.Strings(probs)
	pm := &ProblemMatrix{Steps: append([]int64(nil), steps...), Problems: probs, Source: src}
	for _, st := range steps {
		row := make([]float64, len(probs))
		for j, pid := range probs {
			a := byStep[st][pid]
			row[j] = a.sum / a.n
		}
		pm.Correct = append(pm.Correct, row)
	}
	return pm
}

func pickSamples(r *runlog.Run, workflow, role string) []runlog.SampleRow {
	var out []runlog.SampleRow
	for _, s := range r.Samples {
		if s.Split == "val" && s.Workflow == workflow && s.Role == role {
			out = append(out, s)
		}
	}
	return out
}

// resampledCurve is the curve obtained by averaging the given problem
// columns (indices into Problems, repeats allowed).
func (pm *ProblemMatrix) resampledCurve(idx []int, dst []Point) []Point {
	dst = dst[:0]
	for i, st := range pm.Steps {
		var s float64
		for _, j := range idx {
			s += pm.Correct[i][j]
		}
		dst = append(dst, Point{Step: st, Acc: s / float64(len(idx))})
	}
	return dst
}
