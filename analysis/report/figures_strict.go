package report

import (
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/marlowlab/marlow/analysis"
)

// strictFigure draws each condition of each cell (mean over seeds) at its
// lenient final accuracy (x) and strict final accuracy (y), both the mean of
// the last 3 validations: points below
// the diagonal got right answers through a supervisory output that did not
// parse. Points are labelled with their cell (arm included) and condition
// as pointLabels places them, the furthest below the diagonal first; the
// returned labels say, after drawing, how many were. n is the number of
// points.
func strictFigure(st *analysis.Study) (*plot.Plot, *legend, *pointLabels, int, error) {
	p := newPlot("Strict vs lenient final accuracy", "lenient: final answer as graded", "strict: every supervisory output parsed")
	leg := newLegend()
	pts := map[string]plotter.XYs{}
	labels := &pointLabels{limit: maxPointLabels}
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
			pt := plotter.XY{X: x, Y: y}
			pts[cs.Condition] = append(pts[cs.Condition], pt)
			labels.cands = append(labels.cands, labelCand{pt: pt, text: c.Key.String() + " " + cs.Condition, clr: condColor(cs.Condition), drop: x - y})
			hi = math.Max(hi, x)
			n++
		}
	}
	if n == 0 {
		return p, leg, labels, 0, nil
	}
	// the furthest below the diagonal first; the sort is stable, so ties keep the cells' order
	sort.SliceStable(labels.cands, func(i, j int) bool { return labels.cands[i].drop > labels.cands[j].drop })
	// the same range on both axes, from a margin below 0 (so that points at
	// 0 and their labels are drawn inside the frame), so the identity line
	// is the diagonal
	hi = math.Min(1, math.Max(hi, 0.05)*(1+yMargin))
	lo := -yMargin * hi
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = lo, hi, lo, hi
	p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{0, 1}, niceTicks{0, 1}
	diag, err := plotter.NewLine(plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}})
	if err != nil {
		return nil, nil, nil, 0, err
	}
	diag.Color, diag.Dashes = grey(160), []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(diag)
	leg.Add("strict = lenient", diag)
	sortConds(conds)
	for i, c := range conds {
		s, err := plotter.NewScatter(pts[c])
		if err != nil {
			return nil, nil, nil, 0, err
		}
		s.Color, s.Radius, s.Shape = condColor(c), vg.Points(4), condShape(i)
		p.Add(s)
		leg.Add(c, s)
	}
	p.Add(labels)
	return p, leg, labels, n, nil
}
