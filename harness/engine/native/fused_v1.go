//go:build !amd64.v3

package native

// fusedMultiplyAdds is false: on amd64 below GOAMD64=v3 the compiler never
// fuses a*b+c (see fused_v3.go).
const fusedMultiplyAdds = false
