//go:build !(goexperiment.simd && amd64)

package native

// Without GOEXPERIMENT=simd on amd64 the elementwise kernels of SwiGLU do
// nothing and the scalar loops of ops.go do every element (the SIMD kernels
// give the same bits).

func swigluForward8(h, g, u []float32) int                   { return 0 }
func swigluRecompute8(h, sig, g, u []float32) int            { return 0 }
func swigluBackwardSig8(dg, du, dh, g, u, sig []float32) int { return 0 }
