package report

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/study"
)

// gainGrid is a heat map of gains drawn as labelled cells: rows are
// workflows, columns scales; NaN cells are grey and marked "n/a".
type gainGrid struct {
	vals  [][]float64 // [row][col]
	cis   [][]analysis.Estimate
	scale float64 // |gain| at the ends of the colour scale
	// omitted is set when drawing left out an interval that did not fit
	// its cell even in the smallest font.
	omitted bool
}

// gainAnchors are the colours of the diverging scale at -1, -0.5, 0, 0.5
// and 1 (ColorBrewer's RdBu, white at 0): loss red, gain blue.
var gainAnchors = [5]color.RGBA{
	{R: 178, G: 24, B: 43, A: 255},
	{R: 239, G: 138, B: 98, A: 255},
	{R: 255, G: 255, B: 255, A: 255},
	{R: 103, G: 169, B: 207, A: 255},
	{R: 33, G: 102, B: 172, A: 255},
}

// gainColor maps a gain to the diverging scale symmetric about 0 with ends
// at -scale and +scale (values beyond take the end colours); NaN is grey.
func gainColor(v, scale float64) color.Color {
	if math.IsNaN(v) {
		return color.Gray{Y: 225}
	}
	t := math.Max(-1, math.Min(1, v/scale)) // in [-1, 1]
	pos := (t + 1) * 2                      // in [0, 4] over the anchors
	k := min(3, int(math.Floor(pos)))
	f := pos - float64(k)
	a, b := gainAnchors[k], gainAnchors[k+1]
	mix := func(x, y uint8) uint8 { return uint8(math.Round(float64(x) + f*(float64(y)-float64(x)))) }
	return color.RGBA{R: mix(a.R, b.R), G: mix(a.G, b.G), B: mix(a.B, b.B), A: 255}
}

// gainTextColor is white on the dark ends of the scale, black elsewhere.
func gainTextColor(v, scale float64) color.Color {
	if !math.IsNaN(v) && math.Abs(v) > 0.6*scale {
		return color.White
	}
	return color.Black
}

