// Package keyed owns marlow's keyed randomness: every random draw of the
// harness, the engines and the data sets is a pure function of a key
// (seed, purpose, indices), so results never depend on scheduling, batch
// composition or the order in which draws are made.
//
// All of it is built from one mixer, the SplitMix64 finaliser Mix64 (a
// bijective avalanche on 64 bits; small and fast, it passes BigCrush but is
// not cryptographic and must not be used where an adversary chooses the
// inputs). Keys are derived by one of three documented schemes, kept apart
// because each fixes the bits of existing runs:
//
//   - HashKey(words...): the engines' streams (weight and LoRA
//     initialisation, token sampling), also implemented by the torch
//     server's Python port;
//   - SeedKey(words...): the request seeds of workflow agent calls, with
//     strings folded in as their FNV1a64;
//   - Key(seed, purpose, index...): the data sets' streams, with the
//     purpose a string.
//
// testdata/golden.json pins all three and the draws (the Go test writes
// and checks it; the torch server's tests read it).
//
// Draws are either counter-based (Uniform01At, UniformAt, NormalAt and
// SampleUniform compute element i of a stream directly) or sequential (RNG,
// the SplitMix64 generator started from a key). The package imports
// nothing of marlow, so every package (datasets included) may use it.
package keyed

import "math"

// Golden is the SplitMix64 increment, 2^64 divided by the golden ratio.
const Golden uint64 = 0x9e3779b97f4a7c15

// Purposes of the engines' streams, the second word of their HashKey. The
// torch server uses the same values.
const (
	PurposeInit   uint64 = 0x696e6974 // "init": base weight initialisation
	PurposeLoRA   uint64 = 0x6c6f7261 // "lora": LoRA A initialisation
	PurposeSample uint64 = 0x73616d70 // "samp": token sampling
)

// marlowWord ("marlow" in ASCII) starts the HashKey and SeedKey folds.
const marlowWord uint64 = 0x6d61726c6f77

// Mix64 is the SplitMix64 finaliser.
func Mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// SplitMix64 is the SplitMix64 output function applied to x:
// Mix64(x + Golden), the value the generator started at state x gives
// first.
func SplitMix64(x uint64) uint64 { return Mix64(x + Golden) }

// HashKey folds a sequence of words into one well-mixed 64-bit value, the
// key of an engine stream: starting from h = 0x6d61726c6f77 ("marlow"),
// h = Mix64(((h + Golden + w*Golden) mod 2^64) ^ Mix64(w)) for each word
// w. No words give the start value itself.
func HashKey(words ...uint64) uint64 {
	h := marlowWord
	for _, w := range words {
		h = Mix64(h + Golden + w*Golden ^ Mix64(w))
	}
	return h
}

// SeedKey folds words into the request seed of a workflow agent call
// (see workflow.SeedKey): starting from h = 0x6d61726c6f77 ("marlow"),
// h = SplitMix64(h ^ w) for each word w. No words give the start value.
func SeedKey(words ...uint64) uint64 {
	h := marlowWord
	for _, w := range words {
		h = SplitMix64(h ^ w)
	}
	return h
}

// Uniform01 maps a hash to a float64 in [0, 1) with 53 random bits:
// float64(h>>11) * 2^-53.
func Uniform01(h uint64) float64 { return float64(h>>11) * (1.0 / (1 << 53)) }

// Uniform01At returns element i of the counter stream key, a draw in
// [0, 1): Uniform01(Mix64(key ^ (i+1)*Golden)).
func Uniform01At(key, i uint64) float64 { return Uniform01(Mix64(key ^ (i+1)*Golden)) }

// UniformAt returns element i of the counter stream key as a draw in
// [-1, 1): 2*Uniform01At(key, i) - 1.
func UniformAt(key, i uint64) float64 { return 2*Uniform01At(key, i) - 1 }

// NormalAt returns a standard normal draw for element i of the stream key,
// by the Box-Muller transform of the stream's uniforms 2i and 2i+1.
func NormalAt(key, i uint64) float64 {
	u1 := Uniform01At(key, 2*i)
	u2 := Uniform01At(key, 2*i+1)
	if u1 < 1e-300 {
		u1 = 1e-300
	}
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// SampleUniform is the uniform in [0, 1) at which both engines invert the
// sampling CDF for the token at position (0-based, counted in new tokens)
// of the request with seed: Uniform01(Mix64(HashKey(seed, PurposeSample,
// position))).
func SampleUniform(seed uint64, position int) float64 {
	return Uniform01(Mix64(HashKey(seed, PurposeSample, uint64(position))))
}

// FNV-1a parameters.
const (
	fnv64Offset uint64 = 0xcbf29ce484222325
	fnv64Prime  uint64 = 0x100000001b3
	fnv32Offset uint32 = 0x811c9dc5
	fnv32Prime  uint32 = 0x01000193
)

// FNV1a64 is the 64-bit FNV-1a hash of the bytes of s.
func FNV1a64(s string) uint64 { return fnv1a(s, fnv64Offset, fnv64Prime) }

// FNV1a32 is the 32-bit FNV-1a hash of the bytes of s.
func FNV1a32(s string) uint32 { return fnv1a(s, fnv32Offset, fnv32Prime) }

// fnv1a is FNV-1a at the width of T: from offset, xor each byte in, then
// multiply by prime.
func fnv1a[T uint32 | uint64](s string, offset, prime T) T {
	h := offset
	for i := 0; i < len(s); i++ {
		h ^= T(s[i])
		h *= prime
	}
	return h
}

// stringWord is a string's word in Key and HashString: FNV1a64 with the
// length folded in, so that distinct (purpose, index) splits cannot
// collide by concatenation.
func stringWord(s string) uint64 { return Mix64(FNV1a64(s) ^ uint64(len(s))) }

// Key hashes (seed, purpose, indices...) into the 64-bit key of a data-set
// stream. Distinct purposes or index tuples give unrelated keys.
func Key(seed uint64, purpose string, index ...uint64) uint64 {
	h := Mix64(seed + Golden)
	h = Mix64(h ^ stringWord(purpose))
	for k, ix := range index {
		h = Mix64((h + Golden*uint64(k+2)) ^ Mix64(ix))
	}
	return Mix64(h ^ uint64(len(index)))
}

// HashString hashes a string under (seed, purpose); it is how file sources
// and the synthetic tasks assign items to splits by content rather than by
// position.
func HashString(seed uint64, purpose, s string) uint64 {
	return Mix64(Key(seed, purpose) ^ stringWord(s))
}
