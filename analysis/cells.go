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
// difference (interval.go).
func gain(c, ref *CondSummary, mi int, p Params) Estimate {
	return gainEstimate(c.samp, ref.samp, mi, c.values[mi]-ref.values[mi], p.CI)
}

// summarize computes a condition's estimates: the mean over seeds of each
// metric with the interval of the rule in interval.go.
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
	cs.samp = newSampling(runs, key, p)
	cs.CIMethod, cs.Problems = cs.samp.method(), cs.samp.problems
	est := make([]Estimate, nm)
	for k := range est {
		est[k] = cs.samp.estimate(k, cs.values[k], p.CI)
	}
	cs.Base, cs.Ceiling, cs.Final, cs.Floor, cs.Drop, cs.AUC, cs.CliffRate = est[0], est[1], est[2], est[3], est[4], est[5], est[6]
	strictLenient(&cs, runs, p.CI)
	return cs
}
