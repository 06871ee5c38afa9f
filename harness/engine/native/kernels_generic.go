//go:build !(goexperiment.simd && amd64)

package native

// kernelAvail is all false without GOEXPERIMENT=simd on amd64: this build
// has only the portable kernels.
var kernelAvail [numKernels]bool
