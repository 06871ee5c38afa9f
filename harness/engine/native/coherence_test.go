package native

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
)

// TestCoherenceScales: a role gradient aligned with its EMA is scaled by
// 1 - lambda, an orthogonal or opposed one and one without an EMA not at
// all, a partly aligned one by 1 - lambda cos; the total is the sum of the
// scaled role gradients and the role gradients stay as they were.
func TestCoherenceScales(t *testing.T) {
	const lambda = 0.4
	g := func(v ...float32) []float32 { return v }
	cases := []struct {
		name      string
		grad, ema []float32 // ema nil: the role has none yet
		cos       float64   // NaN: undefined
		scale     float64
	}{
		{"aligned", g(1, 2, 0, 0), g(2, 4, 0, 0), 1, 1 - lambda},
		{"orthogonal", g(1, 0, 0, 0), g(0, 3, 0, 0), 0, 1},
		{"opposed", g(1, 1, 0, 0), g(-1, -1, 0, 0), -1, 1},
		{"half aligned", g(1, 0, 0, 0), g(1, 1.7320508, 0, 0), 0.5, 1 - lambda*0.5},
		{"no EMA yet", g(0, 0, 1, 1), nil, math.NaN(), 1},
		{"zero EMA", g(0, 0, 1, 1), g(0, 0, 0, 0), math.NaN(), 1},
	}
	gg := &grpoGrads{total: make([]float32, 4)}
	ema := map[string][]float32{}
	for _, c := range cases {
		gg.roles = append(gg.roles, c.name)
		gg.roleGrad = append(gg.roleGrad, slices.Clone(c.grad))
		if c.ema != nil {
			ema[c.name] = c.ema
		}
	}
	cos, scale := coherenceScales(ema, gg, lambda)
	want := make([]float64, 4)
	for r, c := range cases {
		if !(math.Abs(cos[r]-c.cos) < 1e-6 || math.IsNaN(cos[r]) && math.IsNaN(c.cos)) {
			t.Errorf("%s: cosine %v, want %v", c.name, cos[r], c.cos)
		}
		if math.Abs(scale[r]-c.scale) > 1e-6 {
			t.Errorf("%s: scale %v, want %v", c.name, scale[r], c.scale)
		}
		if !slices.Equal(gg.roleGrad[r], c.grad) {
			t.Errorf("%s: role gradient changed to %v", c.name, gg.roleGrad[r])
		}
		for i, v := range c.grad {
			want[i] += c.scale * float64(v)
		}
	}
	for i := range want {
		if math.Abs(float64(gg.total[i])-want[i]) > 1e-5 {
			t.Errorf("total[%d] = %v, want %v", i, gg.total[i], want[i])
		}
	}

	// Lambda 0 measures only: the same cosines, every scale 1, and the
	// total left as it was (the same buffer).
	before := gg.total
	cos0, scale0 := coherenceScales(ema, gg, 0)
	for r, c := range cases {
		if !(cos0[r] == cos[r] || math.IsNaN(cos0[r]) && math.IsNaN(cos[r])) || scale0[r] != 1 {
			t.Errorf("%s, lambda 0: cosine %v scale %v, want %v and 1", c.name, cos0[r], scale0[r], cos[r])
		}
	}
	if &gg.total[0] != &before[0] {
		t.Error("lambda 0 replaced the total gradient")
	}
}

// TestUpdateEMA: the EMA starts at the first gradient and then moves by
// 1 - decay towards each new one; a role not trained keeps its EMA.
func TestUpdateEMA(t *testing.T) {
	gg := &grpoGrads{roles: []string{"a"}, roleGrad: [][]float32{{2, 0}}}
	ema := updateEMA(nil, gg, 0.75)
	if !slices.Equal(ema["a"], []float32{2, 0}) {
		t.Fatalf("first EMA %v, want the first gradient", ema["a"])
	}
	gg = &grpoGrads{roles: []string{"b"}, roleGrad: [][]float32{{0, 4}}}
	ema = updateEMA(ema, gg, 0.75)
	gg = &grpoGrads{roles: []string{"a", "b"}, roleGrad: [][]float32{{6, 4}, {4, 0}}}
	ema = updateEMA(ema, gg, 0.75)
	if !slices.Equal(ema["a"], []float32{3, 1}) || !slices.Equal(ema["b"], []float32{1, 3}) {
		t.Fatalf("EMAs %v, want a [3 1], b [1 3]", ema)
	}
}

