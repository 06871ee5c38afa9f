package enginecheck

import (
	"math"
	"strings"
	"testing"
)

// TestUpdateAgainst: the fitted ratio of an update to the plain one and
// the relative residual to a factor, on constructed updates.
func TestUpdateAgainst(t *testing.T) {
	before := []float64{1, 2, 3, 4}
	plain := []float64{1.5, 1, 3, 4.25} // Δp = (0.5, -1, 0, 0.25)
	cases := []struct {
		name            string
		after           []float64
		factor          float64
		ratio, residual float64
	}{
		{"half the plain step", []float64{1.25, 1.5, 3, 4.125}, 0.5, 0.5, 0},
		{"the plain step, factor 0.5", plain, 0.5, 1, 1},
		{"no step", before, 0.5, 0, 1},
		{"factor 0: no residual", plain, 0, 1, math.NaN()},
	}
	for _, c := range cases {
		r, res := updateAgainst(before, plain, c.after, c.factor)
		if math.Abs(r-c.ratio) > 1e-12 || !(math.Abs(res-c.residual) < 1e-12 || math.IsNaN(res) && math.IsNaN(c.residual)) {
			t.Errorf("%s: ratio %v residual %v, want %v %v", c.name, r, res, c.ratio, c.residual)
		}
	}
	if r, res := updateAgainst(before, before, plain, 0.5); !math.IsNaN(r) || !math.IsNaN(res) {
		t.Errorf("zero plain update: ratio %v residual %v, want NaN", r, res)
	}
}

// TestHistoryFailures: the constructed history fails the check when it
// compared nothing, when the step form did not scale the step, when its
// update is not the factor times the plain one, and (in float32 only) when
// the engines' step factors differ.
func TestHistoryFailures(t *testing.T) {
	ok := History{Roles: 4, StepFactor: 0.5, StepFactorDiff: 1e-9, StepResidual: 1e-5}
	cases := []struct {
		name string
		edit func(*History)
		fp32 bool
		want string // "" : no failure
	}{
		{"passing", func(*History) {}, true, ""},
		{"nothing compared", func(h *History) { h.Roles = 0 }, true, "no role-step compared"},
		{"step not scaled", func(h *History) { h.StepFactor = 1 }, true, "the step was not scaled"},
		{"update not at the factor", func(h *History) { h.StepResidual = 0.3 }, false, "not the step factor times"},
		{"NaN residual", func(h *History) { h.StepResidual = math.NaN() }, true, "not the step factor times"},
		{"factors disagree", func(h *History) { h.StepFactorDiff = 0.01 }, true, "|Δ step factor| 0.01"},
		{"factors disagree in bf16", func(h *History) { h.StepFactorDiff = 0.01 }, false, ""},
	}
	for _, c := range cases {
		h := ok
		c.edit(&h)
		f := h.failures(c.fp32, DefaultStepTol)
		if c.want == "" && len(f) != 0 || c.want != "" && (len(f) != 1 || !strings.Contains(f[0], c.want)) {
			t.Errorf("%s: failures %q, want %q", c.name, f, c.want)
		}
	}
}
