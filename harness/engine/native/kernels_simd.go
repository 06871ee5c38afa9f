//go:build goexperiment.simd && amd64

package native

// kernelAvail says which kernels have a SIMD path that this CPU runs.
var kernelAvail = [numKernels]bool{
	kGemmNT: haveGemm, kGemmNT8: haveGemm, kGemmAxpy: haveGemm,
	kScores16: haveAttn16, kPV16: haveAttn16,
	kSoftmax: haveSoftmax8, kSwiGLU: haveSwiGLU8, kRMSNorm: haveRMSNorm8,
}
