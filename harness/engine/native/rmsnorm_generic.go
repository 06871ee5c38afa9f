//go:build !(goexperiment.simd && amd64)

package native

// Without GOEXPERIMENT=simd on amd64 the elementwise kernels of RMSNorm do
// nothing and the scalar loops of ops.go do every element (the SIMD kernels
// give the same bits).

func rmsnormScale8(y, x []float32, r float32, w []float32) int     { return 0 }
func rmsnormBackwardRow8(dx, dy, x, w []float32, r, c float32) int { return 0 }
func rmsnormWeight8(dw, dy, x, rstd []float32, n, d int) int       { return 0 }
