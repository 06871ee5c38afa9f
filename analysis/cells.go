package analysis

import (
	"math"

	"github.com/marlowlab/marlow/harness/study"
)

func buildCells(runs []*RunResult, p Params) []*CellResult {
	var cells []*CellResult
	for i := 0; i < len(runs); {
		j := i
		for j < len(runs) && runs[j].Cell == runs[i].Cell {
			j++
		}
		cell := &CellResult{Key: runs[i].Cell}
		for a := i; a < j; {
			b := a
			for b < j && runs[b].Condition == runs[a].Condition {
				b++
			}
			cell.Conditions = append(cell.Conditions, summarize(runs[a:b], cell.Key, p))
			a = b
		}
		base, sarl := cell.Cond(study.Base), cell.Cond(study.SARL)
		for k := range cell.Conditions {
			c := &cell.Conditions[k]
			if base != nil && c.Condition != study.Base {
				c.GainBaseCeiling = gain(c, base, 1, p)
				c.GainBaseFinal = gain(c, base, 2, p)
			} else {
				c.GainBaseCeiling, c.GainBaseFinal = noCI(math.NaN()), noCI(math.NaN())
			}
			if sarl != nil && c.Condition != study.SARL && c.Condition != study.Base {
				c.GainSARLCeiling = gain(c, sarl, 1, p)
				c.GainSARLFinal = gain(c, sarl, 2, p)
			} else {
				c.GainSARLCeiling, c.GainSARLFinal = noCI(math.NaN()), noCI(math.NaN())
			}
		}
		cells = append(cells, cell)
		i = j
	}
	return cells
}

// gain is metric mi of c minus that of ref, with the interval of the
// difference of their (paired) bootstrap replicates.
func gain(c, ref *CondSummary, mi int, p Params) Estimate {
	e := noCI(c.values[mi] - ref.values[mi])
	if c.reps == nil || ref.reps == nil {
		return e
	}
	d := make([]float64, len(c.reps[mi]))
	for b := range d {
		d[b] = c.reps[mi][b] - ref.reps[mi][b]
	}
	e.Lo, e.Hi = percentileCI(d, p.CI)
	return e
}

// summarize computes a condition's estimates. With several seeds the
// point estimate is the mean over seeds and the bootstrap resamples seeds;
// with one seed it resamples that run's validation problems and recomputes
// every metric from the resampled curve.
func summarize(runs []*RunResult, key CellKey, p Params) CondSummary {
	cs := CondSummary{Condition: runs[0].Condition, Seeds: len(runs)}
	nm := len(metricNames)
	cs.values = make([]float64, nm)
	for _, r := range runs {
		cs.RunIDs = append(cs.RunIDs, r.RunID)
		v := metricVector(r.Metrics)
		for k := range v {
			cs.values[k] += v[k] / float64(len(runs))
		}
		cs.CeilingStep += float64(r.Metrics.CeilingStep) / float64(len(runs))
		if r.Metrics.Cliff.Cliff {
			cs.CliffRuns++
		}
	}
	rng := streamFor(p.BootstrapSeed, key.String())
	switch {
	case len(runs) > 1:
		cs.CIMethod = "seeds"
		cs.reps = make([][]float64, nm)
		vecs := make([][]float64, len(runs))
		for i, r := range runs {
			vecs[i] = metricVector(r.Metrics)
		}
		for b := 0; b < p.Bootstrap; b++ {
			acc := make([]float64, nm)
			for range runs {
				v := vecs[rng.IntN(len(runs))]
				for k := range acc {
					acc[k] += v[k] / float64(len(runs))
				}
			}
			for k := range acc {
				cs.reps[k] = append(cs.reps[k], acc[k])
			}
		}
	case runs[0].Problems != nil && len(runs[0].Problems.Problems) > 1:
		cs.CIMethod = "problems"
		pm := runs[0].Problems
		cs.reps = make([][]float64, nm)
		idx := make([]int, len(pm.Problems))
		var curve []Point
		for b := 0; b < p.Bootstrap; b++ {
			for i := range idx {
				idx[i] = rng.IntN(len(idx))
			}
			curve = pm.resampledCurve(idx, curve)
			m, err := ComputeMetrics(curve, p)
			if err != nil { // cannot happen: steps come from a valid curve
				cs.reps = nil
				break
			}
			for k, v := range metricVector(m) {
				cs.reps[k] = append(cs.reps[k], v)
			}
		}
	default:
		cs.CIMethod = "none"
	}
	est := make([]Estimate, nm)
	for k := range est {
		est[k] = noCI(cs.values[k])
		if cs.reps != nil {
			est[k].Lo, est[k].Hi = percentileCI(cs.reps[k], p.CI)
		}
	}
	if cs.reps == nil {
		cs.CIMethod = "none"
	}
	cs.Base, cs.Ceiling, cs.Final, cs.Floor, cs.Drop, cs.AUC = est[0], est[1], est[2], est[3], est[4], est[5]
	return cs
}
