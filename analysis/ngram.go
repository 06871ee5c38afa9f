package analysis

import (
	"maps"
	"math"
	"slices"
)

// ngramProfile counts the character n-grams (over runes) of the texts.
// Texts shorter than n contribute themselves as one gram.
func ngramProfile(texts []string, n int) map[string]float64 {
	prof := map[string]float64{}
	for _, t := range texts {
		rs := []rune(t)
		if len(rs) == 0 {
			continue
		}
		if len(rs) < n {
			prof[string(rs)]++
			continue
		}
		for i := 0; i+n <= len(rs); i++ {
			prof[string(rs[i:i+n])]++
		}
	}
	return prof
}

// cosineProfiles is the cosine similarity of two n-gram count vectors; NaN
// when either is empty. Sums run in sorted key order so the result does not
// depend on map iteration.
func cosineProfiles(a, b map[string]float64) float64 {
	if len(a) == 0 || len(b) == 0 {
		return math.NaN()
	}
	ka, kb := slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b))
	var dot, na, nb float64
	for _, k := range ka {
		na += a[k] * a[k]
		if v, ok := b[k]; ok {
			dot += a[k] * v
		}
	}
	for _, k := range kb {
		nb += b[k] * b[k]
	}
	return dot / math.Sqrt(na*nb)
}

// NGramSimilarity is the cosine similarity of the character n-gram profiles
// of two sets of texts (NaN when either set has no text).
func NGramSimilarity(a, b []string, n int) float64 {
	return cosineProfiles(ngramProfile(a, n), ngramProfile(b, n))
}

func meanRunes(texts []string) float64 {
	if len(texts) == 0 {
		return math.NaN()
	}
	var s float64
	for _, t := range texts {
		s += float64(len([]rune(t)))
	}
	return s / float64(len(texts))
}