func (g *gainGrid) Plot(c draw.Canvas, plt *plot.Plot) {
	tx, ty := plt.Transforms(&c)
	sty := text.Style{Color: color.Black, Font: plt.X.Tick.Label.Font, XAlign: draw.XCenter, YAlign: draw.YCenter, Handler: plt.X.Tick.Label.Handler}
	sty.Font.Size = vg.Points(11)
	for r, row := range g.vals {
		for col, v := range row {
			x0, x1 := tx(float64(col)-0.5), tx(float64(col)+0.5)
			y0, y1 := ty(float64(r)-0.5), ty(float64(r)+0.5)
			c.FillPolygon(gainColor(v, g.scale), []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
			mid := vg.Point{X: (x0 + x1) / 2, Y: (y0 + y1) / 2}
			vs := sty
			vs.Color = gainTextColor(v, g.scale)
			if math.IsNaN(v) {
				c.FillText(vs, mid, "n/a")
				continue
			}
			val := fmt.Sprintf("%+.3f", v)
			e := g.cis[r][col]
			if !e.HasCI() {
				c.FillText(vs, mid, val)
				continue
			}
			// the interval on a second line, in the largest font that fits the cell
			ci := fmt.Sprintf("[%+.3f, %+.3f]", e.Lo, e.Hi)
			is := vs
			fits := false
			for _, size := range []float64{9, 8, 7} {
				is.Font.Size = vg.Points(size)
				if is.Width(ci) <= x1-x0-vg.Points(6) && vs.Height(val)+is.Height(ci)+vg.Points(2) <= y1-y0-vg.Points(4) {
					fits = true
					break
				}
			}
			if !fits {
				g.omitted = true
				c.FillText(vs, mid, val)
				continue
			}
			hv, hi := vs.Height(val), is.Height(ci)
			top := mid.Y + (hv+hi+vg.Points(2))/2
			c.FillText(vs, vg.Point{X: mid.X, Y: top - hv/2}, val)
			c.FillText(is, vg.Point{X: mid.X, Y: top - hv - vg.Points(2) - hi/2}, ci)
		}
	}
}

func (g *gainGrid) DataRange() (xmin, xmax, ymin, ymax float64) {
	cols := 0
	if len(g.vals) > 0 {
		cols = len(g.vals[0])
	}
	return -0.5, float64(cols) - 0.5, -0.5, float64(len(g.vals)) - 0.5
}

// gainsFigure draws, for one condition, the gain of final accuracy over
// base as a workflow x scale grid, one panel per task.
func gainsFigure(st *analysis.Study, cond string) (Figure, bool, error) {
	tasks, wfs, scales := map[string]bool{}, map[string]bool{}, map[string]bool{}
	gains := map[analysis.CellKey]float64{}
	cis := map[analysis.CellKey]analysis.Estimate{}
	maxAbs := 0.0
	for _, c := range st.Cells {
		cs := c.Cond(cond)
		if cs == nil || math.IsNaN(cs.GainBaseFinal.Value) || c.Key.Arm != "" {
			continue // the grid is the main matrix's
		}
		tasks[c.Key.Task], wfs[c.Key.Workflow], scales[c.Key.Scale] = true, true, true
		gains[c.Key] = cs.GainBaseFinal.Value
		cis[c.Key] = cs.GainBaseFinal
		maxAbs = math.Max(maxAbs, math.Abs(cs.GainBaseFinal.Value))
	}
	if len(gains) == 0 {
		return Figure{}, false, nil
	}
	scale := gainScale(maxAbs)
	sorted := func(m map[string]bool, less func(a, b string) bool) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
		return out
	}
	byName := func(a, b string) bool { return a < b }
	tl, wl, sl := sorted(tasks, byName), sorted(wfs, byName), sorted(scales, analysis.ScaleLess)
	var plots []*plot.Plot
	var grids []*gainGrid
	for _, task := range tl {
		g := &gainGrid{scale: scale}
		for _, wf := range wl {
			row := make([]float64, len(sl))
			crow := make([]analysis.Estimate, len(sl))
			for j, sc := range sl {
				k := analysis.CellKey{Workflow: wf, Task: task, Scale: sc}
				v, ok := gains[k]
				if !ok {
					v = math.NaN()
				}
				row[j], crow[j] = v, cis[k]
			}
			g.vals = append(g.vals, row)
			g.cis = append(g.cis, crow)
		}
		p := plot.New()
		p.Title.Text = "task " + task
		p.X.Label.Text = "scale"
		p.Y.Label.Text = "workflow"
		p.Add(g)
		p.NominalX(sl...)
		p.NominalY(wl...)
		plots = append(plots, p)
		grids = append(grids, g)
	}
	title := fmt.Sprintf("Gain of %s over base, final accuracy", cond)
	const barW = 1.1 * vg.Inch // the colour bar and its labels, right of the panels
	w := vg.Length(len(plots))*(1.3*vg.Inch+vg.Length(len(sl))*1.2*vg.Inch) + barW + 2*figMargin
	h := vg.Length(1.5+0.7*float64(len(wl)))*vg.Inch + 2*figMargin
	draws := func(c vg.CanvasSizer) {
		dc := draw.Crop(draw.New(c), figMargin, -figMargin, figMargin, -figMargin)
		tsty := text.Style{Color: color.Black, Font: plots[0].Title.TextStyle.Font, XAlign: draw.XCenter, YAlign: draw.YTop, Handler: plots[0].Title.TextStyle.Handler}
		tsty.Font.Size = vg.Points(13)
		dc.FillText(tsty, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Max.Y}, title)
		body := draw.Crop(dc, 0, -barW, 0, -vg.Points(24))
		tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Points(20), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
		canv := plot.Align([][]*plot.Plot{plots}, tiles, body)
		for i, p := range plots {
			p.Draw(canv[0][i])
		}
		bar := draw.Crop(dc, dc.Max.X-dc.Min.X-barW+vg.Points(12), 0, vg.Points(40), -vg.Points(44))
		drawGainBar(bar, scale, plots[0].X.Tick.Label)
	}
	pb, sb, err := encode(w, h, draws)
	if err != nil {
		return Figure{}, false, fmt.Errorf("figure gains_%s: %w", cond, err)
	}
	omitted := false
	for _, g := range grids {
		omitted = omitted || g.omitted
	}
	caption := fmt.Sprintf("Final accuracy of %s minus base accuracy per cell (mean over seeds) with its %g%% interval below it; rows are workflows, columns scales, one panel per task. "+
		"Diverging colours, symmetric about 0: blue is a gain, red a loss, white no change; the colour bar runs from %s to %s.", cond, st.Params.CI*100, tickLabel(-scale), tickLabel(scale))
	if omitted {
		caption += " Intervals too wide for their cell are left out; the matrix gives them."
	}
	return Figure{Name: "gains_final_" + cond, Kind: kindGains, Title: title, PNG: pb, SVG: sb, Caption: caption}, true, nil
}

