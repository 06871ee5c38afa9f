package report

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/marlowlab/marlow/analysis"
)

// headlineFigure draws the finding the summary's *Main results* leads
// with (studyHeadline): the two rates of its strongest exact test with
// their exact intervals when one rejects, otherwise each trained
// condition's gain over its first validation, run view by run view. ok is
// false when the study has neither.
func headlineFigure(h headline, ci float64) (Figure, bool, error) {
	if h.test != nil {
		f, err := headlineTestFigure(*h.test, ci)
		return f, err == nil, err
	}
	if len(h.gains) == 0 {
		return Figure{}, false, nil
	}
	f, err := headlineGainsFigure(h.gains)
	return f, err == nil, err
}

// headlineTestFigure draws two rates of runs as bars with their exact
// (Clopper–Pearson) intervals on a 0–1 axis.
func headlineTestFigure(t headlineTest, ci float64) (Figure, error) {
	title := fmt.Sprintf("Headline: runs with a role's format collapse (Fisher exact p = %.2g)", t.p)
	p := newPlot(title, "", "runs with a role's format collapse (fraction)")
	groups := []struct {
		label string
		r     analysis.Rate
		cond  string
	}{{t.labelA, t.a, t.condA}, {t.labelB, t.b, t.condB}}
	var names []string
	for i, g := range groups {
		x := float64(i)
		clr := color.Color(grey(140))
		if g.cond != "" {
			clr = condColor(g.cond)
		}
		bar, err := plotter.NewBarChart(plotter.Values{g.r.Value()}, vg.Points(70))
		if err != nil {
			return Figure{}, err
		}
		bar.XMin, bar.Color, bar.LineStyle.Width = x, clr, 0
		p.Add(bar)
		if err := addInterval(p, x, g.r.Lo, g.r.Hi, color.Black); err != nil {
			return Figure{}, err
		}
		lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: []plotter.XY{{X: x, Y: g.r.Hi}},
			Labels: []string{fmt.Sprintf("%d/%d = %.2f, interval [%.2f, %.2f]", g.r.K, g.r.N, g.r.Value(), g.r.Lo, g.r.Hi)}})
		if err != nil {
			return Figure{}, err
		}
		lbl.TextStyle[0].XAlign, lbl.TextStyle[0].YAlign = draw.XCenter, draw.YBottom
		lbl.Offset = vg.Point{Y: vg.Points(5)}
		p.Add(lbl)
		names = append(names, g.label)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, 1.6
	p.Y.Min, p.Y.Max = 0, 1.12
	pb, sb, err := render(p, nil)
	if err != nil {
		return Figure{}, fmt.Errorf("figure headline: %w", err)
	}
	caption := fmt.Sprintf("The strongest exact test the summary states: the share of runs in which a role's format collapsed, %s against %s, each bar with its exact (Clopper–Pearson) %g%% interval; p is the one-sided Fisher exact test that the first rate exceeds the second. The axis spans the whole 0–1 range of a rate.",
		t.labelA, t.labelB, ci*100)
	return Figure{Name: "headline", Kind: kindHeadline, Title: title, PNG: pb, SVG: sb, Caption: caption}, nil
}

// headlineGainsFigure draws each trained condition's gain of final
// accuracy over each run view's first validation: the run views as dots
// spread across the condition's column, their mean as a bar and a label.
func headlineGainsFigure(gains []condGain) (Figure, error) {
	title := "Headline: gain of final accuracy over the first validation"
	p := newPlot(title, "condition (dots: run views; bar: their mean)", "final accuracy − first validation's")
	var names []string
	lo, hi := 0.0, 0.0
	for i, g := range gains {
		x := float64(i)
		clr := condColor(g.cond)
		pts := make(plotter.XYs, len(g.views))
		for j, v := range g.views {
			off := 0.0
			if len(g.views) > 1 {
				off = 0.24 * (float64(j)/float64(len(g.views)-1) - 0.5)
			}
			pts[j] = plotter.XY{X: x + off, Y: v}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return Figure{}, err
		}
		sc.Color, sc.Radius, sc.Shape = clr, vg.Points(2.5), draw.CircleGlyph{}
		p.Add(sc)
		m := g.mean()
		bar, err := plotter.NewLine(plotter.XYs{{X: x - 0.18, Y: m}, {X: x + 0.18, Y: m}})
		if err != nil {
			return Figure{}, err
		}
		bar.Color, bar.Width = clr, vg.Points(3)
		p.Add(bar)
		lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: []plotter.XY{{X: x + 0.2, Y: m}},
			Labels: []string{fmt.Sprintf("%+.3f", m)}})
		if err != nil {
			return Figure{}, err
		}
		lbl.TextStyle[0].Color, lbl.TextStyle[0].YAlign = clr, draw.YCenter
		p.Add(lbl)
		names = append(names, fmt.Sprintf("%s (%s)", g.cond, plural(len(g.views), "run view")))
	}
	if err := gainAxes(p, names, lo, hi); err != nil {
		return Figure{}, err
	}
	pb, sb, err := render(p, nil)
	if err != nil {
		return Figure{}, fmt.Errorf("figure headline: %w", err)
	}
	caption := "The gains the summary states: per trained condition, final accuracy minus the run's first validation for every run view (an SA-RL run once per workflow it is evaluated in) as a dot, spread across the column in the study's order, and their mean as a bar with its value; the dashed line is no change. " +
		"No format-collapse comparison rejects at the report's alpha (or the study has none to make), so the gains are its headline."
	return Figure{Name: "headline", Kind: kindHeadline, Title: title, PNG: pb, SVG: sb, Caption: caption}, nil
}

// addInterval draws a vertical interval from lo to hi at x with end ticks.
func addInterval(p *plot.Plot, x, lo, hi float64, clr color.Color) error {
	for _, xy := range []plotter.XYs{{{X: x, Y: lo}, {X: x, Y: hi}}, {{X: x - 0.06, Y: lo}, {X: x + 0.06, Y: lo}}, {{X: x - 0.06, Y: hi}, {X: x + 0.06, Y: hi}}} {
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color, l.Width = clr, vg.Points(1.5)
		p.Add(l)
	}
	return nil
}
