package report

import (
	"fmt"
	"image/color"
	"math"
	"sort"

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
// mean over seeds at each validation with its interval as one band
// (analysis.CurveIntervals: the interval of the seed mean), and base as a
// horizontal line. Single seeds are not drawn: with three conditions of
// three seeds their lines hid the bands.
func accuracyFigure(cell *analysis.CellResult, runs []*analysis.RunResult, ci float64) (*plot.Plot, *legend, error) {
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
		if err := addBand(p, xs, lo, hi, clr, condDash(c)); err != nil {
			return nil, nil, err
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
		leg.Add(fmt.Sprintf("band: %g%% interval of the seed mean", ci*100), sw)
	}
	p.X.Min, p.X.Max = xmin, xmax
	p.X.Tick.Marker = stepTicks(steps)
	fitY(p, 0, 1, 0.05)
	return p, leg, nil
}

// maxPointLabels is how many points of the ceiling-vs-final figure are
// labelled at most: the cloud along the diagonal has room for few labels.
const maxPointLabels = 12

// ceilingFinalFigure draws each trained condition of each cell as a point
// (ceiling, final) with the identity line; SP and IP of a cell are joined.
// Only a selection of points is labelled with its cell (pointLabels: the
// largest drops whose labels fit without overlap); the returned labels
// say, after drawing, how many were. The axes fit the points.
func ceilingFinalFigure(st *analysis.Study) (*plot.Plot, *legend, *pointLabels, int, error) {
	p := newPlot("Ceiling vs final validation accuracy", "ceiling: best validation accuracy", "final: mean of last 3 validations")
	leg := newLegend()
	pts := map[string]plotter.XYs{}
	labels := &pointLabels{limit: maxPointLabels}
	var conds []string
	n := 0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range st.Cells {
		sp, ip := c.Cond(study.SP), c.Cond(study.IP)
		if sp != nil && ip != nil {
			l, err := plotter.NewLine(plotter.XYs{{X: sp.Ceiling.Value, Y: sp.Final.Value}, {X: ip.Ceiling.Value, Y: ip.Final.Value}})
			if err != nil {
				return nil, nil, nil, 0, err
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
			pt := plotter.XY{X: cs.Ceiling.Value, Y: cs.Final.Value}
			pts[cs.Condition] = append(pts[cs.Condition], pt)
			labels.cands = append(labels.cands, labelCand{pt: pt, text: c.Key.String() + " " + cs.Condition, clr: condColor(cs.Condition), drop: cs.Ceiling.Value - cs.Final.Value})
			lo = math.Min(lo, math.Min(cs.Ceiling.Value, cs.Final.Value))
			hi = math.Max(hi, math.Max(cs.Ceiling.Value, cs.Final.Value))
			n++
		}
	}
	if n == 0 {
		return p, leg, labels, 0, nil
	}
	// the largest drops first; the sort is stable, so ties keep the cells' order
	sort.SliceStable(labels.cands, func(i, j int) bool { return labels.cands[i].drop > labels.cands[j].drop })
	// the same range on both axes, so the identity line is the diagonal
	span := math.Max(hi-lo, 0.05)
	m := yMargin * span
	lo, hi = math.Max(0, lo-m), math.Min(1, lo+span+m)
	diag, err := plotter.NewLine(plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}})
	if err != nil {
		return nil, nil, nil, 0, err
	}
	diag.Color, diag.Dashes = grey(160), []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(diag)
	leg.Add("final = ceiling", diag)
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
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = lo, hi, lo, hi
	p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{0, 1}, niceTicks{0, 1}
	return p, leg, labels, n, nil
}

// labelCand is a point that may be labelled.
type labelCand struct {
	pt   plotter.XY
	text string
	clr  color.Color
	drop float64 // ceiling - final: the larger, the earlier it is labelled
}

// pointLabels labels points without collisions: in the order of cands, up
// to limit labels, each at the first of a fixed list of positions around
// its point (first towards the empty upper left of the diagonal, then
// further out with a leader line) where it stays inside the frame, overlaps
// no label already placed and no other point, crosses no leader line
// already drawn, and where its own leader line crosses no label, leader
// line or other point. A point with no free position is left unlabelled.
// drawn counts the labels of the last drawing, placed holds their boxes
// and leaders their leader lines; the placement depends only on the points
// and the canvas size.
type pointLabels struct {
	cands   []labelCand
	limit   int
	drawn   int
	placed  []vg.Rectangle
	leaders [][2]vg.Point
}

// cross reports whether the segments ab and cd intersect (touching
// counts).
func cross(a, b, c, d vg.Point) bool {
	orient := func(p, q, r vg.Point) float64 {
		v := float64((q.X-p.X)*(r.Y-p.Y) - (q.Y-p.Y)*(r.X-p.X))
		switch {
		case v > 1e-9:
			return 1
		case v < -1e-9:
			return -1
		}
		return 0
	}
	on := func(p, q, r vg.Point) bool { // r on the segment pq, given collinear
		return min(p.X, q.X) <= r.X && r.X <= max(p.X, q.X) && min(p.Y, q.Y) <= r.Y && r.Y <= max(p.Y, q.Y)
	}
	o1, o2, o3, o4 := orient(a, b, c), orient(a, b, d), orient(c, d, a), orient(c, d, b)
	if o1 != o2 && o3 != o4 {
		return true
	}
	return o1 == 0 && on(a, b, c) || o2 == 0 && on(a, b, d) || o3 == 0 && on(c, d, a) || o4 == 0 && on(c, d, b)
}

