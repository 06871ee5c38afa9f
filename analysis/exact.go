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

// The power rule. A comparison is against a claim only when a stated
// one-sided exact test rejects the claim's direction at alpha (the opposite
// rate significantly higher, or a rate significantly below the share the
// claim needs); a point estimate on the wrong side is not enough. Where
// neither direction is rejected the comparison is inconclusive, and the
// report prints the smallest difference a one-sided test at alpha could
// have detected at those numbers of runs (FisherDetectable,
// BinomDetectable): a study of 6 runs against 6 detects only about 4/6
// against 0/6.

// Rejects reports whether a p-value is below alpha, with a relative
// tolerance of 1e-9 so that an exact p-value equal to alpha (3/3 against 0/3
// gives 1/20, computed through log-gamma functions) does not reject by
// rounding.
func Rejects(p, alpha float64) bool { return p < alpha*(1-1e-9) }

// BinomLE is the exact binomial probability P(X <= k) of X ~ Bin(n, p0):
// the one-sided p-value that a rate of k in n lies below p0. NaN when n is
// not positive or k is out of range.
func BinomLE(k, n int, p0 float64) float64 {
	if n <= 0 || k < 0 || k > n || p0 < 0 || p0 > 1 {
		return math.NaN()
	}
	return math.Min(distuv.Binomial{N: float64(n), P: p0}.CDF(float64(k)), 1)
}

// BinomGE is P(X >= k) of X ~ Bin(n, p0): the one-sided p-value that a
// rate of k in n lies above p0.
func BinomGE(k, n int, p0 float64) float64 {
	if n <= 0 || k < 0 || k > n || p0 < 0 || p0 > 1 {
		return math.NaN()
	}
	if k == 0 {
		return 1
	}
	return math.Min(1-distuv.Binomial{N: float64(n), P: p0}.CDF(float64(k-1)), 1)
}

// FisherDetectable is the smallest difference of rates k1/n1 − k2/n2 over
// every outcome with FisherGreater(k1, n1, k2, n2) below alpha: the least
// excess of group 1's rate over group 2's that a one-sided Fisher exact
// test at alpha can detect with these group sizes. NaN when no outcome
// reaches alpha (or a group is empty).
func FisherDetectable(n1, n2 int, alpha float64) float64 {
	best := math.NaN()
	if n1 <= 0 || n2 <= 0 {
		return best
	}
	for k1 := 0; k1 <= n1; k1++ {
		for k2 := 0; k2 <= n2; k2++ {
			d := float64(k1)/float64(n1) - float64(k2)/float64(n2)
			if d <= 0 || (!math.IsNaN(best) && d >= best) {
				continue
			}
			if Rejects(FisherGreater(k1, n1, k2, n2), alpha) {
				best = d
			}
		}
	}
	return best
}

// BinomDetectable is the smallest p0 − k/n over the counts k with
// BinomLE(k, n, p0) below alpha: the least shortfall below p0 that a
// one-sided exact binomial test at alpha can detect in n runs. NaN when
// no count reaches alpha.
func BinomDetectable(n int, p0, alpha float64) float64 {
	for k := n; k >= 0; k-- {
		if float64(k)/float64(n) >= p0 {
			continue
		}
		if Rejects(BinomLE(k, n, p0), alpha) {
			return p0 - float64(k)/float64(n)
		}
	}
	return math.NaN()
}
