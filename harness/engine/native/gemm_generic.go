//go:build !(goexperiment.simd && amd64)

package native

// haveGemm is false without GOEXPERIMENT=simd on amd64: every tile runs on
// gonum's serial kernels, which give the same bits as the SIMD ones.
const haveGemm = false

// gemmTile computes one tile of pool.gemm on gonum's serial Sgemm.
func gemmTile(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	gonumTile(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
