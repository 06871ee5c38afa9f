package reports

import (
	"fmt"
	"hash/fnv"
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
)

func accuracyFigure(cell *analysis.CellResult, runs []*analysis.RunResult) (*plot.Plot, *plot.Legend, error) {
	p := newPlot("Validation accuracy, "+cell.Key.String(), "training step", "validation accuracy (fraction correct)")
	leg := newLegend()
	byCond := map[string]map[int64][]float64{}
	var conds []string
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, r := range runs {
		m := byCond[r.Condition]
		if m == nil {
			m = map[int64][]float64{}
			byCond[r.Condition] = m
			conds = append(conds, r.Condition)
		}
		for _, pt := range r.Curve {
			m[pt.Step] = append(m[pt.Step], pt.Acc)
			xmin, xmax = math.Min(xmin, float64(pt.Step)), math.Max(xmax, float64(pt.Step))
		}
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	for _, c := range conds {
		cs := cell.Cond(c)
		label := fmt.Sprintf("%s (n=%d)", c, cs.Seeds)
		if c == study.Base {
			xy := plotter.XYs{{X: xmin, Y: cs.Final.Value}, {X: xmax, Y: cs.Final.Value}}
			if err := addLine(p, leg, xy, label, condColor(c), condDash(c), vg.Points(2), false); err != nil {
				return nil, nil, err
			}
			continue
		}
		if err := addLine(p, leg, meanByStep(byCond[c]), label, condColor(c), condDash(c), vg.Points(2), true); err != nil {
			return nil, nil, err
		}
	}
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = fracTicks(0, 1, 0.1)
	return p, leg, nil
}

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

func roleStepFigure(cell *analysis.CellResult, runs []*analysis.RunResult, title, ylabel string, value func(runlog.StepRow) float64, logY bool) (*plot.Plot, *plot.Legend, int, error) {
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
	for _, k := range keys {
		dash := []vg.Length(nil)
		if k.cond == study.IP {
			dash = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		if err := addLine(p, leg, meanByStep(data[k]), k.cond+" "+k.role, roleColor(k.role), dash, vg.Points(1.5), false); err != nil {
			return nil, nil, 0, err
		}
	}
	if logY {
		// a flat log axis has no extent: widen it around the value
		if lo, hi := yRange(p); lo > 0 && hi/lo < 1.5 {
			p.Y.Min, p.Y.Max = lo/2, hi*2
		}
	} else {
		p.Y.Min, p.Y.Max = -1, 1
		p.Y.Tick.Marker = fracTicks(-1, 1, 0.25)
	}
	return p, leg, len(keys), nil
}

// roleColor gives a role the same colour in every figure.
func roleColor(role string) color.Color {
	for i, r := range knownRoles {
		if r == role {
			return plotutil.Color(i)
		}
	}
	h := fnv.New32a()
	h.Write([]byte(role))
	return plotutil.Color(len(knownRoles) + int(h.Sum32()%3))
}

func roleEvalFigure(runs []*analysis.RunResult, title, ylabel string, value func(runlog.EvalRow) float64) (*plot.Plot, *plot.Legend, int, error) {
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

func ceilingFinalFigure(st *analysis.Study) (*plot.Plot, *plot.Legend, int, error) {
	p := newPlot("Ceiling vs final validation accuracy", "ceiling: best validation accuracy", "final: mean of last 3 validations")
	leg := newLegend()
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		return nil, nil, 0, err
	}
	diag.Color, diag.Dashes = color.Gray{Y: 160}, []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(diag)
	leg.Add("final = ceiling", diag)
	pts := map[string]plotter.XYs{}
	n := 0
	for _, c := range st.Cells {
		sp, ip := c.Cond(study.SP), c.Cond(study.IP)
		if sp != nil && ip != nil {
			l, err := plotter.NewLine(plotter.XYs{{X: sp.Ceiling.Value, Y: sp.Final.Value}, {X: ip.Ceiling.Value, Y: ip.Final.Value}})
			if err != nil {
				return nil, nil, 0, err
			}
			l.Color, l.Width = color.Gray{Y: 120}, vg.Points(0.8)
			p.Add(l)
		}
		for _, cs := range c.Conditions {
			if cs.Condition == study.Base {
				continue
			}
			pts[cs.Condition] = append(pts[cs.Condition], plotter.XY{X: cs.Ceiling.Value, Y: cs.Final.Value})
			n++
		}
	}
	conds := make([]string, 0, len(pts))
	for c := range pts {
		conds = append(conds, c)
	}
	sort.Slice(conds, func(i, j int) bool {
		if analysis.CondOrder(conds[i]) != analysis.CondOrder(conds[j]) {
			return analysis.CondOrder(conds[i]) < analysis.CondOrder(conds[j])
		}
		return conds[i] < conds[j]
	})
	for i, c := range conds {
		s, err := plotter.NewScatter(pts[c])
		if err != nil {
			return nil, nil, 0, err
		}
		s.Color, s.Radius, s.Shape = condColor(c), vg.Points(4), plotutil.Shape(i)
		p.Add(s)
		leg.Add(c, s)
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	p.X.Tick.Marker, p.Y.Tick.Marker = fracTicks(0, 1, 0.1), fracTicks(0, 1, 0.1)
	return p, leg, n, nil
}