// TestCoherenceTrainStep: with the regularizer on, the first step logs an
// undefined cosine and scale 1 per role and takes the same step as without
// it; the second logs each role's cosine to the first step's gradient and
// the scale 1 - lambda max(0, cos); the EMA survives Save and Load, so a
// resumed engine takes the same second step bit for bit; with it off the
// statistics are NaN.
func TestCoherenceTrainStep(t *testing.T) {
	ctx := context.Background()
	coh := &engine.Coherence{Lambda: 0.5, EMADecay: 0.9}
	opt := defaultTrainOptions()
	on := opt
	on.Coherence = coh

	eOff, adOff, turns := grpoFixture(t, 1)
	off1, err := eOff.TrainStep(ctx, "p", turns, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range off1.Roles {
		if !math.IsNaN(rs.CoherenceCos) || !math.IsNaN(rs.CoherenceScale) {
			t.Errorf("off: role %s coherence %v %v, want NaN", rs.Role, rs.CoherenceCos, rs.CoherenceScale)
		}
	}

	e, ad, _ := grpoFixture(t, 1)
	st1, err := e.TrainStep(ctx, "p", turns, on)
	if err != nil {
		t.Fatal(err)
	}
	if len(st1.Roles) < 2 {
		t.Fatalf("fixture trains %d roles, want several", len(st1.Roles))
	}
	for _, rs := range st1.Roles {
		if !math.IsNaN(rs.CoherenceCos) || rs.CoherenceScale != 1 {
			t.Errorf("step 1: role %s coherence cos %v scale %v, want NaN and 1", rs.Role, rs.CoherenceCos, rs.CoherenceScale)
		}
	}
	if !slices.Equal(ad.Data, adOff.Data) {
		t.Error("step 1 with the regularizer on moved the adapter differently from the step without it")
	}
	if !math.IsNaN(st1.Total.CoherenceCos) || !math.IsNaN(st1.Total.CoherenceScale) {
		t.Errorf("total row coherence %v %v, want NaN", st1.Total.CoherenceCos, st1.Total.CoherenceScale)
	}
	first := map[string][]float32{}
	for role, m := range ad.ema {
		first[role] = slices.Clone(m)
	}

	dir := t.TempDir()
	if err := e.Save(ctx, dir); err != nil {
		t.Fatal(err)
	}
	_, gg, err := e.grpoStep(ctx, "p", turns, on, false)
	if err != nil {
		t.Fatal(err)
	}
	st2, err := e.TrainStep(ctx, "p", turns, on)
	if err != nil {
		t.Fatal(err)
	}
	scaled := false
	for r, rs := range st2.Roles {
		want := cosine(gg.roleGrad[r], first[rs.Role])
		if math.Abs(rs.CoherenceCos-want) > 1e-12 {
			t.Errorf("step 2: role %s cosine %v, want %v", rs.Role, rs.CoherenceCos, want)
		}
		if s := engine.CoherenceScale(coh.Lambda, want); rs.CoherenceScale != s {
			t.Errorf("step 2: role %s scale %v, want %v", rs.Role, rs.CoherenceScale, s)
		}
		scaled = scaled || rs.CoherenceScale < 1
	}
	if !scaled {
		t.Error("no role's gradient was scaled at step 2; the test shows nothing")
	}

	r, _, _ := grpoFixture(t, 1)
	if err := r.Load(ctx, dir); err != nil {
		t.Fatal(err)
	}
	rs2, err := r.TrainStep(ctx, "p", turns, on)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.adapters["p"].Data, ad.Data) || rs2.Total.GradNorm != st2.Total.GradNorm {
		t.Error("the engine loaded from the checkpoint took another second step")
	}
	for role, m := range ad.ema {
		if !slices.Equal(r.adapters["p"].ema[role], m) {
			t.Errorf("role %s: EMA after the resumed step differs", role)
		}
	}
}

