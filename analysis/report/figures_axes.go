package report

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/marlowlab/marlow/analysis"
)

// Axis fitting: every figure's y-range comes from the data it draws (lines,
// points and interval bands) with a margin, so that nothing touches or
// leaves the frame and small effects are not squashed against a fixed 0-1
// range; x ticks fall on the validation steps.

const yMargin = 0.08 // share of the data's span added above and below

// fitY sets the y-range of a linear axis to the data range of p (after
// every plotter was added), limited to [lo, hi] (the values the quantity
// can take), at least minSpan wide, and widened by yMargin of its span on
// both sides; the margin may pass lo or hi, so that values at a bound are
// drawn inside the frame, but no tick is labelled beyond them.
func fitY(p *plot.Plot, lo, hi, minSpan float64) {
	dlo, dhi := math.Max(lo, p.Y.Min), math.Min(hi, p.Y.Max)
	if math.IsInf(dlo, 0) || math.IsInf(dhi, 0) || math.IsNaN(dlo) || math.IsNaN(dhi) || dlo > dhi {
		dlo, dhi = math.Max(lo, 0), math.Min(hi, 1)
	}
	if dhi-dlo < minSpan {
		mid := (dlo + dhi) / 2
		dlo, dhi = mid-minSpan/2, mid+minSpan/2
		if dlo < lo {
			dlo, dhi = lo, lo+minSpan
		}
		if dhi > hi {
			dlo, dhi = hi-minSpan, hi
		}
	}
	m := yMargin * (dhi - dlo)
	p.Y.Min, p.Y.Max = dlo-m, dhi+m
	p.Y.Tick.Marker = niceTicks{lo: lo, hi: hi}
}

// fitLogY sets the y-range of a log axis to the positive data range of p
// widened by a factor on each side (a quarter of the span in decades, at
// least 1.25x), so that the largest value is drawn inside the frame.
func fitLogY(p *plot.Plot) {
	lo, hi := p.Y.Min, p.Y.Max
	if !(lo > 0) || !(hi > 0) || math.IsInf(hi, 0) {
		return
	}
	f := math.Max(1.25, math.Pow(hi/lo, yMargin))
	p.Y.Min, p.Y.Max = lo/f, hi*f
}

// stepTicks returns ticks on the validation steps, labelled so that at most
// about 12 labels are shown (every k-th step, always the first and the
// last), with minor ticks on the unlabelled ones.
func stepTicks(steps []int64) plot.Ticker {
	s := slices.Clone(steps)
	slices.Sort(s)
	s = slices.Compact(s)
	if len(s) < 2 {
		return plot.DefaultTicks{}
	}
	k := (len(s) + 11) / 12
	var t plot.ConstantTicks
	for i, v := range s {
		lbl := ""
		if i%k == 0 || i == len(s)-1 && (i%k)*2 >= k {
			lbl = fmt.Sprint(v)
		}
		t = append(t, plot.Tick{Value: float64(v), Label: lbl})
	}
	return t
}

// evalSteps returns the validation steps of the given runs' curves.
func evalSteps(runs []*analysis.RunResult) []int64 {
	var s []int64
	for _, r := range runs {
		for _, pt := range r.Curve {
			s = append(s, pt.Step)
		}
	}
	slices.Sort(s)
	return slices.Compact(s)
}

// withAlpha returns c with the given opacity (premultiplied, as image/color
// requires).
func withAlpha(c color.Color, a uint8) color.Color {
	r, g, b, _ := c.RGBA()
	f := float64(a) / 255
	return color.RGBA{R: uint8(float64(r>>8) * f), G: uint8(float64(g>>8) * f), B: uint8(float64(b>>8) * f), A: a}
}

// addBand draws a translucent band between lo and hi over xs (NaN bounds
// leave gaps: a band is drawn for each run of defined points), with its
// upper and lower edges as thin lines in clr and the given dash, so that
// where the bands of several conditions overlap each keeps its colour
// (translucent fills alone blend to grey).
func addBand(p *plot.Plot, xs, lo, hi []float64, clr color.Color, dash []vg.Length) error {
	flush := func(i, j int) error {
		if j-i < 1 {
			return nil
		}
		var poly plotter.XYs
		for k := i; k < j; k++ {
			poly = append(poly, plotter.XY{X: xs[k], Y: hi[k]})
		}
		for k := j - 1; k >= i; k-- {
			poly = append(poly, plotter.XY{X: xs[k], Y: lo[k]})
		}
		if j-i == 1 { // one point: a short vertical bar
			l, err := plotter.NewLine(plotter.XYs{{X: xs[i], Y: lo[i]}, {X: xs[i], Y: hi[i]}})
			if err != nil {
				return err
			}
			l.Color, l.Width = withAlpha(clr, 120), vg.Points(3)
			p.Add(l)
			return nil
		}
		pg, err := plotter.NewPolygon(poly)
		if err != nil {
			return err
		}
		pg.Color, pg.LineStyle.Width = withAlpha(clr, 14), 0
		p.Add(pg)
		for _, edge := range [][]float64{lo, hi} {
			xy := make(plotter.XYs, 0, j-i)
			for k := i; k < j; k++ {
				xy = append(xy, plotter.XY{X: xs[k], Y: edge[k]})
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return err
			}
			l.Color, l.Width, l.Dashes = withAlpha(clr, 170), vg.Points(0.6), dash
			p.Add(l)
		}
		return nil
	}
	start := 0
	for i := 0; i <= len(xs); i++ {
		if i == len(xs) || math.IsNaN(lo[i]) || math.IsNaN(hi[i]) {
			if err := flush(start, i); err != nil {
				return err
			}
			start = i + 1
		}
	}
	return nil
}

func grey(y uint8) color.Color { return color.Gray{Y: y} }

// condShape is the marker of the i-th condition of a figure.
func condShape(i int) draw.GlyphDrawer { return plotutil.Shape(i) }

// sortConds sorts condition names in the study's order.
func sortConds(conds []string) {
	slices.SortFunc(conds, func(a, b string) int {
		if d := analysis.CondOrder(a) - analysis.CondOrder(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
}

// niceTicks labels round values (1, 2 or 5 times a power of ten apart) so
// that 4 to 10 labels fall in the range, with an unlabelled tick between
// labels.
type niceTicks struct{ lo, hi float64 } // no ticks outside [lo, hi]

func (t niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	span := hi - lo
	step := math.Pow(10, math.Floor(math.Log10(span)))
	for _, f := range []float64{0.1, 0.2, 0.5, 1, 2, 5, 10} {
		if span/(step*f) <= 10 {
			step *= f
			break
		}
	}
	prec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	var out []plot.Tick
	half := step / 2
	for v := math.Ceil(lo/half-1e-9) * half; v <= hi+1e-9*span; v += half {
		k := math.Round(v / half)
		x := k * half
		if x < t.lo-1e-12 || x > t.hi+1e-12 {
			continue
		}
		lbl := ""
		if int64(k)%2 == 0 {
			lbl = strconv.FormatFloat(x+0, 'f', prec, 64)
		}
		out = append(out, plot.Tick{Value: x, Label: lbl})
	}
	return out
}
