package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// Figure is one rendered figure: its file stem (files are Name+".png" and
// Name+".svg" under figures/), a title for the report and its images.
type Figure struct {
	Name    string
	Title   string
	Caption string
	Cell    string // cell key ("" for study-wide figures)
	Kind    string // what it shows, shared by the figures of every cell (a key of figureKinds)
	PNG     []byte
	SVG     []byte
}

const (
	figW   = 8 * vg.Inch
	figH   = 4.5 * vg.Inch // height of the plot, without the legend rows below it
	pngDPI = 110
	// figMargin is kept free on every side of a figure, so that titles and
	// labels do not touch its edge.
	figMargin = vg.Length(8) // points
)

// condColor gives each condition a fixed colour.
func condColor(c string) color.Color {
	switch c {
	case study.Base:
		return color.RGBA{R: 110, G: 110, B: 110, A: 255}
	case study.SARL:
		return color.RGBA{R: 0, G: 140, B: 70, A: 255}
	case study.SP:
		return color.RGBA{R: 30, G: 90, B: 200, A: 255}
	case study.IP:
		return color.RGBA{R: 210, G: 50, B: 40, A: 255}
	}
	return color.RGBA{R: 140, G: 80, B: 160, A: 255}
}

// condDash gives each condition a line dash so lines differ without colour.
func condDash(c string) []vg.Length {
	switch c {
	case study.Base:
		return []vg.Length{vg.Points(2), vg.Points(3)}
	case study.IP:
		return []vg.Length{vg.Points(6), vg.Points(3)}
	case study.SARL:
		return []vg.Length{vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}
	}
	return nil
}

// legend is a figure's legend, drawn in rows of columns below the plot so
// that the data keep the figure's whole width (plot.Legend draws one
// column, which beside the plot took about 30% of the width).
type legend struct {
	sty     text.Style
	thumbW  vg.Length
	entries []legendEntry
}

type legendEntry struct {
	text   string
	thumbs []plot.Thumbnailer
}

func newLegend() *legend {
	l := plot.NewLegend()
	l.TextStyle.Font.Size = vg.Points(10)
	return &legend{sty: l.TextStyle, thumbW: vg.Points(28)}
}

// Add adds an entry whose thumbnail is the composite of thumbs.
func (l *legend) Add(text string, thumbs ...plot.Thumbnailer) {
	l.entries = append(l.entries, legendEntry{text, thumbs})
}

const (
	legendGap  = 14 // points between legend columns
	legendLead = 4  // points between legend rows
)

// layout returns the column widths and the height of the legend drawn
// across width: entries filled row by row into as many columns as fit,
// each column as wide as its widest entry.
func (l *legend) layout(width vg.Length) (colW []vg.Length, height vg.Length) {
	if l == nil || len(l.entries) == 0 {
		return nil, 0
	}
	em := l.sty.Rectangle(" ").Max.X
	ew := make([]vg.Length, len(l.entries))
	for i, e := range l.entries {
		ew[i] = l.thumbW + em + l.sty.Rectangle(e.text).Max.X
	}
	for cols := len(l.entries); cols >= 1; cols-- {
		colW = make([]vg.Length, cols)
		for i, w := range ew {
			colW[i%cols] = max(colW[i%cols], w)
		}
		total := vg.Length(cols-1) * vg.Points(legendGap)
		for _, w := range colW {
			total += w
		}
		if total <= width || cols == 1 {
			break
		}
	}
	rows := (len(l.entries) + len(colW) - 1) / len(colW)
	return colW, vg.Length(rows)*l.entryHeight() + vg.Length(rows-1)*vg.Points(legendLead)
}

func (l *legend) entryHeight() vg.Length {
	var h vg.Length
	for _, e := range l.entries {
		h = max(h, l.sty.Rectangle(e.text).Max.Y)
	}
	return h
}

