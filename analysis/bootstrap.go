package analysis

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
)

// Estimate is a point estimate with a bootstrap confidence interval. Lo and
// Hi are NaN when no interval could be computed.
type Estimate struct {
	Value float64
	Lo    float64
	Hi    float64
}

// Outside reports whether v lies outside the interval (false when the
// interval is undefined).
func (e Estimate) Outside(v float64) bool {
	if math.IsNaN(e.Lo) || math.IsNaN(e.Hi) || math.IsNaN(v) {
		return false
	}
	return v < e.Lo-1e-12 || v > e.Hi+1e-12
}

func noCI(v float64) Estimate { return Estimate{Value: v, Lo: math.NaN(), Hi: math.NaN()} }

// percentileCI returns the equal-tailed percentile interval of level ci of
// the replicates, with linear interpolation between order statistics.
func percentileCI(reps []float64, ci float64) (lo, hi float64) {
	if len(reps) == 0 {
		return math.NaN(), math.NaN()
	}
	s := append([]float64(nil), reps...)
	sort.Float64s(s)
	a := (1 - ci) / 2
	return quantile(s, a), quantile(s, 1-a)
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	i := int(math.Floor(pos))
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}

// streamFor returns the bootstrap random stream of a cell. Every condition
// of a cell draws from a fresh copy of the same stream, so conditions with
// the same number of seeds (or the same validation problems) get the same
// resampled indices: the bootstrap of a gain is paired.
func streamFor(seed uint64, key string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(key))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}
