package report

import (
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/keyed"
)

// condRole names one line of a per-role figure.
type condRole struct{ cond, role string }

// roleSeries gathers per-role values by condition and step, to be averaged
// over runs with meanByStep.
type roleSeries map[condRole]map[int64][]float64

// add records v at step for (cond, role); NaN values are left out.
func (d roleSeries) add(cond, role string, step int64, v float64) {
	if math.IsNaN(v) {
		return
	}
	k := condRole{cond, role}
	if d[k] == nil {
		d[k] = map[int64][]float64{}
	}
	d[k][step] = append(d[k][step], v)
}

// keys returns the series in condition order, then by role name.
func (d roleSeries) keys() []condRole {
	keys := make([]condRole, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].cond != keys[j].cond {
			return analysis.CondOrder(keys[i].cond) < analysis.CondOrder(keys[j].cond)
		}
		return keys[i].role < keys[j].role
	})
	return keys
}

// roleStepFigure draws a per-step quantity per (condition, role), mean over
// seeds: the per-step mean as a faint line and, over it, the same curve
// smoothed over a centred window of the returned number of logged steps
// (smoothCurve; geometric means on a log axis); IP's lines are dashed.
func roleStepFigure(cell *analysis.CellResult, runs []*analysis.RunResult, title, ylabel string, value func(runlog.StepRow) float64, logY bool) (*plot.Plot, *legend, int, int, error) {
	data := roleSeries{}
	for _, r := range runs {
		if r.Condition != study.SP && r.Condition != study.IP {
			continue
		}
		for _, s := range r.Steps() {
			if v := value(s); s.Role != "*" && !(logY && v <= 0) {
				data.add(r.Condition, s.Role, s.Step, v)
			}
		}
	}
	keys := data.keys()
	p := newPlot(title, "training step", ylabel)
	p.X.Min = 0 // same step axis as the accuracy figures, which start at step 0
	leg := newLegend()
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	curves := make([]plotter.XYs, len(keys))
	n := 0
	for i, k := range keys {
		curves[i] = meanByStep(data[k])
		n = max(n, len(curves[i]))
	}
	window := smoothWindow(n)
	for i, k := range keys { // the raw traces first, so the smoothed lines are drawn over them
		if len(curves[i]) == 0 {
			continue
		}
		l, err := plotter.NewLine(curves[i])
		if err != nil {
			return nil, nil, 0, 0, fmt.Errorf("line %s %s: %w", k.cond, k.role, err)
		}
		l.Color, l.Width = withAlpha(roleColor(k.role), 80), vg.Points(0.7)
		if k.cond == study.IP {
			l.Dashes = []vg.Length{vg.Points(3), vg.Points(1.5)}
		}
		p.Add(l)
	}
	for i, k := range keys {
		dash := []vg.Length(nil)
		if k.cond == study.IP {
			dash = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		if err := addLine(p, leg, smoothCurve(curves[i], window, logY), k.cond+" "+k.role, roleColor(k.role), dash, vg.Points(1.8), false); err != nil {
			return nil, nil, 0, 0, err
		}
	}
	if len(keys) > 0 {
		raw, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 1}})
		if err != nil {
			return nil, nil, 0, 0, err
		}
		raw.Color, raw.Width = withAlpha(grey(60), 110), vg.Points(0.7)
		leg.Add(fmt.Sprintf("faint: per step; bold: smoothed, %d steps", window), raw)
	}
	if logY {
		// a flat log axis has no extent: widen it around the value
		if lo, hi := p.Y.Min, p.Y.Max; lo > 0 && hi/lo < 1.5 {
			p.Y.Min, p.Y.Max = lo/2, hi*2
		}
		fitLogY(p)
	} else {
		fitY(p, -1, 1, 0.1)
	}
	return p, leg, len(keys), window, nil
}

// smoothWindow is the width, in logged steps, of the centred window that
// smooths a per-step curve of n points: 2*floor(n/20)+1, at least 3 (7 for
// 60 steps).
func smoothWindow(n int) int {
	return max(3, 2*(n/20)+1)
}

// smoothCurve returns xy smoothed by a centred moving window of the given
// odd width in points, truncated at both ends (the first point averages
// itself and the half-window after it): the arithmetic mean, or on a log
// axis (geometric) the mean of the logarithms, so that one spike does not
// lift its whole window.
func smoothCurve(xy plotter.XYs, window int, geometric bool) plotter.XYs {
	h := window / 2
	out := make(plotter.XYs, len(xy))
	for i := range xy {
		lo, hi := max(0, i-h), min(len(xy)-1, i+h)
		var sum float64
		for j := lo; j <= hi; j++ {
			if geometric {
				sum += math.Log(xy[j].Y)
			} else {
				sum += xy[j].Y
			}
		}
		m := sum / float64(hi-lo+1)
		if geometric {
			m = math.Exp(m)
		}
		out[i] = plotter.XY{X: xy[i].X, Y: m}
	}
	return out
}

// roleColor gives a role the same colour in every figure.
func roleColor(role string) color.Color {
	for i, r := range knownRoles {
		if r == role {
			return plotutil.Color(i)
		}
	}
	return plotutil.Color(len(knownRoles) + int(keyed.FNV1a32(role)%3))
}

func roleEvalFigure(runs []*analysis.RunResult, title, ylabel string, value func(runlog.EvalRow) float64) (*plot.Plot, *legend, int, error) {
	data := roleSeries{}
	for _, r := range runs {
		if r.Condition == study.Base {
			continue
		}
		for _, e := range r.Evals() {
			if e.Role != "*" {
				data.add(r.Condition, e.Role, e.Step, value(e))
			}
		}
	}
	keys := data.keys()
	p := newPlot(title, "training step", ylabel)
	leg := newLegend()
	for _, k := range keys {
		if err := addLine(p, leg, meanByStep(data[k]), k.cond+" "+k.role, roleColor(k.role), condDash(k.cond), vg.Points(1.5), true); err != nil {
			return nil, nil, 0, err
		}
	}
	return p, leg, len(keys), nil
}
