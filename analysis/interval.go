package analysis

import (
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
)

// The interval rule.
//
// A condition's number is the mean over its seeds of a metric computed
// from each seed's validation curve. Its uncertainty has two sources: the
// seeds (training randomness, independent between runs) and the validation
// problems (a sample from the task's problems, the same for every seed of
// an experiment: the first val_size held-out problems). The interval is a
// Student-t interval around the mean whose squared standard error is the
// sum of the two parts:
//
//   - seeds: the sample variance of the per-seed metrics over the number of
//     seeds (only with two or more seeds), with seeds-1 degrees of freedom;
//   - problems: the variance of the seed mean over B bootstrap replicates
//     that resample the validation problems with replacement (the same
//     resampled problems for every seed and, through a stream keyed by the
//     cell and the problem list, for every condition of the cell, so gains
//     are paired) and recompute every metric from the resampled curves,
//     with problems-1 degrees of freedom.
//
// The degrees of freedom of the sum are Welch-Satterthwaite's. A gain (a
// difference between two conditions of a cell) adds both conditions' seed
// parts and takes the problem part from the paired replicates of the
// difference. With one seed only the problem part is known; the interval
// then covers the problem sampling but not the seed-to-seed spread, and its
// measured coverage (Coverage) is printed in the report.
//
// An interval exists when every condition involved has two or more seeds
// or per-problem validation samples; it has zero width only when every
// resample gives the same value (e.g. the drop of a one-point base curve).
// Bounds are clamped to the range a metric can take.

// CI methods, as recorded in CondSummary.CIMethod and summary.parquet.
const (
	MethodSeedsProblems = "seeds+problems" // t interval, seed and problem parts
	MethodSeeds         = "seeds"          // t interval over seeds; no per-problem samples
	MethodProblems      = "problems"       // one seed: problem bootstrap, t interval
	MethodNone          = "none"           // one seed and no per-problem samples
)

// MinSeeds is the number of seeds below which the report and diff warn
// that an interval leaves out (one seed) or barely estimates (two seeds)
// the seed-to-seed spread.
const MinSeeds = 3

// sampling is what the interval rule knows about one condition of a cell.
type sampling struct {
	seeds    int
	perSeed  [][]float64 // [seed][metric] metrics of each seed's full curve
	probReps [][]float64 // [metric][replicate] seed mean on resampled problems; nil when unavailable
	// seedVar is, per metric, the mean over seeds of the variance of one
	// seed's metric over the replicates.
	seedVar  []float64
	problems int // validation problems the replicates resample (fewest over seeds); 0 when none
}

// within is the part of the replicates' variance of the seed mean that
// differs from seed to seed (the seed x problem interaction and rollout
// noise) and is therefore already in the seed part: with S seeds it is
// (mean seed variance - variance of the mean) / (S - 1). It is 0 with one
// seed, where there is no seed part.
func (s *sampling) within(mi int) float64 {
	if s.seeds < 2 || s.probReps == nil {
		return 0
	}
	return math.Max(0, (s.seedVar[mi]-sampleVar(s.probReps[mi]))/float64(s.seeds-1))
}

// varPart is one independent part of a squared standard error.
type varPart struct{ v, df float64 }

// metricRange is the interval a metric's value lies in.
func metricRange(gain bool) (lo, hi float64) {
	if gain {
		return -1, 1
	}
	return 0, 1
}

// seedPart returns the seed part of metric mi: the variance of the mean over
// seeds and its degrees of freedom; ok is false with fewer than two seeds.
func (s *sampling) seedPart(mi int) (varPart, bool) {
	if s.seeds < 2 {
		return varPart{}, false
	}
	var mean float64
	for _, v := range s.perSeed {
		mean += v[mi]
	}
	mean /= float64(s.seeds)
	var ss float64
	for _, v := range s.perSeed {
		d := v[mi] - mean
		ss += d * d
	}
	return varPart{v: ss / float64(s.seeds-1) / float64(s.seeds), df: float64(s.seeds - 1)}, true
}

// sampleVar is the variance of xs with denominator n-1.
func sampleVar(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	var mean float64
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return ss / float64(len(xs)-1)
}