// segmentHitsRect reports whether the segment ab enters the rectangle r.
func segmentHitsRect(a, b vg.Point, r vg.Rectangle) bool {
	inside := func(p vg.Point) bool { return p.X > r.Min.X && p.X < r.Max.X && p.Y > r.Min.Y && p.Y < r.Max.Y }
	if inside(a) || inside(b) {
		return true
	}
	c := [4]vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}}
	for i := range c {
		if cross(a, b, c[i], c[(i+1)%4]) {
			return true
		}
	}
	return false
}

// Plot implements plot.Plotter.
func (l *pointLabels) Plot(c draw.Canvas, plt *plot.Plot) {
	tx, ty := plt.Transforms(&c)
	sty := plt.X.Tick.Label
	sty.Font.Size = vg.Points(8)
	const markR = 5 // points: a marker's radius with a little room
	marks := make([]vg.Point, len(l.cands))
	for i, cd := range l.cands {
		marks[i] = vg.Point{X: tx(cd.pt.X), Y: ty(cd.pt.Y)}
	}
	type dir struct {
		dx, dy float64
		align  draw.XAlignment
	}
	dirs := []dir{{-0.7, 0.7, draw.XRight}, {0, 1, draw.XCenter}, {-1, 0, draw.XRight}, {0.7, -0.7, draw.XLeft}, {1, 0, draw.XLeft}, {0, -1, draw.XCenter}, {0.7, 0.7, draw.XLeft}}
	var placed []vg.Rectangle
	var leaders [][2]vg.Point
	markBox := func(m vg.Point) vg.Rectangle {
		return vg.Rectangle{Min: vg.Point{X: m.X - markR, Y: m.Y - markR}, Max: vg.Point{X: m.X + markR, Y: m.Y + markR}}
	}
	overlaps := func(r vg.Rectangle) bool {
		if r.Min.X < c.Min.X || r.Max.X > c.Max.X || r.Min.Y < c.Min.Y || r.Max.Y > c.Max.Y {
			return true
		}
		for _, q := range placed {
			if r.Min.X < q.Max.X && q.Min.X < r.Max.X && r.Min.Y < q.Max.Y && q.Min.Y < r.Max.Y {
				return true
			}
		}
		for _, m := range marks {
			if m.X+markR > r.Min.X && m.X-markR < r.Max.X && m.Y+markR > r.Min.Y && m.Y-markR < r.Max.Y {
				return true
			}
		}
		for _, ld := range leaders {
			if segmentHitsRect(ld[0], ld[1], r) {
				return true
			}
		}
		return false
	}
	// leaderBlocked: the leader from its own point's marker to the label
	// would cross a label, a leader or another point
	leaderBlocked := func(own int, from, to vg.Point) bool {
		for _, q := range placed {
			if segmentHitsRect(from, to, q) {
				return true
			}
		}
		for _, ld := range leaders {
			if cross(from, to, ld[0], ld[1]) {
				return true
			}
		}
		for j, m := range marks {
			if j != own && m != marks[own] && segmentHitsRect(from, to, markBox(m)) {
				return true
			}
		}
		return false
	}
	l.drawn = 0
	defer func() { l.placed, l.leaders = placed, leaders }()
	for i, cd := range l.cands {
		if l.drawn == l.limit {
			break
		}
		w, h := sty.Width(cd.text), sty.Height(cd.text)
	search:
		for _, dist := range []vg.Length{8, 20, 34, 50, 70, 95} {
			for _, d := range dirs {
				a := vg.Point{X: marks[i].X + vg.Length(d.dx)*dist, Y: marks[i].Y + vg.Length(d.dy)*dist}
				x0 := a.X + vg.Length(d.align)*w // XRight is -1, XCenter -0.5, XLeft 0
				r := vg.Rectangle{Min: vg.Point{X: x0 - 1, Y: a.Y - h/2 - 1}, Max: vg.Point{X: x0 + w + 1, Y: a.Y + h/2 + 1}}
				if overlaps(r) {
					continue
				}
				if dist > 8 {
					from := vg.Point{X: marks[i].X + vg.Length(d.dx)*markR, Y: marks[i].Y + vg.Length(d.dy)*markR}
					if leaderBlocked(i, from, a) {
						continue
					}
					lead := draw.LineStyle{Color: withAlpha(cd.clr, 160), Width: vg.Points(0.5)}
					c.StrokeLine2(lead, from.X, from.Y, a.X, a.Y)
					leaders = append(leaders, [2]vg.Point{from, a})
				}
				ts := sty
				ts.Color, ts.XAlign, ts.YAlign = cd.clr, d.align, draw.YCenter
				c.FillText(ts, a, cd.text)
				placed = append(placed, r)
				l.drawn++
				break search
			}
		}
	}
}
