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

// expDiff8 is the SIMD exponential of softmax; without SIMD it does nothing
// and softmaxInPlace runs expf on every entry.
func expDiff8(dst, src []float32, mx float32) int { return 0 }

// max8 is the SIMD maximum of softmax; without SIMD softmaxInPlace runs its
// scalar loop.
func max8(s []float32) (float32, bool) { return 0, false }

// scale8 is the SIMD normalisation of softmax; without SIMD it does nothing.
func scale8(s []float32, f float32) int { return 0 }
