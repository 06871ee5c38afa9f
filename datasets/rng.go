package datasets

import (
	"math/bits"
)

// The counter-based random streams below follow the design's rule that
// every random draw is keyed by what it is for, never by shared global
// state: a stream is a pure function of (seed, purpose, indices), so the
// same key gives the same draws whatever order, goroutine or process asks.
//
// The key is a 64-bit hash of the seed, the purpose string and the
// indices; the stream is SplitMix64 started from that key. SplitMix64 is
// small, fast and passes BigCrush; it is not cryptographic and must not be
// used where an adversary chooses the inputs.

const golden = 0x9E3779B97F4A7C15

// mix64 is the SplitMix64 finalizer, a bijective avalanche on 64 bits.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// fnv64 is FNV-1a over s, with the length folded in so that distinct
// (purpose, index) splits cannot collide by concatenation.
func fnv64(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return mix64(h ^ uint64(len(s)))
}

// Key hashes (seed, purpose, indices...) into the 64-bit key of a stream.
// Distinct purposes or index tuples give unrelated keys.
func Key(seed uint64, purpose string, index ...uint64) uint64 {
	h := mix64(seed + golden)
	h = mix64(h ^ fnv64(purpose))
	for k, ix := range index {
		h = mix64((h + golden*uint64(k+2)) ^ mix64(ix))
	}
	return mix64(h ^ uint64(len(index)))
}

// HashString hashes a string under (seed, purpose); it is how file sources
// and the synthetic tasks assign items to splits by content rather than by
// position.
func HashString(seed uint64, purpose, s string) uint64 {
	return mix64(Key(seed, purpose) ^ fnv64(s))
}

// RNG is a deterministic random stream keyed by (seed, purpose, indices).
// The zero value is a valid stream (key 0). An RNG is not safe for
// concurrent use; give each goroutine its own keyed stream instead.
type RNG struct {
	state uint64
}

// NewRNG returns the stream keyed by (seed, purpose, index...), e.g.
// NewRNG(runSeed, "rollout", step, problem, rollout).
func NewRNG(seed uint64, purpose string, index ...uint64) *RNG {
	return &RNG{state: Key(seed, purpose, index...)}
}

// Uint64 returns the next 64 random bits.
func (r *RNG) Uint64() uint64 {
	r.state += golden
	return mix64(r.state)
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

// Float64 returns a uniform float in [0, 1) with 53 random bits.
func (r *RNG) Float64() float64 {
	return float64(r.Uint64()>>11) / (1 << 53)
}

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
