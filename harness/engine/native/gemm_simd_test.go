//go:build goexperiment.simd && amd64

package native

import (
	"fmt"
	"math"
	"testing"
)

// TestGemmTileMatchesGonum: on every transpose case the SIMD tiles give the
// bits of gonum's Sgemm, for shapes with and without remainders in every
// dimension, alpha and beta at their special values, zero and negative-zero
// entries of A (which gonum's axpy loops skip), infinities in B, and B
// rows off 16-byte alignment (which the NT kernel leaves to gonum).
func TestGemmTileMatchesGonum(t *testing.T) {
	if !haveGemm {
		t.Skip("no AVX2")
	}
	type shape struct{ m, n, k int }
	shapes := []shape{{1, 1, 1}, {4, 2, 16}, {5, 3, 7}, {9, 17, 8}, {8, 16, 64}, {13, 37, 96}, {64, 192, 64}, {7, 99, 100}, {33, 40, 320}, {3, 5, 0}, {6, 18, 21}, {12, 8, 8}, {10, 29, 12}, {8, 6, 20}, {9, 26, 36}, {5, 19, 8}, {64, 192, 8}, {3, 200, 8}}
	for _, sh := range shapes {
		for _, tr := range [][2]bool{{false, true}, {false, false}, {true, false}, {true, true}} {
			for _, ab := range [][2]float32{{1, 0}, {1, 1}, {0.5, 0.25}, {0, 1}, {0, 0.5}, {-2, 0}} {
				for _, off := range []int{0, 1} {
					tA, tB := tr[0], tr[1]
					name := fmt.Sprintf("%dx%dx%d/tA=%v,tB=%v/alpha=%v,beta=%v/off=%d", sh.m, sh.n, sh.k, tA, tB, ab[0], ab[1], off)
					lda, ldb, ldc := sh.k+4, sh.n+8, sh.n+3
					if tA {
						lda = sh.m + 4
					}
					if tB {
						ldb = sh.k + 4
					}
					a := randVec(max(sh.m, sh.k)*lda+8, 1, 1)
					b := randVec(max(sh.n, sh.k)*ldb+8, 2, 1)
					for i := 0; i < len(a); i += 5 {
						a[i] = 0
					}
					for i := 2; i < len(a); i += 13 {
						a[i] = float32(math.Copysign(0, -1))
					}
					b[ldb+3] = float32(math.Inf(1))
					a[len(a)/2+1] = float32(math.NaN())
					c0 := randVec(sh.m*ldc, 3, 1)
					c0[1] = float32(math.Copysign(0, -1))
					want, got := append([]float32(nil), c0...), append([]float32(nil), c0...)
					gonumTile(tA, tB, sh.m, sh.n, sh.k, ab[0], a, lda, b[off:], ldb, ab[1], want, ldc)
					gemmTile(tA, tB, sh.m, sh.n, sh.k, ab[0], a, lda, b[off:], ldb, ab[1], got, ldc)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(math.IsNaN(float64(got[i])) && math.IsNaN(float64(want[i]))) {
							t.Fatalf("%s: element %d is %v (bits %08x), gonum %v (bits %08x)", name, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		}
	}
}
