//go:build amd64.v3

package native

// fusedMultiplyAdds is true in a build for GOAMD64=v3 or above, where the
// compiler fuses a*b+c in scalar code into one rounding: the engine's bits
// then differ from every GOAMD64=v1 build's and from its own SIMD kernels'.
const fusedMultiplyAdds = true
