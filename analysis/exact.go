package analysis

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Exact rates and comparisons for counts of runs: Clopper–Pearson
// intervals, Fisher's exact test, and the comparison of means of
// fractions with ties kept as ties.

// Rate is k of n units with its exact (Clopper–Pearson) interval.
type Rate struct {
	K, N   int
	Lo, Hi float64 // NaN when N is 0
}

// Value is k/n, NaN when n is 0.
func (r Rate) Value() float64 { return frac(r.K, r.N) }

// ClopperPearson is the exact two-sided interval at level ci of a binomial
// proportion of k successes in n trials: the beta quantiles
// B(α/2; k, n−k+1) and B(1−α/2; k+1, n−k), 0 when k is 0 and 1 when k is n.
func ClopperPearson(k, n int, ci float64) Rate {
	r := Rate{K: k, N: n, Lo: math.NaN(), Hi: math.NaN()}
	if n <= 0 || k < 0 || k > n {
		return r
	}
	a := (1 - ci) / 2
	r.Lo, r.Hi = 0, 1
	if k > 0 {
		r.Lo = distuv.Beta{Alpha: float64(k), Beta: float64(n - k + 1)}.Quantile(a)
	}
	if k < n {
		r.Hi = distuv.Beta{Alpha: float64(k + 1), Beta: float64(n - k)}.Quantile(1 - a)
	}
	return r
}

// FisherGreater is the one-sided p-value of Fisher's exact test that the
// rate of group 1 (k1 of n1) exceeds that of group 2 (k2 of n2): the
// hypergeometric probability, with the margins fixed, of k1 or more
// successes in group 1. It is NaN when a group is empty.
func FisherGreater(k1, n1, k2, n2 int) float64 {
	if n1 <= 0 || n2 <= 0 || k1 < 0 || k2 < 0 || k1 > n1 || k2 > n2 {
		return math.NaN()
	}
	n, k := n1+n2, k1+k2
	lchoose := func(a, b int) float64 {
		x, _ := math.Lgamma(float64(a + 1))
		y, _ := math.Lgamma(float64(b + 1))
		z, _ := math.Lgamma(float64(a - b + 1))
		return x - y - z
	}
	den := lchoose(n, n1)
	var p float64
	for x := k1; x <= min(n1, k); x++ {
		if k-x > n2 {
			continue
		}
		p += math.Exp(lchoose(k, x) + lchoose(n-k, n1-x) - den)
	}
	return math.Min(p, 1)
}

// TieTol is the tolerance under which two means of fractions are equal.
// The accuracies compared are means over a few seeds of counts over a few
// hundred problems: two such means that differ differ by at least
// 1/(seeds² × problems²) (about 1e-6 here), far above this tolerance and
// far below the rounding of a sum of fractions (1e-16), so a tie of counts
// is a tie even when the fractions were summed in another order.
const TieTol = 1e-9

// CompareMeans is −1, 0 or +1 as a is below, equal to (within TieTol) or
// above b.
func CompareMeans(a, b float64) int {
	switch {
	case math.Abs(a-b) <= TieTol:
		return 0
	case a < b:
		return -1
	}
	return 1
}
