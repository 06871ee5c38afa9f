package keyed

import "math/bits"

// RNG is the SplitMix64 generator: a sequential random stream whose state
// advances by Golden per draw. Start it from a key (Stream, NewRNG), so the
// stream is still a pure function of what it is for. The zero value is a
// valid stream (state 0). An RNG is not safe for concurrent use; give each
// goroutine its own keyed stream instead.
type RNG struct {
	state uint64
}

// Stream returns the generator started at state key: its first draw is
// SplitMix64(key).
func Stream(key uint64) *RNG { return &RNG{state: key} }

// NewRNG returns the stream keyed by Key(seed, purpose, index...), e.g.
// NewRNG(runSeed, "rollout", step, problem, rollout).
func NewRNG(seed uint64, purpose string, index ...uint64) *RNG {
	return Stream(Key(seed, purpose, index...))
}

// Uint64 returns the next 64 random bits.
func (r *RNG) Uint64() uint64 {
	r.state += Golden
	return Mix64(r.state)
}

// Intn returns a uniform integer in [0, n), without modulo bias. It
// returns 0 when n <= 0.
func (r *RNG) Intn(n int) int {
	if n <= 0 {
		return 0
	}
	return int(r.uint64n(uint64(n)))
}

// uint64n is Lemire's multiply-shift rejection method.
func (r *RNG) uint64n(n uint64) uint64 {
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}

// Range returns a uniform integer in [lo, hi]; it returns lo when hi < lo.
func (r *RNG) Range(lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + int(r.uint64n(uint64(hi-lo)+1))
}

// Float64 returns a uniform float in [0, 1) with 53 random bits
// (Uniform01 of the next draw).
func (r *RNG) Float64() float64 { return Uniform01(r.Uint64()) }

// Bernoulli returns true with probability p (false for p <= 0, true for
// p >= 1).
func (r *RNG) Bernoulli(p float64) bool {
	return r.Float64() < p
}

// Perm returns a uniform permutation of [0, n) (empty for n <= 0).
func (r *RNG) Perm(n int) []int {
	if n <= 0 {
		return []int{}
	}
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	r.Shuffle(n, func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p
}

// Shuffle permutes n items uniformly with Fisher-Yates, calling swap.
func (r *RNG) Shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		j := int(r.uint64n(uint64(i) + 1))
		swap(i, j)
	}
}