// draw draws the legend centred in c, from its top.
func (l *legend) draw(c draw.Canvas) {
	colW, _ := l.layout(c.Max.X - c.Min.X)
	if len(colW) == 0 {
		return
	}
	cols := len(colW)
	colX := make([]vg.Length, cols)
	used := vg.Length(cols-1) * vg.Points(legendGap)
	for _, w := range colW {
		used += w
	}
	x := c.Min.X + (c.Max.X-c.Min.X-used)/2
	for j, w := range colW {
		colX[j] = x
		x += w + vg.Points(legendGap)
	}
	h := l.entryHeight()
	em := l.sty.Rectangle(" ").Max.X
	descent := l.sty.FontExtents().Descent
	for i, e := range l.entries {
		row, col := i/cols, i%cols
		x := colX[col]
		yTop := c.Max.Y - vg.Length(row)*(h+vg.Points(legendLead))
		icon := &draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x, Y: yTop - h}, Max: vg.Point{X: x + l.thumbW, Y: yTop}}}
		for _, t := range e.thumbs {
			t.Thumbnail(icon)
		}
		c.FillText(l.sty, vg.Point{X: x + l.thumbW + em, Y: yTop - h + descent}, e.text)
	}
}

// render draws a plot with its legend in rows below it (so the legend
// never covers data and the data keep the whole width) as PNG and SVG,
// with figMargin free on every side. Fonts are the embedded defaults of
// gonum/plot and nothing time-dependent is written, so identical inputs
// give identical bytes.
func render(p *plot.Plot, leg *legend) (pngB, svgB []byte, err error) {
	_, legH := leg.layout(figW - 2*figMargin)
	h := figH
	if legH > 0 {
		h += legH + vg.Points(10)
	}
	draws := func(c vg.CanvasSizer) {
		dc := draw.Crop(draw.New(c), figMargin, -figMargin, figMargin, -figMargin)
		if legH == 0 {
			p.Draw(dc)
			return
		}
		top := draw.Crop(dc, 0, 0, legH+vg.Points(10), 0)
		p.Draw(top)
		leg.draw(draw.Crop(dc, 0, 0, 0, -(top.Max.Y - top.Min.Y + vg.Points(10))))
	}
	return encode(figW, h, draws)
}

// encode draws a figure of the given size as PNG and SVG.
func encode(w, h vg.Length, draws func(vg.CanvasSizer)) (pngB, svgB []byte, err error) {
	ic := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(pngDPI))
	draws(ic)
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: ic}).WriteTo(&pb); err != nil {
		return nil, nil, fmt.Errorf("encoding PNG: %w", err)
	}
	sc := vgsvg.New(w, h)
	draws(sc)
	var sb bytes.Buffer
	if _, err := sc.WriteTo(&sb); err != nil {
		return nil, nil, fmt.Errorf("encoding SVG: %w", err)
	}
	return pb.Bytes(), sb.Bytes(), nil
}

func newPlot(title, xl, yl string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = xl
	p.Y.Label.Text = yl
	p.Add(plotter.NewGrid())
	return p
}

// fileStem turns a cell key into a file-name fragment: workflow_task_scale,
// then _arm for an arm's cell.
func fileStem(k analysis.CellKey) string {
	s := strings.ToLower(k.Workflow + "_" + k.Task + "_" + k.Scale)
	if k.Arm != "" {
		s += "_" + strings.ToLower(k.Arm)
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	return b.String()
}

// series is one line: a label and points sorted by x.
type series struct {
	cond, role string
	xy         plotter.XYs
}

// meanByStep averages values per step over the given (step, value) samples,
// ignoring NaN, and returns them sorted by step.
func meanByStep(samples map[int64][]float64) plotter.XYs {
	steps := make([]int64, 0, len(samples))
	for s := range samples {
		steps = append(steps, s)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i] < steps[j] })
	var xy plotter.XYs
	for _, s := range steps {
		var sum, n float64
		for _, v := range samples[s] {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				sum += v
				n++
			}
		}
		if n > 0 {
			xy = append(xy, plotter.XY{X: float64(s), Y: sum / n})
		}
	}
	return xy
}

func addLine(p *plot.Plot, leg *legend, xy plotter.XYs, label string, clr color.Color, dash []vg.Length, width vg.Length, points bool) error {
	if len(xy) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return fmt.Errorf("line %s: %w", label, err)
	}
	l.Color, l.Dashes, l.Width = clr, dash, width
	p.Add(l)
	if points {
		s, err := plotter.NewScatter(xy)
		if err != nil {
			return fmt.Errorf("points %s: %w", label, err)
		}
		s.Color, s.Radius = clr, vg.Points(2)
		p.Add(s)
	}
	leg.Add(label, l)
	return nil
}

