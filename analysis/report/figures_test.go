package report

import (
	"math"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// TestFiguresFitData checks the axes of the fixture's figures: accuracy
// y-ranges hold every mean and band bound with a margin and are narrower
// than 0-1, x ticks fall on the validation steps, the gradient-norm axis
// holds the largest norm, ceiling-vs-final points carry their cell's name,
// and every cell has a per-role accuracy figure.
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
			gp, _, n, err := roleStepFigure(cell, runs, "g", "g", func(s runlog.StepRow) float64 { return s.GradNorm }, true)
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
	for _, cell := range st.Cells {
		if cell.Cond(study.SP) != nil && !strings.Contains(string(cf.SVG), ">"+cell.Key.String()+"<") {
			t.Errorf("ceiling_final has no label %q", cell.Key)
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
