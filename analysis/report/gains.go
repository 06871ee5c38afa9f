package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/marlowlab/marlow/analysis"
)

// gainGrid is a heat map of gains drawn as labelled cells: rows are
// workflows, columns scales; NaN cells are grey and marked "n/a".
type gainGrid struct {
	vals  [][]float64 // [row][col]
	cis   [][]analysis.Estimate
	scale float64 // |gain| that maps to full colour
}

func gainColor(v, scale float64) color.Color {
	if math.IsNaN(v) {
		return color.Gray{Y: 225}
	}
	t := math.Min(1, math.Abs(v)/scale)
	mix := func(full uint8) uint8 { return uint8(math.Round(255 - t*(255-float64(full)))) }
	if v >= 0 {
		return color.RGBA{R: mix(200), G: mix(60), B: mix(50), A: 255}
	}
	return color.RGBA{R: mix(40), G: mix(90), B: mix(200), A: 255}
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
			lbl := "n/a"
			if !math.IsNaN(v) {
				lbl = fmt.Sprintf("%+.3f", v)
				if e := g.cis[r][col]; e.HasCI() {
					lbl += fmt.Sprintf("\n[%+.3f, %+.3f]", e.Lo, e.Hi)
				}
			}
			c.FillText(sty, vg.Point{X: (x0 + x1) / 2, Y: (y0 + y1) / 2}, lbl)
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
		if cs == nil || math.IsNaN(cs.GainBaseFinal.Value) {
			continue
		}
		tasks[c.Key.Task], wfs[c.Key.Workflow], scales[c.Key.Scale] = true, true, true
		gains[c.Key] = cs.GainBaseFinal.Value
		cis[c.Key] = cs.GainBaseFinal
		maxAbs = math.Max(maxAbs, math.Abs(cs.GainBaseFinal.Value))
	}
	if len(gains) == 0 {
		return Figure{}, false, nil
	}
	if maxAbs < 0.05 {
		maxAbs = 0.05
	}
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
	for _, task := range tl {
		g := &gainGrid{scale: maxAbs}
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
	}
	title := fmt.Sprintf("Gain of %s over base, final accuracy", cond)
	w := vg.Length(len(plots))*4*vg.Inch + 0.5*vg.Inch
	h := vg.Length(1.4+0.6*float64(len(wl))) * vg.Inch
	draws := func(c vg.CanvasSizer) {
		dc := draw.New(c)
		tsty := text.Style{Color: color.Black, Font: plots[0].Title.TextStyle.Font, XAlign: draw.XCenter, YAlign: draw.YTop, Handler: plots[0].Title.TextStyle.Handler}
		tsty.Font.Size = vg.Points(13)
		dc.FillText(tsty, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Max.Y - vg.Points(4)}, title+" (red: gain, blue: loss)")
		body := draw.Crop(dc, 0, 0, 0, -vg.Points(24))
		tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Points(20), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
		canv := plot.Align([][]*plot.Plot{plots}, tiles, body)
		for i, p := range plots {
			p.Draw(canv[0][i])
		}
	}
	ic := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(pngDPI))
	draws(ic)
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: ic}).WriteTo(&pb); err != nil {
		return Figure{}, false, fmt.Errorf("figure gains_%s: encoding PNG: %w", cond, err)
	}
	sc := vgsvg.New(w, h)
	draws(sc)
	var sb bytes.Buffer
	if _, err := sc.WriteTo(&sb); err != nil {
		return Figure{}, false, fmt.Errorf("figure gains_%s: encoding SVG: %w", cond, err)
	}
	return Figure{
		Name: "gains_final_" + cond, Title: title, PNG: pb.Bytes(), SVG: sb.Bytes(),
		Caption: fmt.Sprintf("Final accuracy of %s minus base accuracy per cell (mean over seeds) with its %g%% interval in brackets; rows are workflows, columns scales, one panel per task.", cond, st.Params.CI*100),
	}, true, nil
}
