package native

import "math"

// Counter-based random streams. Every draw is a pure function of a key
// (seed, purpose, indices), so results never depend on scheduling, batch
// composition or the order in which draws are made.

// Purposes keep the streams of different uses apart.
const (
	purposeInit    uint64 = 0x696e6974 // base weight initialisation
	purposeLoRA    uint64 = 0x6c6f7261 // LoRA A initialisation
	purposeSample  uint64 = 0x73616d70 // token sampling
	goldenGamma    uint64 = 0x9e3779b97f4a7c15
	splitmixMul1   uint64 = 0xbf58476d1ce4e5b9
	splitmixMul2   uint64 = 0x94d049bb133111eb
	uniform24Scale        = 1.0 / (1 << 24)
	uniform53Scale        = 1.0 / (1 << 53)
)

// mix64 is the splitmix64 finaliser.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= splitmixMul1
	z ^= z >> 27
	z *= splitmixMul2
	z ^= z >> 31
	return z
}

// hashKey folds a sequence of words into one well-mixed 64-bit value.
func hashKey(words ...uint64) uint64 {
	h := uint64(0x6d61726c6f77) // "marlow"
	for _, w := range words {
		h = mix64(h + goldenGamma + w*goldenGamma ^ mix64(w))
	}
	return h
}

// uniform01 maps a hash to a float64 in [0, 1) with 53 random bits.
func uniform01(h uint64) float64 { return float64(h>>11) * uniform53Scale }

// normalAt returns a standard normal draw for element i of the stream key,
// by the Box-Muller transform of two counter draws.
func normalAt(key uint64, i uint64) float64 {
	u1 := uniform01(mix64(key ^ (2*i+1)*goldenGamma))
	u2 := uniform01(mix64(key ^ (2*i+2)*goldenGamma))
	if u1 < 1e-300 {
		u1 = 1e-300
	}
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// uniformAt returns a draw in [-1, 1) for element i of the stream key.
func uniformAt(key uint64, i uint64) float64 {
	return 2*uniform01(mix64(key^(i+1)*goldenGamma)) - 1
}