// TestCoherenceMonitor: with lambda 0 (the measuring-only EMA every run
// keeps without the regularizer) the engine takes the steps of a nil
// Coherence bit for bit, with every other statistic the same, while it
// logs scale 1 and, from the second step, the cosine to the EMA, the same
// cosine the regularizer sees (its first step is unscaled); the EMA is
// saved and restored like the regularizer's.
func TestCoherenceMonitor(t *testing.T) {
	ctx := context.Background()
	opt := defaultTrainOptions()
	mon := opt
	mon.Coherence = engine.CoherenceMonitor()
	on := opt
	on.Coherence = &engine.Coherence{Lambda: 0.5, EMADecay: engine.DefaultCoherenceEMADecay}

	eOff, adOff, turns := grpoFixture(t, 1)
	eMon, adMon, _ := grpoFixture(t, 1)
	eOn, _, _ := grpoFixture(t, 1)
	strip := func(st engine.StepStats) string {
		st.Roles = slices.Clone(st.Roles)
		for i := range st.Roles {
			st.Roles[i].CoherenceCos, st.Roles[i].CoherenceScale = 0, 0
		}
		st.Total.CoherenceCos, st.Total.CoherenceScale = 0, 0
		return fmt.Sprintf("%+v", st)
	}
	dir := t.TempDir()
	for step := 1; step <= 3; step++ {
		if step == 3 {
			// Resume the monitored engine from its checkpoint.
			if err := eMon.Save(ctx, dir); err != nil {
				t.Fatal(err)
			}
			var err error
			eMon, _, _ = grpoFixture(t, 1)
			if err = eMon.Load(ctx, dir); err != nil {
				t.Fatal(err)
			}
			adMon = eMon.adapters["p"]
			if len(adMon.ema) == 0 {
				t.Fatal("the checkpoint did not restore the monitor's EMA")
			}
		}
		off, err := eOff.TrainStep(ctx, "p", turns, opt)
		if err != nil {
			t.Fatal(err)
		}
		m, err := eMon.TrainStep(ctx, "p", turns, mon)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(adMon.Data, adOff.Data) || !slices.Equal(adMon.opt.M, adOff.opt.M) || !slices.Equal(adMon.opt.V, adOff.opt.V) {
			t.Fatalf("step %d: the monitored step moved the adapter differently from the plain one", step)
		}
		if a, b := strip(m), strip(off); a != b {
			t.Errorf("step %d: monitored statistics differ beyond the coherence columns:\n%s\n%s", step, a, b)
		}
		if step <= 2 {
			o, err := eOn.TrainStep(ctx, "p", turns, on)
			if err != nil {
				t.Fatal(err)
			}
			if step == 2 {
				for r, rs := range m.Roles {
					if oc := o.Roles[r].CoherenceCos; rs.CoherenceCos != oc && !(math.IsNaN(rs.CoherenceCos) && math.IsNaN(oc)) {
						t.Errorf("step 2: role %s monitor cosine %v, regularizer's %v", rs.Role, rs.CoherenceCos, o.Roles[r].CoherenceCos)
					}
				}
			}
		}
		measured := 0
		for _, rs := range m.Roles {
			if rs.CoherenceScale != 1 || step == 1 && !math.IsNaN(rs.CoherenceCos) {
				t.Errorf("step %d: role %s cosine %v scale %v, want scale 1 (and no cosine at step 1)", step, rs.Role, rs.CoherenceCos, rs.CoherenceScale)
			}
			if !math.IsNaN(rs.CoherenceCos) {
				measured++
			}
		}
		if step > 1 && measured == 0 {
			t.Errorf("step %d: no role's cosine to its EMA was measured; the test shows nothing", step)
		}
	}
}

