//go:build !(goexperiment.simd && amd64)

package native

// haveAttn16 is false without GOEXPERIMENT=simd on amd64: attention runs
// on gonum's kernels, which give the same bits as the SIMD ones.
const haveAttn16 = false

func scores16(m, n int, alpha float32, q []float32, ldq int, k []float32, ldk int, c []float32, ldc int) {
	panic("native: scores16 without SIMD")
}

func pv16(m, n int, p []float32, ldp int, v []float32, ldv int, beta bool, out []float32, ldo int) {
	panic("native: pv16 without SIMD")
}