// gainScale is the end of the symmetric colour scale: the largest |gain|
// rounded up to a multiple of 0.05 (below 0.1) or of 0.1, at least 0.05.
func gainScale(maxAbs float64) float64 {
	if maxAbs <= 0.1 {
		return math.Max(0.05, math.Ceil(maxAbs*20-1e-9)/20)
	}
	return math.Ceil(maxAbs*10-1e-9) / 10
}

// tickLabel writes a colour-bar value with its sign ("0" for zero).
func tickLabel(v float64) string {
	if v == 0 {
		return "0"
	}
	s := strconv.FormatFloat(math.Abs(v), 'f', -1, 64)
	if v < 0 {
		return "−" + s
	}
	return "+" + s
}

// drawGainBar draws the colour bar of the gains scale in c: a vertical bar
// from -scale (bottom) to +scale (top) with five labelled ticks and its
// name above.
func drawGainBar(c draw.Canvas, scale float64, lbl text.Style) {
	const slices = 64
	barW := vg.Points(12)
	x0, x1 := c.Min.X, c.Min.X+barW
	hgt := c.Max.Y - c.Min.Y
	for i := 0; i < slices; i++ {
		v := scale * (2*(float64(i)+0.5)/slices - 1)
		y0 := c.Min.Y + hgt*vg.Length(i)/slices
		y1 := c.Min.Y + hgt*vg.Length(i+1)/slices
		c.FillPolygon(gainColor(v, scale), []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
	}
	edge := draw.LineStyle{Color: color.Gray{Y: 90}, Width: vg.Points(0.5)}
	c.StrokeLines(edge, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}, {X: x0, Y: c.Min.Y}})
	sty := lbl
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	for _, f := range []float64{-1, -0.5, 0, 0.5, 1} {
		y := c.Min.Y + hgt*vg.Length((f+1)/2)
		c.StrokeLine2(edge, x1, y, x1+vg.Points(4), y)
		c.FillText(sty, vg.Point{X: x1 + vg.Points(6), Y: y}, tickLabel(f*scale))
	}
	name := lbl
	name.XAlign, name.YAlign = draw.XLeft, draw.YBottom
	c.FillText(name, vg.Point{X: x0, Y: c.Max.Y + vg.Points(8)}, "gain")
}

