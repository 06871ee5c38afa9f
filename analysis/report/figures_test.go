package report

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// TestFiguresFitData checks the axes of the fixture's figures: accuracy
// y-ranges hold every mean and band bound with a margin and are narrower
// than 0-1, x ticks fall on the validation steps, the gradient-norm axis
// holds the largest norm, the ceiling-vs-final labels are those its caption
// counts, and every cell has a per-role accuracy figure.
func TestFiguresFitData(t *testing.T) {
	st := fixtureStudy(t)
	byCell := map[analysis.CellKey][]*analysis.RunResult{}
	for _, r := range st.Runs {
		byCell[r.Cell] = append(byCell[r.Cell], r)
	}
	for _, cell := range st.Cells {
		runs := byCell[cell.Key]
		t.Run(cell.Key.String(), func(t *testing.T) {
			p, _, err := accuracyFigure(cell, runs, st.Params.CI)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := math.Inf(1), math.Inf(-1)
			byCond := map[string][]*analysis.RunResult{}
			for _, r := range runs {
				byCond[r.Condition] = append(byCond[r.Condition], r)
			}
			for _, cr := range byCond {
				for _, e := range analysis.CurveIntervals(cr, st.Params.CI) {
					for _, v := range []float64{e.Value, e.Lo, e.Hi} {
						if !math.IsNaN(v) {
							lo, hi = math.Min(lo, v), math.Max(hi, v)
						}
					}
				}
			}
			if !(p.Y.Min < lo && p.Y.Max > hi) {
				t.Errorf("accuracy y-range [%v, %v] does not hold the data [%v, %v] with a margin", p.Y.Min, p.Y.Max, lo, hi)
			}
			if p.Y.Max-p.Y.Min > (hi-lo)*(1+3*yMargin)+1e-9 {
				t.Errorf("accuracy y-range [%v, %v] is wider than the data [%v, %v] and its margin", p.Y.Min, p.Y.Max, lo, hi)
			}
			steps := evalSteps(runs)
			var ticks []int64
			for _, tk := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
				ticks = append(ticks, int64(tk.Value))
				if tk.Value != math.Trunc(tk.Value) {
					t.Errorf("x tick %v is not a step", tk.Value)
				}
			}
			if len(ticks) != len(steps) {
				t.Errorf("x ticks %v, want the validation steps %v", ticks, steps)
			}
			gp, _, n, _, err := roleStepFigure(cell, runs, "g", "g", func(s runlog.StepRow) float64 { return s.GradNorm }, true)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				// the lines are means over seeds
				data := roleSeries{}
				for _, r := range runs {
					if r.Condition != study.SP && r.Condition != study.IP {
						continue
					}
					for _, s := range r.Steps() {
						if s.Role != "*" {
							data.add(r.Condition, s.Role, s.Step, s.GradNorm)
						}
					}
				}
				var gmax float64
				for _, k := range data.keys() {
					for _, xy := range meanByStep(data[k]) {
						gmax = math.Max(gmax, xy.Y)
					}
				}
				if !(gp.Y.Max > gmax*1.2) && gmax > 0 {
					t.Errorf("gradient-norm axis ends at %v, largest norm %v: not inside the frame", gp.Y.Max, gmax)
				}
			}
		})
	}
	figs, err := Figures(st)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]Figure{}
	for _, f := range figs {
		names[f.Name] = f
	}
	for _, cell := range st.Cells {
		roles := false
		for _, r := range byCell[cell.Key] {
			for _, e := range r.Evals() {
				roles = roles || e.Role != "*" && r.Condition != study.Base
			}
		}
		if _, ok := names["roleacc_"+fileStem(cell.Key)]; ok != roles {
			t.Errorf("%s: per-role accuracy figure %v, per-role evals rows %v", cell.Key, ok, roles)
		}
	}
	cf, ok := names["ceiling_final"]
	if !ok {
		t.Fatal("no ceiling_final figure")
	}
	// the labels drawn are those the caption counts, and the largest drop
	// (ceiling) or the furthest below the diagonal (strict) is among them
	sf, ok := names["strict_lenient"]
	if !ok {
		t.Fatal("no strict_lenient figure")
	}
	_, _, cl, cn, err := ceilingFinalFigure(st)
	if err != nil {
		t.Fatal(err)
	}
	_, _, sl, sn, err := strictFigure(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f      Figure
		labels *pointLabels
		n      int
	}{{cf, cl, cn}, {sf, sl, sn}} {
		drawn := 0
		seen := map[string]bool{}
		for _, cd := range tc.labels.cands {
			if !seen[cd.text] {
				seen[cd.text] = true
				drawn += strings.Count(string(tc.f.SVG), ">"+cd.text+"<")
			}
			if !strings.Contains(cd.text, " ") {
				t.Errorf("%s: label %q does not name cell and condition", tc.f.Name, cd.text)
			}
		}
		want := fmt.Sprintf("Labelled with cell and condition: %d of the %d points", drawn, tc.n)
		if drawn == tc.n {
			want = "Every point is labelled with its cell and condition."
		}
		if drawn == 0 || !strings.Contains(tc.f.Caption, want) {
			t.Errorf("%s draws %d labels; caption %q lacks %q", tc.f.Name, drawn, tc.f.Caption, want)
		}
		if top := tc.labels.cands[0].text; !strings.Contains(string(tc.f.SVG), ">"+top+"<") {
			t.Errorf("%s does not label %s, the first in its order", tc.f.Name, top)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	tests := []struct {
		lo, hi     float64
		wantLabels string
	}{
		{0.12, 0.31, "0.12 0.14 0.16 0.18 0.20 0.22 0.24 0.26 0.28 0.30"},
		{-0.05, 1.05, "0.0 0.2 0.4 0.6 0.8 1.0"},
		{0.95, 1.004, "0.95 0.96 0.97 0.98 0.99 1.00"},
		{0, 130, "0 20 40 60 80 100 120"},
	}
	for _, tc := range tests {
		var got []string
		for _, tk := range (niceTicks{lo: 0, hi: math.Inf(1)}).Ticks(tc.lo, tc.hi) {
			if tc.hi < 2 && tk.Value > 1+1e-9 {
				continue
			}
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if strings.Join(got, " ") != tc.wantLabels {
			t.Errorf("ticks of [%v, %v]: %q, want %q", tc.lo, tc.hi, strings.Join(got, " "), tc.wantLabels)
		}
	}
}

func TestSmoothCurve(t *testing.T) {
	xy := func(ys ...float64) plotter.XYs {
		out := make(plotter.XYs, len(ys))
		for i, y := range ys {
			out[i] = plotter.XY{X: float64(10 * i), Y: y}
		}
		return out
	}
	tests := []struct {
		name      string
		in        plotter.XYs
		window    int
		geometric bool
		want      []float64
	}{
		{"constant stays", xy(2, 2, 2, 2), 3, false, []float64{2, 2, 2, 2}},
		{"spike spread over its window, ends truncated", xy(0, 0, 3, 0, 0), 3, false, []float64{0, 1, 1, 1, 0}},
		{"geometric mean damps a spike", xy(1, 1, 1000, 1, 1), 3, true, []float64{1, 10, 10, 10, 1}},
		{"window wider than the curve", xy(1, 2, 3), 7, false, []float64{2, 2, 2}},
		{"one point", xy(5), 3, true, []float64{5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := smoothCurve(tc.in, tc.window, tc.geometric)
			if len(got) != len(tc.want) {
				t.Fatalf("%d points, want %d", len(got), len(tc.want))
			}
			for i, w := range tc.want {
				if math.Abs(got[i].Y-w) > 1e-9 || got[i].X != tc.in[i].X {
					t.Errorf("point %d: (%v, %v), want (%v, %v)", i, got[i].X, got[i].Y, tc.in[i].X, w)
				}
			}
		})
	}
	for _, tc := range []struct{ n, want int }{{0, 3}, {19, 3}, {40, 5}, {60, 7}, {150, 15}} {
		if got := smoothWindow(tc.n); got != tc.want {
			t.Errorf("smoothWindow(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// TestGainColor checks the diverging scale of the gains heat map: white
// at 0, blue for a gain, red for a loss, symmetric ends, clamped beyond.
func TestGainColor(t *testing.T) {
	rgb := func(c color.Color) [3]uint32 {
		r, g, b, _ := c.RGBA()
		return [3]uint32{r >> 8, g >> 8, b >> 8}
	}
	anchor := func(i int) [3]uint32 { a := gainAnchors[i]; return [3]uint32{uint32(a.R), uint32(a.G), uint32(a.B)} }
	for _, tc := range []struct {
		v    float64
		want [3]uint32
	}{
		{0, [3]uint32{255, 255, 255}}, {0.2, anchor(4)}, {0.5, anchor(4)}, {0.1, anchor(3)}, {-0.1, anchor(1)}, {-0.2, anchor(0)}, {-3, anchor(0)},
	} {
		if got := rgb(gainColor(tc.v, 0.2)); got != tc.want {
			t.Errorf("gainColor(%v, 0.2) = %v, want %v", tc.v, got, tc.want)
		}
	}
	for _, v := range []float64{0.01, 0.07, 0.15} {
		g, l := rgb(gainColor(v, 0.2)), rgb(gainColor(-v, 0.2))
		if !(g[2] > g[0]) || !(l[0] > l[2]) {
			t.Errorf("±%v: gain %v should be blue, loss %v red", v, g, l)
		}
	}
	for _, tc := range []struct{ max, want float64 }{{0, 0.05}, {0.03, 0.05}, {0.05, 0.05}, {0.07, 0.1}, {0.1, 0.1}, {0.213, 0.3}, {0.424, 0.5}} {
		if got := gainScale(tc.max); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("gainScale(%v) = %v, want %v", tc.max, got, tc.want)
		}
	}
}

// TestGainIntervalsFit draws a gains grid in a canvas too small for its
// intervals, which are then left out and flagged, and in one large enough.
func TestGainIntervalsFit(t *testing.T) {
	for _, tc := range []struct {
		w, h    vg.Length
		omitted bool
	}{{2 * vg.Inch, 1.2 * vg.Inch, true}, {6 * vg.Inch, 3 * vg.Inch, false}} {
		g := &gainGrid{scale: 0.2,
			vals: [][]float64{{0.1, -0.05, math.NaN()}, {0.2, 0, 0.01}},
			cis:  [][]analysis.Estimate{{{Value: 0.1, Lo: 0.01, Hi: 0.19}, {Value: -0.05, Lo: -0.1, Hi: 0}, {}}, {{Value: 0.2, Lo: 0.1, Hi: 0.3}, {Value: 0, Lo: -0.1, Hi: 0.1}, {Value: 0.01, Lo: -0.2, Hi: 0.2}}},
		}
		p := plot.New()
		p.Add(g)
		p.NominalX("s", "m", "l")
		p.NominalY("voting", "eval-opt")
		p.Draw(draw.New(vgimg.New(tc.w, tc.h)))
		if g.omitted != tc.omitted {
			t.Errorf("%v x %v: omitted %v, want %v", tc.w, tc.h, g.omitted, tc.omitted)
		}
	}
}

// TestPointLabelsDoNotCollide labels a crowded diagonal: labels stay inside
// the frame, cover no other label and no point, follow the drop order and
// stop at the limit.
func TestPointLabelsDoNotCollide(t *testing.T) {
	l := &pointLabels{limit: 6}
	for i := range 40 {
		v := 0.1 + 0.01*float64(i)
		l.cands = append(l.cands, labelCand{pt: plotter.XY{X: v, Y: v - 0.002*float64(i%3)}, text: fmt.Sprintf("wf%d/task/s", i), clr: color.Black, drop: 0.002 * float64(i%3)})
	}
	l.cands = append([]labelCand{{pt: plotter.XY{X: 0.45, Y: 0.2}, text: "far/below/l", clr: color.Black, drop: 0.25}}, l.cands...)
	p := plot.New()
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 0.6, 0, 0.6
	p.Add(l)
	dc := draw.New(vgimg.New(figW, figH))
	p.Draw(dc)
	data := p.DataCanvas(dc)
	tx, ty := p.Transforms(&data)
	if l.drawn == 0 || l.drawn > l.limit || l.drawn != len(l.placed) {
		t.Fatalf("%d labels drawn (%d boxes), limit %d", l.drawn, len(l.placed), l.limit)
	}
	for i, a := range l.placed {
		for _, b := range l.placed[:i] {
			if a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y {
				t.Errorf("labels %v and %v overlap", a, b)
			}
		}
		if a.Min.X < data.Min.X || a.Max.X > data.Max.X || a.Min.Y < data.Min.Y || a.Max.Y > data.Max.Y {
			t.Errorf("label %v leaves the frame %v", a, data.Rectangle)
		}
		for _, cd := range l.cands {
			if x, y := tx(cd.pt.X), ty(cd.pt.Y); x > a.Min.X && x < a.Max.X && y > a.Min.Y && y < a.Max.Y {
				t.Errorf("label %v covers the point of %s", a, cd.text)
			}
		}
	}
	// no leader line crosses a label (other than its own, which it ends on) or another leader
	for i, ld := range l.leaders {
		for _, q := range l.placed {
			inner := vg.Rectangle{Min: vg.Point{X: q.Min.X + 1.5, Y: q.Min.Y + 1.5}, Max: vg.Point{X: q.Max.X - 1.5, Y: q.Max.Y - 1.5}}
			if segmentHitsRect(ld[0], ld[1], inner) {
				t.Errorf("leader %v crosses label %v", ld, q)
			}
		}
		for _, o := range l.leaders[:i] {
			if cross(ld[0], ld[1], o[0], o[1]) {
				t.Errorf("leaders %v and %v cross", ld, o)
			}
		}
	}
	// the largest drop, alone below the diagonal, is labelled first and next to its point
	far := l.cands[0]
	if r, x, y := l.placed[0], tx(far.pt.X), ty(far.pt.Y); math.Abs(float64((r.Min.X+r.Max.X)/2-x)) > 150 || math.Abs(float64((r.Min.Y+r.Max.Y)/2-y)) > 60 {
		t.Errorf("first label %v is not near the point of the largest drop (%v, %v)", r, x, y)
	}
}

// TestLegendLayout: legend entries fill as many columns as fit the width,
// row by row, and a narrower width gives more rows.
func TestLegendLayout(t *testing.T) {
	leg := newLegend()
	for _, s := range []string{"sp aggregator", "sp generator", "ip aggregator", "ip generator", "faint: per step; bold: smoothed, 7 steps"} {
		leg.Add(s)
	}
	wide, hWide := leg.layout(figW)
	narrow, hNarrow := leg.layout(2 * vg.Inch)
	if len(wide) < 2 || len(narrow) != 1 || !(hNarrow > hWide) {
		t.Errorf("columns %d (height %v) at %v, %d (height %v) at 2in", len(wide), hWide, figW, len(narrow), hNarrow)
	}
	var sum vg.Length
	for _, w := range wide {
		sum += w
	}
	if sum+vg.Length(len(wide)-1)*vg.Points(legendGap) > figW {
		t.Errorf("columns %v are wider than the figure", wide)
	}
	if c, h := (*legend)(nil).layout(figW); c != nil || h != 0 {
		t.Errorf("nil legend: %v, %v", c, h)
	}
}

// TestSegmentGeometry: the tests the labels' placement relies on.
func TestSegmentGeometry(t *testing.T) {
	pt := func(x, y vg.Length) vg.Point { return vg.Point{X: x, Y: y} }
	r := vg.Rectangle{Min: pt(10, 10), Max: pt(20, 20)}
	for _, tc := range []struct {
		name       string
		a, b       vg.Point
		cross, hit bool // crosses the segment (0,0)-(30,30); enters r
	}{
		{"through the box", pt(0, 15), pt(30, 15), true, true},
		{"ends inside", pt(15, 15), pt(15, 40), true, true},
		{"beside", pt(0, 25), pt(5, 30), false, false},
		{"parallel", pt(20, 0), pt(30, 10), false, false},
		{"above the box", pt(0, 25), pt(30, 25), true, false},
	} {
		if got := cross(tc.a, tc.b, pt(0, 0), pt(30, 30)); got != tc.cross {
			t.Errorf("%s: cross %v, want %v", tc.name, got, tc.cross)
		}
		if got := segmentHitsRect(tc.a, tc.b, r); got != tc.hit {
			t.Errorf("%s: enters the box %v, want %v", tc.name, got, tc.hit)
		}
	}
}

// TestShareAxes: the figures of one kind of a cell and its arms' cells get
// one range holding each one's, and say so; another scale's keeps its own.
func TestShareAxes(t *testing.T) {
	mk := func(kind string, k analysis.CellKey, ylo, yhi float64) pendingFigure {
		p := plot.New()
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 100, ylo, yhi
		return pendingFigure{f: Figure{Kind: kind, Cell: k.String()}, p: p, key: k}
	}
	main := analysis.CellKey{Workflow: "voting", Task: "synth-code", Scale: "s"}
	arm := main
	arm.Arm = "i1"
	other := main
	other.Scale = "m"
	pend := []pendingFigure{
		mk(kindFormat, main, -0.05, 1.05),
		mk(kindFormat, arm, 0.78, 1.01),
		mk(kindLength, arm, 10, 20),
		mk(kindFormat, other, 0.9, 1.0),
	}
	shareAxes(pend)
	for i, want := range [][2]float64{{-0.05, 1.05}, {-0.05, 1.05}, {10, 20}, {0.9, 1.0}} {
		if got := [2]float64{pend[i].p.Y.Min, pend[i].p.Y.Max}; got != want {
			t.Errorf("figure %d (%s %s): y-range %v, want %v", i, pend[i].f.Kind, pend[i].f.Cell, got, want)
		}
	}
	if !strings.Contains(pend[1].f.Caption, "shared with the same figure of "+main.String()) || !strings.Contains(pend[0].f.Caption, arm.String()) {
		t.Errorf("captions do not name the shared figures: %q, %q", pend[0].f.Caption, pend[1].f.Caption)
	}
	if pend[2].f.Caption != "" || pend[3].f.Caption != "" {
		t.Errorf("unshared figures' captions changed: %q, %q", pend[2].f.Caption, pend[3].f.Caption)
	}
}

// TestGainsOneCell: a study whose main matrix has one cell draws one gains
// figure with each trained condition on one axis, no 1x1 heat maps; a
// study of several cells draws a heat map per condition.
func TestGainsOneCell(t *testing.T) {
	st := fixtureStudy(t)
	cells := gainCells(st)
	if len(cells) < 2 {
		t.Fatalf("the fixture has %d cells with gains; the test needs several", len(cells))
	}
	gainFigs := func(st *analysis.Study) []string {
		figs, err := Figures(st)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range figs {
			if f.Kind == kindGains {
				out = append(out, f.Name)
			}
		}
		return out
	}
	if got := gainFigs(st); len(got) < 2 || slices.Contains(got, "gains_final") {
		t.Errorf("several cells: gains figures %v, want one heat map per trained condition", got)
	}
	one := *st
	one.Cells = []*analysis.CellResult{cells[0]}
	one.Runs = nil
	for _, r := range st.Runs {
		if r.Cell == cells[0].Key {
			one.Runs = append(one.Runs, r)
		}
	}
	if got := gainFigs(&one); !slices.Equal(got, []string{"gains_final"}) {
		t.Errorf("one cell: gains figures %v, want [gains_final]", got)
	}
}
