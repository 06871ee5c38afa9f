package analysis

import (
	"math"
	"math/rand/v2"

	"github.com/marlowlab/marlow/keyed"
)

// Estimate is a point estimate with its confidence interval (see the
// interval rule in interval.go). Lo, Hi, SE and DF are NaN when no interval
// could be computed.
type Estimate struct {
	Value float64
	Lo    float64
	Hi    float64
	SE    float64 // standard error the interval was built from
	DF    float64 // its degrees of freedom; +Inf when SE is 0
}

// HasCI reports whether the estimate has an interval.
func (e Estimate) HasCI() bool { return !math.IsNaN(e.Lo) && !math.IsNaN(e.Hi) }

// Degenerate reports whether the interval has zero width (or is missing):
// such an interval cannot tell a value apart from the estimate.
func (e Estimate) Degenerate() bool { return !e.HasCI() || e.Hi-e.Lo <= 1e-12 }

// Excludes reports whether v lies outside a non-degenerate interval; it is
// the one test of significance: a zero-width interval never excludes.
func (e Estimate) Excludes(v float64) bool { return !e.Degenerate() && e.Outside(v) }

// Outside reports whether v lies outside the interval (false when the
// interval is undefined).
func (e Estimate) Outside(v float64) bool {
	if math.IsNaN(e.Lo) || math.IsNaN(e.Hi) || math.IsNaN(v) {
		return false
	}
	return v < e.Lo-1e-12 || v > e.Hi+1e-12
}

func noCI(v float64) Estimate {
	return Estimate{Value: v, Lo: math.NaN(), Hi: math.NaN(), SE: math.NaN(), DF: math.NaN()}
}

// streamFor returns the bootstrap random stream of a cell. Every condition
// of a cell draws from a fresh copy of the same stream, so conditions with
// the same number of seeds (or the same validation problems) get the same
// resampled indices: the bootstrap of a gain is paired.
func streamFor(seed uint64, key string) *rand.Rand {
	return rand.New(rand.NewPCG(seed, keyed.FNV1a64(key)))
}
