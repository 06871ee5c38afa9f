package report

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/study"
)

// seedsLabel is "1 seed" or "n seeds".
func seedsLabel(n int) string {
	if n == 1 {
		return "1 seed"
	}
	return fmt.Sprintf("%d seeds", n)
}

// accuracyFigure draws a cell's validation accuracy: per condition the
// mean over seeds at each validation with its interval as a band
// (analysis.CurveIntervals), thin lines for the single seeds when there are
// several, and base as a horizontal line with its band.
func accuracyFigure(cell *analysis.CellResult, runs []*analysis.RunResult, ci float64) (*plot.Plot, *plot.Legend, error) {
	p := newPlot("Validation accuracy, "+cell.Key.String(), "training step", "validation accuracy (fraction correct)")
	leg := newLegend()
	byCond := map[string][]*analysis.RunResult{}
	var conds []string
	for _, r := range runs {
		if byCond[r.Condition] == nil {
			conds = append(conds, r.Condition)
		}
		byCond[r.Condition] = append(byCond[r.Condition], r)
	}
	steps := evalSteps(runs)
	xmin, xmax := 0.0, 1.0
	if len(steps) > 0 {
		xmin, xmax = float64(steps[0]), float64(steps[len(steps)-1])
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	for _, c := range conds {
		cr := byCond[c]
		clr := condColor(c)
		label := fmt.Sprintf("%s (%s)", c, seedsLabel(len(cr)))
		est := analysis.CurveIntervals(cr, ci)
		if c == study.Base {
			// the untrained model: its first validation, across the span
			// (its interval is in the report's table: a band across the
			// whole span would cover the trained conditions' bands)
			e := cell.Cond(c).Base
			xy := plotter.XYs{{X: xmin, Y: e.Value}, {X: xmax, Y: e.Value}}
			if err := addLine(p, leg, xy, label, clr, condDash(c), vg.Points(2), false); err != nil {
				return nil, nil, err
			}
			continue
		}
		xs, lo, hi := make([]float64, len(est)), make([]float64, len(est)), make([]float64, len(est))
		mean := make(plotter.XYs, len(est))
		for i, e := range est {
			xs[i], lo[i], hi[i] = float64(e.Step), e.Lo, e.Hi
			mean[i] = plotter.XY{X: float64(e.Step), Y: e.Value}
		}
		if err := addBand(p, xs, lo, hi, clr); err != nil {
			return nil, nil, err
		}
		if len(cr) > 1 {
			for _, r := range cr {
				xy := make(plotter.XYs, len(r.Curve))
				for i, pt := range r.Curve {
					xy[i] = plotter.XY{X: float64(pt.Step), Y: pt.Acc}
				}
				l, err := plotter.NewLine(xy)
				if err != nil {
					return nil, nil, fmt.Errorf("seed line %s: %w", r.RunID, err)
				}
				l.Color, l.Width = withAlpha(clr, 110), vg.Points(0.7)
				p.Add(l)
			}
		}
		if err := addLine(p, leg, mean, label, clr, condDash(c), vg.Points(2), true); err != nil {
			return nil, nil, err
		}
	}
	if len(conds) > 1 || conds[0] != study.Base {
		// a legend entry for the bands
		sw, err := plotter.NewPolygon(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}, {X: 1, Y: 1}})
		if err != nil {
			return nil, nil, err
		}
		sw.Color, sw.LineStyle.Width = withAlpha(grey(90), 70), 0
		leg.Add(fmt.Sprintf("band: %g%% interval", ci*100), sw)
	}
	p.X.Min, p.X.Max = xmin, xmax
	p.X.Tick.Marker = stepTicks(steps)
	fitY(p, 0, 1, 0.05)
	return p, leg, nil
}

// ceilingFinalFigure draws each trained condition of each cell as a point
// (ceiling, final), labelled with its cell, with the identity line; SP and
// IP of a cell are joined. The axes fit the points.
func ceilingFinalFigure(st *analysis.Study) (*plot.Plot, *plot.Legend, int, error) {
	p := newPlot("Ceiling vs final validation accuracy", "ceiling: best validation accuracy", "final: mean of last 3 validations")
	leg := newLegend()
	pts := map[string]plotter.XYs{}
	labels := map[string][]string{}
	var conds []string
	n := 0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range st.Cells {
		sp, ip := c.Cond(study.SP), c.Cond(study.IP)
		if sp != nil && ip != nil {
			l, err := plotter.NewLine(plotter.XYs{{X: sp.Ceiling.Value, Y: sp.Final.Value}, {X: ip.Ceiling.Value, Y: ip.Final.Value}})
			if err != nil {
				return nil, nil, 0, err
			}
			l.Color, l.Width = grey(120), vg.Points(0.8)
			p.Add(l)
		}
		for _, cs := range c.Conditions {
			if cs.Condition == study.Base {
				continue
			}
			if pts[cs.Condition] == nil {
				conds = append(conds, cs.Condition)
			}
			pts[cs.Condition] = append(pts[cs.Condition], plotter.XY{X: cs.Ceiling.Value, Y: cs.Final.Value})
			labels[cs.Condition] = append(labels[cs.Condition], c.Key.String())
			lo = math.Min(lo, math.Min(cs.Ceiling.Value, cs.Final.Value))
			hi = math.Max(hi, math.Max(cs.Ceiling.Value, cs.Final.Value))
			n++
		}
	}
	if n == 0 {
		return p, leg, 0, nil
	}
	// the same range on both axes, so the identity line is the diagonal
	span := math.Max(hi-lo, 0.05)
	m := yMargin * span
	lo, hi = math.Max(0, lo-m), math.Min(1, lo+span+m)
	diag, err := plotter.NewLine(plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}})
	if err != nil {
		return nil, nil, 0, err
	}
	diag.Color, diag.Dashes = grey(160), []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(diag)
	leg.Add("final = ceiling", diag)
	sortConds(conds)
	placed := map[plotter.XY]int{} // labels already at a point: coincident points stack theirs
	for i, c := range conds {
		s, err := plotter.NewScatter(pts[c])
		if err != nil {
			return nil, nil, 0, err
		}
		s.Color, s.Radius, s.Shape = condColor(c), vg.Points(4), condShape(i)
		p.Add(s)
		leg.Add(c, s)
		for j, pt := range pts[c] {
			// one label per point, on the side towards the middle so it stays in the frame
			lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{pt}, Labels: []string{labels[c][j]}})
			if err != nil {
				return nil, nil, 0, err
			}
			ts := &lb.TextStyle[0]
			ts.Font.Size, ts.Color = vg.Points(8), condColor(c)
			dy := vg.Points(-3 - 9*float64(i%2) - 10*float64(placed[pt]))
			placed[pt]++
			if pt.X > (lo+hi)/2 {
				ts.XAlign = draw.XRight
				lb.Offset = vg.Point{X: -vg.Points(6), Y: dy}
			} else {
				lb.Offset = vg.Point{X: vg.Points(6), Y: dy}
			}
			p.Add(lb)
		}
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = lo, hi, lo, hi
	p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{0, 1}, niceTicks{0, 1}
	return p, leg, n, nil
}
