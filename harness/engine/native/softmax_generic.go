//go:build !(goexperiment.simd && amd64)

package native

// Without GOEXPERIMENT=simd on amd64 softmaxInPlace runs its scalar loops
// on every entry (the SIMD kernels give the same bits).

// expDiff8 is the SIMD exponential of softmax; without SIMD it does nothing
// and softmaxInPlace runs expf on every entry.
func expDiff8(dst, src []float32, mx float32) int { return 0 }

// max8 is the SIMD maximum of softmax; without SIMD softmaxInPlace runs its
// scalar loop.
func max8(s []float32) (float32, bool) { return 0, false }

// scale8 is the SIMD normalisation of softmax; without SIMD it does nothing.
func scale8(s []float32, f float32) int { return 0 }