// TestCoherenceFormsUpdate: on a constructed gradient history (each role's
// EMA set to its own gradient at the adapter's weights, cosine 1, or to its
// negation, cosine -1), the step form's parameter update is exactly its
// step factor (the roles' factors weighted by their gradient shares) times
// the unregularised update, whatever AdamW's history; the paper's form,
// which scales the gradient AdamW then normalises, barely changes a one-role
// adapter's first update (the test logs how much it changes each).
func TestCoherenceFormsUpdate(t *testing.T) {
	ctx := context.Background()
	const lambda = 0.5
	plain := defaultTrainOptions()
	plain.Coherence = engine.CoherenceMonitor()
	paper := defaultTrainOptions()
	paper.Coherence = &engine.Coherence{Lambda: lambda, EMADecay: 0.9}
	step := paper
	step.Coherence = &engine.Coherence{Lambda: lambda, EMADecay: 0.9, Form: engine.CoherenceStep}
	cases := []struct {
		name     string
		oneRole  bool
		history  int  // plain steps before the checked one (AdamW's moments)
		opposed  bool // the second role's EMA is minus its gradient (cosine -1, factor 1)
		paperMax float64
	}{
		{name: "one role, first step", oneRole: true, paperMax: 1e-3},
		{name: "one role, after 3 steps", oneRole: true, history: 3},
		{name: "two roles, one opposed, after 2 steps", history: 2, opposed: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, ad, turns := grpoFixture(t, 1)
			if c.oneRole {
				turns = slices.DeleteFunc(turns, func(x engine.Turn) bool { return x.Role != turns[0].Role })
			}
			for i := 0; i < c.history; i++ {
				if _, err := e.TrainStep(ctx, "p", turns, plain); err != nil {
					t.Fatal(err)
				}
			}
			// On-policy old log-probs: no turn is clipped, so every role
			// has a gradient.
			cur, err := e.LogProbs(ctx, "p", turns, plain.Temperature)
			if err != nil {
				t.Fatal(err)
			}
			for i := range turns {
				turns[i].OldLogProbs = cur[i]
			}
			_, gg, err := e.grpoStep(ctx, "p", turns, plain, false)
			if err != nil {
				t.Fatal(err)
			}
			if c.oneRole != (len(gg.roles) == 1) {
				t.Fatalf("fixture trains %d roles", len(gg.roles))
			}
			ema := map[string][]float32{}
			for r, role := range gg.roles {
				m := slices.Clone(gg.roleGrad[r])
				if c.opposed && r == 1 {
					for i := range m {
						m[i] = -m[i]
					}
				}
				ema[role] = m
			}
			data, m, v, n := slices.Clone(ad.Data), slices.Clone(ad.opt.M), slices.Clone(ad.opt.V), ad.opt.Step
			take := func(opt engine.TrainOptions) (engine.StepStats, []float64) {
				t.Helper()
				copy(ad.Data, data)
				copy(ad.opt.M, m)
				copy(ad.opt.V, v)
				ad.opt.Step = n
				ad.ema = map[string][]float32{}
				for role, x := range ema {
					ad.ema[role] = slices.Clone(x)
				}
				st, err := e.TrainStep(ctx, "p", turns, opt)
				if err != nil {
					t.Fatal(err)
				}
				d := make([]float64, len(data))
				for i := range d {
					d[i] = float64(ad.Data[i]) - float64(data[i])
				}
				return st, d
			}
			stPlain, dPlain := take(plain)
			stPaper, dPaper := take(paper)
			stStep, dStep := take(step)

			want, wsum := 0.0, 0.0
			for r, rs := range stStep.Roles {
				wantScale := 1 - lambda
				if c.opposed && r == 1 {
					wantScale = 1
				}
				if math.Abs(rs.CoherenceScale-wantScale) > 1e-9 || rs.CoherenceScale != stPaper.Roles[r].CoherenceScale {
					t.Errorf("role %s: factor %v (paper's form %v), want %v", rs.Role, rs.CoherenceScale, stPaper.Roles[r].CoherenceScale, wantScale)
				}
				want += rs.GradShare * wantScale
				wsum += rs.GradShare
			}
			f := stStep.Total.CoherenceScale
			if math.Abs(wsum-1) > 1e-9 || math.Abs(f-want) > 1e-9 || !(f < 1) {
				t.Fatalf("step factor %v, want %v (shares sum to %v) and below 1", f, want, wsum)
			}
			if !math.IsNaN(stPaper.Total.CoherenceScale) {
				t.Errorf("the paper's form logs step factor %v, want NaN", stPaper.Total.CoherenceScale)
			}
			if stStep.GradNormPre != stPlain.GradNormPre {
				t.Errorf("step form: pre-clip gradient norm %v, want the plain step's %v (the gradients are not scaled)", stStep.GradNormPre, stPlain.GradNormPre)
			}
			// The step form: the update is f times the plain one, component
			// by component (up to float32 rounding of the weights).
			var res, norm float64
			for i := range dPlain {
				res += (dStep[i] - f*dPlain[i]) * (dStep[i] - f*dPlain[i])
				norm += f * dPlain[i] * f * dPlain[i]
			}
			if r := math.Sqrt(res / norm); !(r < 1e-5) {
				t.Errorf("step form: |Δθ - %.4g Δθ_plain| / |%.4g Δθ_plain| = %.3g, want < 1e-5", f, f, r)
			}
			ratio := func(d []float64) float64 {
				var dp, pp float64
				for i := range d {
					dp += d[i] * dPlain[i]
					pp += dPlain[i] * dPlain[i]
				}
				return dp / pp
			}
			rs, rp := ratio(dStep), ratio(dPaper)
			t.Logf("update / plain update: step form %.6f (factor %.6f), paper's form %.6f (role factors %v)", rs, f, rp, scalesOf(stPaper.Roles))
			if c.paperMax > 0 && !(math.Abs(rp-1) < c.paperMax) {
				t.Errorf("paper's form: update / plain update %.6f, want within %g of 1 (AdamW normalises a one-role gradient's factor away)", rp, c.paperMax)
			}
		})
	}
}

func scalesOf(roles []engine.RoleStats) []float64 {
	out := make([]float64, len(roles))
	for i, rs := range roles {
		out[i] = rs.CoherenceScale
	}
	return out
}
