package report

import (
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/marlowlab/marlow/analysis"
)

// strictFigure draws each condition of each cell (mean over seeds) at its
// lenient final accuracy (x) and strict final accuracy (y), both the mean of
// the last 3 validations: points below
// the diagonal got right answers through a supervisory output that did not
// parse. n is the number of points.
func strictFigure(st *analysis.Study) (*plot.Plot, *legend, int, error) {
	p := newPlot("Strict vs lenient final accuracy", "lenient: final answer as graded", "strict: every supervisory output parsed")
	leg := newLegend()
	pts := map[string]plotter.XYs{}
	var conds []string
	hi := 0.0
	n := 0
	for _, c := range st.Cells {
		for _, cs := range c.Conditions {
			x, y := cs.LenientFinal.Value, cs.StrictFinal.Value
			if math.IsNaN(x) || math.IsNaN(y) {
				continue
			}
			if pts[cs.Condition] == nil {
				conds = append(conds, cs.Condition)
			}
			pts[cs.Condition] = append(pts[cs.Condition], plotter.XY{X: x, Y: y})
			hi = math.Max(hi, x)
			n++
		}
	}
	if n == 0 {
		return p, leg, 0, nil
	}
	// the same range on both axes from 0, so the identity line is the diagonal
	hi = math.Min(1, math.Max(hi, 0.05)*(1+yMargin))
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, hi, 0, hi
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: hi, Y: hi}})
	if err != nil {
		return nil, nil, 0, err
	}
	diag.Color, diag.Dashes = grey(160), []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(diag)
	leg.Add("strict = lenient", diag)
	sortConds(conds)
	for i, c := range conds {
		s, err := plotter.NewScatter(pts[c])
		if err != nil {
			return nil, nil, 0, err
		}
		s.Color, s.Radius, s.Shape = condColor(c), vg.Points(4), condShape(i)
		p.Add(s)
		leg.Add(c, s)
	}
	return p, leg, n, nil
}