// pendingFigure is a cell's figure drawn but not yet rendered: the
// figures of one kind for cells that differ only in their arm get one
// shared axis range (shareAxes) before any is rendered.
type pendingFigure struct {
	f   Figure
	p   *plot.Plot
	leg *legend
	key analysis.CellKey
}

// shareAxes gives the figures of one kind whose cells have the same
// workflow, task and scale (a cell of the main matrix and its arms' cells)
// one x- and y-range: the union of their fitted ranges, which holds every
// figure's data with its margin. Paired arms then compare at a glance: a
// dip to 0.79 on an axis from 0.78 does not look like a collapse to 0 on
// its neighbour's axis from 0. The caption names the figures it shares
// with.
func shareAxes(pend []pendingFigure) {
	type group struct{ kind, main string }
	groups := map[group][]int{}
	var order []group
	for i, pf := range pend {
		g := group{pf.f.Kind, pf.key.Main().String()}
		if groups[g] == nil {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range order {
		idx := groups[g]
		if len(idx) < 2 {
			continue
		}
		p0 := pend[idx[0]].p
		xlo, xhi, ylo, yhi := p0.X.Min, p0.X.Max, p0.Y.Min, p0.Y.Max
		for _, i := range idx[1:] {
			p := pend[i].p
			xlo, xhi = math.Min(xlo, p.X.Min), math.Max(xhi, p.X.Max)
			ylo, yhi = math.Min(ylo, p.Y.Min), math.Max(yhi, p.Y.Max)
		}
		for _, i := range idx {
			p := pend[i].p
			p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = xlo, xhi, ylo, yhi
			var others []string
			for _, j := range idx {
				if j != i {
					others = append(others, pend[j].f.Cell)
				}
			}
			pend[i].f.Caption += " Its axes are shared with the same figure of " + strings.Join(others, ", ") + " (the same workflow, task and scale), so that they compare at a glance."
		}
	}
}

// Figures renders every figure of a study, in a fixed order.
func Figures(st *analysis.Study) ([]Figure, error) {
	var figs []Figure
	add := func(f Figure, p *plot.Plot, leg *legend) error {
		pb, sb, err := render(p, leg)
		if err != nil {
			return fmt.Errorf("figure %s: %w", f.Name, err)
		}
		f.PNG, f.SVG = pb, sb
		figs = append(figs, f)
		return nil
	}
	byCell := map[analysis.CellKey][]*analysis.RunResult{}
	for _, r := range st.Runs {
		byCell[r.Cell] = append(byCell[r.Cell], r)
	}
	var pend []pendingFigure
	for _, cell := range st.Cells {
		runs := byCell[cell.Key]
		stem := fileStem(cell.Key)
		ticks := stepTicks(evalSteps(runs))
		later := func(f Figure, p *plot.Plot, leg *legend) {
			pend = append(pend, pendingFigure{f: f, p: p, leg: leg, key: cell.Key})
		}
		p, leg, err := accuracyFigure(cell, runs, st.Params.CI)
		if err != nil {
			return nil, err
		}
		later(Figure{Name: "accuracy_" + stem, Cell: cell.Key.String(), Kind: kindAccuracy, Title: "Validation accuracy, " + cell.Key.String(),
			Caption: fmt.Sprintf("Workflow accuracy on the validation split at each validation step (ticks): per condition the mean over seeds as a line and its %g%% interval as one band with edges in the condition's colour "+
				"(the report's interval rule applied to each step's accuracy: problems resampled, plus the seed spread with two or more seeds); single seeds are not drawn. "+
				"Base is the untrained model (horizontal line). The y-axis fits the data.", st.Params.CI*100)}, p, leg)
		type stepFig struct {
			name, kind, title, ylabel, caption string
			value                              func(runlog.StepRow) float64
			log                                bool
		}
		for _, sf := range []stepFig{
			{"gradnorm_", kindGradNorm, "Per-role gradient norm", "gradient norm (L2, log scale)",
				"L2 norm of each role's share of the loss gradient per step (SP solid, IP dashed), mean over seeds: faint lines per step, bold lines smoothed by the geometric mean over a centred window of %d logged steps (fewer at both ends).",
				func(s runlog.StepRow) float64 { return s.GradNorm }, true},
			{"cosine_", kindCosine, "Same-role gradient cosine", "mean pairwise cosine",
				"Mean pairwise cosine between the gradients of agents of the same role (e.g. generator0 vs generator1; SP solid, IP dashed), mean over seeds: faint lines per step, bold lines smoothed by the mean over a centred window of %d logged steps (fewer at both ends); roles with one agent have none.",
				func(s runlog.StepRow) float64 { return s.AgentCosMean }, false},
		} {
			p, leg, n, window, err := roleStepFigure(cell, runs, sf.title+", "+cell.Key.String(), sf.ylabel, sf.value, sf.log)
			if err != nil {
				return nil, fmt.Errorf("figure %s%s: %w", sf.name, stem, err)
			}
			if n == 0 {
				continue
			}
			p.X.Tick.Marker = ticks
			later(Figure{Name: sf.name + stem, Cell: cell.Key.String(), Kind: sf.kind, Title: sf.title + ", " + cell.Key.String(), Caption: fmt.Sprintf(sf.caption, window)}, p, leg)
		}
		type evalFig struct {
			name, kind, title, ylabel, caption string
			value                              func(runlog.EvalRow) float64
			lo, hi, minSpan                    float64 // range of the quantity, smallest y span shown
			relSpan                            float64 // smallest y span as a share of the largest value (0: none)
		}
		for _, ef := range []evalFig{
			{"roleacc_", kindRoleAcc, "Per-role accuracy", "accuracy of the role's own answers (fraction)",
				"Per-role rows of the evals table: the regraded correctness of each role's own answers at each validation (e.g. each generator's answer; the aggregator's selected candidate), mean over seeds; trained conditions (base is their step 0).",
				func(e runlog.EvalRow) float64 { return e.Accuracy }, 0, 1, 0.05, 0},
			{"format_", kindFormat, "Per-role format compliance", "compliant turns (fraction)",
				"Fraction of each role's validation turns whose output followed the role's format.",
				func(e runlog.EvalRow) float64 { return e.FormatRate }, 0, 1, 0.05, 0},
			{"length_", kindLength, "Per-role output length", "mean output length (tokens)",
				"Mean length of each role's validation outputs in tokens.",
				// lengths: a span of at least a quarter of the longest, so a change of a token or two does not look like a collapse
				func(e runlog.EvalRow) float64 { return e.MeanLen }, 0, math.Inf(1), 1, 0.25},
		} {
			p, leg, n, err := roleEvalFigure(runs, ef.title+", "+cell.Key.String(), ef.ylabel, ef.value)
			if err != nil {
				return nil, fmt.Errorf("figure %s%s: %w", ef.name, stem, err)
			}
			if n == 0 {
				continue
			}
			fitY(p, ef.lo, ef.hi, math.Max(ef.minSpan, ef.relSpan*p.Y.Max))
			p.X.Tick.Marker = ticks
			later(Figure{Name: ef.name + stem, Cell: cell.Key.String(), Kind: ef.kind, Title: ef.title + ", " + cell.Key.String(), Caption: ef.caption}, p, leg)
		}
	}
	shareAxes(pend)
	for _, pf := range pend {
		if err := add(pf.f, pf.p, pf.leg); err != nil {
			return nil, err
		}
	}
	if p, leg, labels, n, err := ceilingFinalFigure(st); err != nil {
		return nil, err
	} else if n > 0 {
		pb, sb, err := render(p, leg)
		if err != nil {
			return nil, fmt.Errorf("figure ceiling_final: %w", err)
		}
		caption := "Each point is one trained condition of one cell (mean over seeds); SP and IP of the same cell are joined. Points below the diagonal lost accuracy after their peak. Both axes share one range, fitted to the points. " +
			labelsCaption(labels.drawn, n, "the largest drop (ceiling − final)")
		figs = append(figs, Figure{Name: "ceiling_final", Kind: kindCeiling, Title: "Ceiling vs final accuracy", PNG: pb, SVG: sb, Caption: caption})
	}
	if p, leg, labels, n, err := strictFigure(st); err != nil {
		return nil, err
	} else if n > 0 {
		pb, sb, err := render(p, leg)
		if err != nil {
			return nil, fmt.Errorf("figure strict_lenient: %w", err)
		}
		caption := "Each point is one condition of one cell (final accuracy: the mean of the last 3 validations, mean over seeds): lenient accuracy grades the final answer as the workflow produced it, strict accuracy also counts an episode wrong when a supervisory output (aggregator, evaluator, orchestrator, synthesizer) did not parse. Points below the diagonal got answers right through a parse fallback. " +
			labelsCaption(labels.drawn, n, "the largest lenient − strict")
		figs = append(figs, Figure{Name: "strict_lenient", Kind: kindStrict, Title: "Strict vs lenient final accuracy", PNG: pb, SVG: sb, Caption: caption})
	}
	if gc := gainCells(st); len(gc) == 1 {
		f, err := gainsOneCellFigure(st, gc[0])
		if err != nil {
			return nil, err
		}
		return append(figs, f), nil
	}
	for _, cond := range []string{study.SARL, study.SP, study.IP} {
		f, ok, err := gainsFigure(st, cond)
		if err != nil {
			return nil, err
		}
		if ok {
			figs = append(figs, f)
		}
	}
	return figs, nil
}

// labelsCaption says which points of a scatter figure pointLabels labelled:
// every point, or how many of how many and which first (order).
func labelsCaption(drawn, n int, order string) string {
	if drawn == n {
		return "Every point is labelled with its cell and condition."
	}
	return fmt.Sprintf("Labelled with cell and condition: %d of the %d points, those with %s first (at most %d) whose labels and leader lines fit without covering another label, leader line or point; the matrix gives every cell.", drawn, n, order, maxPointLabels)
}

// knownRoles fixes the colour of each workflow role across figures.
var knownRoles = study.Roles

// logTicks labels 1, 2 and 5 times each power of ten and marks the other
// integer multiples, so a log axis always shows several values.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= 0 || math.IsNaN(lo) || math.IsNaN(hi) {
		return nil
	}
	var out []plot.Tick
	for k := int(math.Floor(math.Log10(lo))); k <= int(math.Ceil(math.Log10(hi))); k++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow(10, float64(k))
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			lbl := ""
			if m == 1 || m == 2 || m == 5 {
				lbl = fmt.Sprintf("%g", v)
			}
			out = append(out, plot.Tick{Value: v, Label: lbl})
		}
	}
	return out
}

