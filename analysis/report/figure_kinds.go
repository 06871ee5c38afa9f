package report

import (
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
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
		if lo, hi := p.Y.Min, p.Y.Max; lo > 0 && hi/lo < 1.5 {
			p.Y.Min, p.Y.Max = lo/2, hi*2
		}
		fitLogY(p)
	} else {
		fitY(p, -1, 1, 0.1)
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
	return plotutil.Color(len(knownRoles) + int(keyed.FNV1a32(role)%3))
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