// gainCells returns the cells of the main matrix with a gain over base for
// some trained condition, in the study's order.
func gainCells(st *analysis.Study) []*analysis.CellResult {
	var out []*analysis.CellResult
	for _, c := range st.Cells {
		if c.Key.Arm != "" {
			continue
		}
		for _, cond := range []string{study.SARL, study.SP, study.IP} {
			if cs := c.Cond(cond); cs != nil && !math.IsNaN(cs.GainBaseFinal.Value) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// gainsOneCellFigure draws the gains of a study whose main matrix has one
// cell with gains (the demo): a heat map of one cell per condition says
// less than one axis with each trained condition's gain and its interval
// beside the others, so this replaces the heat maps.
func gainsOneCellFigure(st *analysis.Study, cell *analysis.CellResult) (Figure, error) {
	title := "Gain over base, final accuracy, " + cell.Key.String()
	p := newPlot(title, "condition", "final accuracy − base accuracy")
	var names []string
	lo, hi := 0.0, 0.0
	for _, cond := range []string{study.SARL, study.SP, study.IP} {
		cs := cell.Cond(cond)
		if cs == nil || math.IsNaN(cs.GainBaseFinal.Value) {
			continue
		}
		e := cs.GainBaseFinal
		x := float64(len(names))
		names = append(names, cond)
		clr := condColor(cond)
		if e.HasCI() {
			bar, err := plotter.NewLine(plotter.XYs{{X: x, Y: e.Lo}, {X: x, Y: e.Hi}})
			if err != nil {
				return Figure{}, err
			}
			bar.Color, bar.Width = clr, vg.Points(2)
			p.Add(bar)
			for _, y := range []float64{e.Lo, e.Hi} {
				tick, err := plotter.NewLine(plotter.XYs{{X: x - 0.08, Y: y}, {X: x + 0.08, Y: y}})
				if err != nil {
					return Figure{}, err
				}
				tick.Color, tick.Width = clr, vg.Points(2)
				p.Add(tick)
			}
			lo, hi = math.Min(lo, e.Lo), math.Max(hi, e.Hi)
		}
		pt, err := plotter.NewScatter(plotter.XYs{{X: x, Y: e.Value}})
		if err != nil {
			return Figure{}, err
		}
		pt.Color, pt.Radius, pt.Shape = clr, vg.Points(5), draw.CircleGlyph{}
		p.Add(pt)
		val := fmt.Sprintf("%+.3f", e.Value)
		if e.HasCI() {
			val += fmt.Sprintf(" [%+.3f, %+.3f]", e.Lo, e.Hi)
		}
		lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: []plotter.XY{{X: x + 0.1, Y: e.Value}}, Labels: []string{val}})
		if err != nil {
			return Figure{}, err
		}
		for i := range lbl.TextStyle {
			lbl.TextStyle[i].Color, lbl.TextStyle[i].YAlign = clr, draw.YCenter
		}
		p.Add(lbl)
		lo, hi = math.Min(lo, e.Value), math.Max(hi, e.Value)
	}
	if err := gainAxes(p, names, lo, hi); err != nil {
		return Figure{}, err
	}
	pb, sb, err := render(p, nil)
	if err != nil {
		return Figure{}, fmt.Errorf("figure gains_final: %w", err)
	}
	caption := fmt.Sprintf("Final accuracy of each trained condition minus base accuracy in %s, the study's one cell of the main matrix (mean over seeds), with its %g%% interval as a bar; the dashed line is no change. "+
		"One cell gives one number per condition, so they share one axis instead of a heat map each.", cell.Key, st.Params.CI*100)
	return Figure{Name: "gains_final", Kind: kindGains, Title: title, PNG: pb, SVG: sb, Caption: caption}, nil
}

// gainAxes finishes a figure of one column per name on a gain scale: a
// dashed line at no change, the names on the x axis, and a y range from lo
// to hi with a margin.
func gainAxes(p *plot.Plot, names []string, lo, hi float64) error {
	zero, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 0}, {X: float64(len(names)) - 0.5, Y: 0}})
	if err != nil {
		return err
	}
	zero.Color, zero.Dashes = grey(120), []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(zero)
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	m := yMargin * math.Max(hi-lo, 0.05)
	p.Y.Min, p.Y.Max = lo-m, hi+m
	p.Y.Tick.Marker = niceTicks{lo: -1, hi: 1}
	return nil
}