// tInterval combines independent variance parts into a t interval around v
// at level ci (Welch-Satterthwaite degrees of freedom), clamped to
// [lo, hi]. It also returns the standard error and degrees of freedom (+Inf
// when the standard error is zero).
func tInterval(v float64, parts []varPart, ci, lo, hi float64) Estimate {
	e := Estimate{Value: v}
	var total, den float64
	for _, p := range parts {
		total += p.v
		if p.v > 0 {
			den += p.v * p.v / p.df
		}
	}
	e.SE = math.Sqrt(total)
	if total <= 0 || den == 0 {
		e.SE, e.DF = 0, math.Inf(1)
		e.Lo, e.Hi = v, v
		return e
	}
	e.DF = total * total / den
	q := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: e.DF}.Quantile(1 - (1-ci)/2)
	e.Lo = math.Max(lo, math.Min(v, v-q*e.SE))
	e.Hi = math.Min(hi, math.Max(v, v+q*e.SE))
	return e
}

// estimate is the interval of metric mi of one condition.
func (s *sampling) estimate(mi int, value, ci float64) Estimate {
	var parts []varPart
	if sp, ok := s.seedPart(mi); ok {
		parts = append(parts, sp)
	}
	if s.probReps != nil {
		v := math.Max(0, sampleVar(s.probReps[mi])-s.within(mi))
		parts = append(parts, varPart{v: v, df: float64(s.problems - 1)})
	}
	if len(parts) == 0 {
		return noCI(value)
	}
	lo, hi := metricRange(false)
	return tInterval(value, parts, ci, lo, hi)
}

// gainEstimate is the interval of metric mi of c minus that of ref.
func gainEstimate(c, ref *sampling, mi int, value, ci float64) Estimate {
	var parts []varPart
	for _, s := range []*sampling{c, ref} {
		sp, ok := s.seedPart(mi)
		if !ok && s.probReps == nil {
			return noCI(value) // nothing is known of this side's spread
		}
		if ok {
			parts = append(parts, sp)
		}
	}
	if c.probReps != nil && ref.probReps != nil {
		d := make([]float64, len(c.probReps[mi]))
		for b := range d {
			d[b] = c.probReps[mi][b] - ref.probReps[mi][b]
		}
		v := math.Max(0, sampleVar(d)-c.within(mi)-ref.within(mi))
		parts = append(parts, varPart{v: v, df: float64(min(c.problems, ref.problems) - 1)})
	} else if c.seeds < 2 || ref.seeds < 2 {
		return noCI(value) // a one-seed side whose problems cannot be paired
	}
	lo, hi := metricRange(true)
	return tInterval(value, parts, ci, lo, hi)
}

// method names what an interval of s rests on.
func (s *sampling) method() string {
	switch {
	case s.seeds >= 2 && s.probReps != nil:
		return MethodSeedsProblems
	case s.seeds >= 2:
		return MethodSeeds
	case s.probReps != nil:
		return MethodProblems
	}
	return MethodNone
}

// newSampling computes the per-seed metrics of runs (one condition of the
// cell key) and the problem-bootstrap replicates of their mean.
func newSampling(runs []*RunResult, key CellKey, p Params) *sampling {
	s := &sampling{seeds: len(runs)}
	for _, r := range runs {
		s.perSeed = append(s.perSeed, metricVector(r.Metrics))
	}
	// group runs by their problem list: runs with the same list share the
	// resampled indices of each replicate
	type group struct {
		key  string
		runs []*RunResult
	}
	var groups []*group
	for _, r := range runs {
		pm := r.Problems
		if pm == nil || len(pm.Problems) < 2 {
			return s // some seed has no per-problem samples: no problem part
		}
		k := strings.Join(pm.Problems, "\x00")
		i := slices.IndexFunc(groups, func(g *group) bool { return g.key == k })
		if i < 0 {
			groups = append(groups, &group{key: k})
			i = len(groups) - 1
		}
		groups[i].runs = append(groups[i].runs, r)
		if s.problems == 0 || len(pm.Problems) < s.problems {
			s.problems = len(pm.Problems)
		}
	}
	nm := len(metricNames)
	reps := make([][]float64, nm)
	for k := range reps {
		reps[k] = make([]float64, p.Bootstrap)
	}
	seedVar := make([]float64, nm)
	one := make([][]float64, nm) // one seed's metric per replicate
	for k := range one {
		one[k] = make([]float64, p.Bootstrap)
	}
	var curve []Point
	for _, g := range groups {
		// one stream per (cell, problem list): every condition of the cell
		// evaluated on the same problems draws the same indices
		rng := streamFor(p.BootstrapSeed, key.String()+"\x00"+g.key)
		idx := make([][]int, p.Bootstrap)
		for b := range idx {
			idx[b] = make([]int, len(g.runs[0].Problems.Problems))
			for i := range idx[b] {
				idx[b][i] = rng.IntN(len(idx[b]))
			}
		}
		for _, r := range g.runs {
			for b := range idx {
				curve = r.Problems.resampledCurve(idx[b], curve)
				m, err := ComputeMetrics(curve, p)
				if err != nil { // cannot happen: the steps come from a valid curve
					s.problems = 0
					return s
				}
				for k, v := range metricVector(m) {
					reps[k][b] += v / float64(len(runs))
					one[k][b] = v
				}
			}
			for k := range one {
				seedVar[k] += sampleVar(one[k]) / float64(len(runs))
			}
		}
	}
	s.probReps, s.seedVar = reps, seedVar
	return s
}