// The kinds of figure, as the figure index names them.
const (
	kindHeadline = "headline"
	kindCeiling  = "ceiling vs final"
	kindStrict   = "strict vs lenient"
	kindGains    = "gain over base"
	kindAccuracy = "validation accuracy"
	kindGradNorm = "gradient norm"
	kindCosine   = "gradient cosine"
	kindRoleAcc  = "per-role accuracy"
	kindFormat   = "format compliance"
	kindLength   = "output length"
)

// figureKinds describes each kind of figure in one line, in the order of
// the figure index.
var figureKinds = []struct{ kind, about string }{
	{kindHeadline, "the finding the summary's *Main results* leads with: the two rates of its strongest exact test with their exact intervals, or without one each trained condition's gain per run view"},
	{kindCeiling, "each trained condition of each cell as a point (ceiling, final); below the diagonal it lost accuracy after its peak"},
	{kindStrict, "each condition of each cell as a point (lenient, strict final accuracy), the furthest below the diagonal labelled; below the diagonal it got answers right through a parse fallback"},
	{kindGains, "final accuracy minus base per cell as a heat map (blue gain, red loss), one per trained condition; a study of one cell draws each condition's gain and interval on one axis instead"},
	{kindAccuracy, "the workflow's validation accuracy per condition over training, mean over seeds with one interval band per condition"},
	{kindGradNorm, "each role's gradient norm per step, raw and smoothed (log scale), SP and IP"},
	{kindCosine, "mean cosine between the gradients of same-role agents per step, raw and smoothed"},
	{kindRoleAcc, "the accuracy of each role's own answers at each validation"},
	{kindFormat, "each role's share of validation turns that followed its format"},
	{kindLength, "each role's mean validation output length in tokens"},
}
