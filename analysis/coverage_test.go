package analysis

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func logistic(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// popAcc is E[logistic(mu + sd*Z)] for a standard normal Z (Simpson's rule
// over ±8 sd).
func popAcc(mu, sd float64) float64 {
	const n = 4000 // even
	a, h := -8.0, 16.0/n
	var s float64
	for i := 0; i <= n; i++ {
		z := a + float64(i)*h
		w := 2.0
		switch {
		case i == 0 || i == n:
			w = 1
		case i%2 == 1:
			w = 4
		}
		s += w * logistic(mu+sd*z) * math.Exp(-z*z/2) / math.Sqrt(2*math.Pi)
	}
	return s * h / 3
}

// simStudy is one simulated study of an untrained (a) and a trained (b)
// condition in one cell with the given number of seeds.
type simStudy struct {
	d     CoverageDesign
	sc    CoverageScenario
	seeds int
}

// logits returns the population logit of each validation of a condition.
func (s simStudy) logits(trained bool) []float64 {
	out := make([]float64, s.d.Evals)
	b := math.Log(s.d.BaseAcc / (1 - s.d.BaseAcc))
	for i := range out {
		out[i] = b
		if trained {
			out[i] += s.d.GainLogit * float64(i) / float64(s.d.Evals-1)
		}
	}
	return out
}

// truthFinal is the population value of a condition's final accuracy: the
// mean over its last 3 validations of the accuracy averaged over seeds and
// problems.
func (s simStudy) truthFinal(trained bool) float64 {
	sd := math.Sqrt(s.sc.SeedSD*s.sc.SeedSD + s.sc.ProblemSD*s.sc.ProblemSD + s.sc.StepSD*s.sc.StepSD)
	l := s.logits(trained)
	k := min(3, len(l))
	var m float64
	for _, x := range l[len(l)-k:] {
		m += popAcc(x, sd) / float64(k)
	}
	return m
}

// runs draws the runs of one condition given the problems' offsets.
func (s simStudy) runs(rng *rand.Rand, cond string, trained bool, u []float64, key CellKey, p Params) []*RunResult {
	steps := make([]int64, s.d.Evals)
	for i := range steps {
		steps[i] = int64(10 * i)
	}
	probs := make([]string, len(u))
	for j := range probs {
		probs[j] = fmt.Sprintf("p%03d", j)
	}
	l := s.logits(trained)
	var out []*RunResult
	for seed := 1; seed <= s.seeds; seed++ {
		v := rng.NormFloat64() * s.sc.SeedSD
		pm := &ProblemMatrix{Steps: steps, Problems: probs, Source: "final"}
		curve := make([]Point, len(steps))
		for i := range steps {
			w := rng.NormFloat64() * s.sc.StepSD
			row := make([]float64, len(u))
			var sum float64
			for j := range u {
				q := logistic(l[i] + u[j] + v + w)
				var c float64
				for range s.d.Rollouts {
					if rng.Float64() < q {
						c++
					}
				}
				row[j] = c / float64(s.d.Rollouts)
				sum += row[j]
			}
			pm.Correct = append(pm.Correct, row)
			curve[i] = Point{Step: steps[i], Acc: sum / float64(len(u))}
		}
		m, err := ComputeMetrics(curve, p)
		if err != nil {
			panic(err)
		}
		out = append(out, &RunResult{RunID: fmt.Sprintf("%s-seed%d", cond, seed), Cell: key, Condition: cond,
			SeedIndex: seed, Curve: curve, Metrics: m, Problems: pm})
	}
	return out
}

// measure runs the studies of one scenario and seed count and returns how
// many intervals of the trained condition's final accuracy and of its gain
// over the untrained one contain the population values.
func (s simStudy) measure(rngSeed uint64) (final, gainN int) {
	rng := rand.New(rand.NewPCG(rngSeed, 0x636f76))
	key := CellKey{Workflow: "voting", Task: "sim", Scale: "s"}
	ta, tb := s.truthFinal(false), s.truthFinal(true)
	for i := range s.d.Studies {
		p := DefaultParams()
		p.Bootstrap, p.BootstrapSeed = s.d.Bootstrap, uint64(i+1)
		u := make([]float64, s.d.Problems)
		for j := range u {
			u[j] = rng.NormFloat64() * s.sc.ProblemSD
		}
		a := summarize(s.runs(rng, "base", false, u, key, p), key, p)
		b := summarize(s.runs(rng, "sp", true, u, key, p), key, p)
		if b.Final.Lo <= tb && tb <= b.Final.Hi {
			final++
		}
		if g := gain(&b, &a, 2, p); g.Lo <= tb-ta && tb-ta <= g.Hi {
			gainN++
		}
	}
	return final, gainN
}

// TestIntervalCoverage simulates Coverage.Studies studies per scenario and
// seed count with known seed and problem spread and checks that nominal 95%
// intervals cover the population value in 90-98% of studies at 3 and 10
// seeds. At every seed count the measured coverage must equal
// MeasuredCoverage, the table the report prints.
func TestIntervalCoverage(t *testing.T) {
	for si, sc := range CoverageScenarios {
		for _, seeds := range CoverageSeeds {
			t.Run(fmt.Sprintf("%s/%d seeds", sc.Name, seeds), func(t *testing.T) {
				t.Parallel()
				s := simStudy{d: Coverage, sc: sc, seeds: seeds}
				f, g := s.measure(uint64(100*si + seeds))
				got := CoverageRow{Scenario: sc.Name, Seeds: seeds,
					Final: float64(f) / float64(Coverage.Studies), Gain: float64(g) / float64(Coverage.Studies)}
				t.Logf("coverage %+v", got)
				if seeds >= MinSeeds {
					for _, c := range []float64{got.Final, got.Gain} {
						if c < 0.90 || c > 0.98 {
							t.Errorf("coverage %.3f of nominal 95%% intervals at %d seeds, want 0.90-0.98", c, seeds)
						}
					}
				}
				var want *CoverageRow
				for i := range MeasuredCoverage {
					if MeasuredCoverage[i].Scenario == sc.Name && MeasuredCoverage[i].Seeds == seeds {
						want = &MeasuredCoverage[i]
					}
				}
				if want == nil || *want != got {
					t.Errorf("MeasuredCoverage holds %+v, measured %+v: update the table in coverage.go", want, got)
				}
			})
		}
	}
}

// TestIntervalTwoEqualSeeds is the case of two seeds that happen to give
// the same metric: the seed part is zero, but the problem part remains, so
// the interval is the one-seed interval, never a zero-width one.
func TestIntervalTwoEqualSeeds(t *testing.T) {
	d := Coverage
	d.Bootstrap = 300
	s := simStudy{d: d, sc: CoverageScenarios[1], seeds: 1}
	p := DefaultParams()
	p.Bootstrap = d.Bootstrap
	key := CellKey{Workflow: "voting", Task: "sim", Scale: "s"}
	rng := rand.New(rand.NewPCG(1, 2))
	u := make([]float64, d.Problems)
	for j := range u {
		u[j] = rng.NormFloat64()
	}
	one := s.runs(rng, "sp", true, u, key, p)
	twin := *one[0]
	twin.RunID, twin.SeedIndex = "sp-seed2", 2
	a := summarize(one, key, p)
	b := summarize([]*RunResult{one[0], &twin}, key, p)
	if b.CIMethod != MethodSeedsProblems || a.CIMethod != MethodProblems {
		t.Fatalf("methods %s and %s", a.CIMethod, b.CIMethod)
	}
	for i, pair := range [][2]Estimate{{a.Final, b.Final}, {a.Ceiling, b.Ceiling}, {a.AUC, b.AUC}} {
		wa, wb := pair[0].Hi-pair[0].Lo, pair[1].Hi-pair[1].Lo
		if wa <= 0 || wb < wa*0.999 {
			t.Errorf("metric %d: width %.4f with one seed, %.4f with two equal seeds; want the two-seed interval at least as wide", i, wa, wb)
		}
	}
	// no problems and two equal seeds: a zero-width interval, never significant
	for _, r := range []*RunResult{one[0], &twin} {
		r.Problems = nil
	}
	c := summarize([]*RunResult{one[0], &twin}, key, p)
	if c.CIMethod != MethodSeeds || !c.Final.Degenerate() || c.Final.Excludes(c.Final.Value+0.1) {
		t.Errorf("equal seeds without problems: %s %+v", c.CIMethod, c.Final)
	}
}

// TestCurveIntervals checks the per-step intervals of the accuracy figures
// in closed form: one seed gives sd/sqrt(P) of the per-problem
// correctness; two identical seeds share every problem effect (no seed
// part, the same problem part); seeds on different problems have only the
// seed part.
func TestCurveIntervals(t *testing.T) {
	pm := &ProblemMatrix{Steps: []int64{0, 10}, Problems: []string{"a", "b", "c", "d"},
		Correct: [][]float64{{1, 0, 1, 0}, {1, 1, 1, 0}}}
	r1 := &RunResult{RunID: "r1", Curve: []Point{{0, 0.5}, {10, 0.75}}, Problems: pm}
	one := CurveIntervals([]*RunResult{r1}, 0.95)
	// step 0: var(1,0,1,0) = 1/3, se = sqrt(1/3/4); t(3) 97.5% = 3.182446
	se := math.Sqrt(1.0 / 3 / 4)
	if len(one) != 2 || !near(one[0].SE, se) || math.Abs(one[0].Lo-math.Max(0, 0.5-3.182446*se)) > 1e-5 || one[0].DF != 3 {
		t.Errorf("one seed: %+v, want se %v df 3", one, se)
	}
	r2 := *r1
	r2.RunID = "r2"
	two := CurveIntervals([]*RunResult{r1, &r2}, 0.95)
	if !near(two[0].SE, se) || !near(two[1].SE, one[1].SE) {
		t.Errorf("two equal seeds: %+v, want the one-seed standard errors", two)
	}
	r3 := r2
	r3.Problems = &ProblemMatrix{Steps: pm.Steps, Problems: []string{"e", "f", "g", "h"}, Correct: pm.Correct}
	r3.Curve = []Point{{0, 0.25}, {10, 0.75}}
	mixed := CurveIntervals([]*RunResult{r1, &r3}, 0.95)
	// seed part only: var(0.5, 0.25)/2 = 0.015625; step 10 has two equal values
	if !near(mixed[0].SE, math.Sqrt(0.03125/2)) || mixed[0].DF != 1 || !mixed[1].Degenerate() {
		t.Errorf("seeds on different problems: %+v", mixed)
	}
}