// DifferenceInterval is the interval of b - a for two independent
// estimates that carry their standard errors and degrees of freedom (as
// stored in summary.parquet), at level ci: a t interval with
// Welch-Satterthwaite degrees of freedom. It has zero width when both
// standard errors are zero, and no interval when either is missing.
func DifferenceInterval(b, a Estimate, ci float64) Estimate {
	v := b.Value - a.Value
	if math.IsNaN(a.SE) || math.IsNaN(b.SE) || math.IsNaN(a.DF) || math.IsNaN(b.DF) || math.IsNaN(v) {
		return noCI(v)
	}
	var parts []varPart
	for _, e := range []Estimate{a, b} {
		if e.SE > 0 {
			parts = append(parts, varPart{v: e.SE * e.SE, df: e.DF})
		}
	}
	return tInterval(v, parts, ci, math.Inf(-1), math.Inf(1))
}

// StepEstimate is the accuracy of one validation step over a condition's
// seeds, with its interval.
type StepEstimate struct {
	Step int64
	Estimate
}

// CurveIntervals applies the interval rule to the accuracy at each
// validation step of runs (the seeds of one condition in one cell): the
// mean over the seeds that have the step, with a t interval of a seed part
// (two or more seeds) and a problem part computed in closed form, since
// accuracy is a mean over problems: the variance of the per-problem
// correctness over the number of problems with one seed, and with several
// seeds their mean covariance between seeds (what the seeds share) when
// every seed has the same problems. Steps without any part have no
// interval (NaN bounds).
func CurveIntervals(runs []*RunResult, ci float64) []StepEstimate {
	bySeed := map[int64][]float64{}
	var steps []int64
	for _, r := range runs {
		for _, pt := range r.Curve {
			if _, ok := bySeed[pt.Step]; !ok {
				steps = append(steps, pt.Step)
			}
			bySeed[pt.Step] = append(bySeed[pt.Step], pt.Acc)
		}
	}
	slices.Sort(steps)
	shared := len(runs) > 0
	for _, r := range runs {
		if r.Problems == nil || len(r.Problems.Problems) < 2 || !slices.Equal(r.Problems.Problems, runs[0].Problems.Problems) {
			shared = false
		}
	}
	out := make([]StepEstimate, 0, len(steps))
	for _, st := range steps {
		accs := bySeed[st]
		var mean float64
		for _, a := range accs {
			mean += a / float64(len(accs))
		}
		var parts []varPart
		if len(accs) >= 2 {
			parts = append(parts, varPart{v: sampleVar(accs) / float64(len(accs)), df: float64(len(accs) - 1)})
		}
		if v, n, ok := problemPart(runs, st, shared); ok {
			parts = append(parts, varPart{v: v, df: float64(n - 1)})
		}
		e := noCI(mean)
		if len(parts) > 0 {
			e = tInterval(mean, parts, ci, 0, 1)
		}
		out = append(out, StepEstimate{Step: st, Estimate: e})
	}
	return out
}

// problemPart is the problem part of the accuracy at step st (see
// CurveIntervals) and the number of problems; ok is false when it is not
// known (no per-problem samples at that step, or seeds validated on
// different problems, whose problem sampling the seed part then holds).
func problemPart(runs []*RunResult, st int64, shared bool) (v float64, n int, ok bool) {
	if !shared {
		return 0, 0, false
	}
	var rows [][]float64
	for _, r := range runs {
		i := slices.Index(r.Problems.Steps, st)
		if i < 0 {
			return 0, 0, false
		}
		rows = append(rows, r.Problems.Correct[i])
	}
	s, n := len(rows), len(rows[0])
	if s == 1 {
		return sampleVar(rows[0]) / float64(n), n, true
	}
	// mean covariance between seeds: (S^2 var(mean) - sum var) / (S (S-1))
	mean := make([]float64, n)
	var sumVar float64
	for _, row := range rows {
		for j, x := range row {
			mean[j] += x / float64(s)
		}
		sumVar += sampleVar(row)
	}
	cov := (float64(s*s)*sampleVar(mean) - sumVar) / float64(s*(s-1))
	return math.Max(0, cov) / float64(n), n, true
}
