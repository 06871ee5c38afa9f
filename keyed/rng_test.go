package keyed

import (
	"math"
	"slices"
	"testing"
)

func TestRNGDeterministicAndKeyed(t *testing.T) {
	draw := func(r *RNG) []uint64 {
		out := make([]uint64, 8)
		for i := range out {
			out[i] = r.Uint64()
		}
		return out
	}
	a := draw(NewRNG(1, "x", 2, 3))
	if b := draw(NewRNG(1, "x", 2, 3)); !slices.Equal(a, b) {
		t.Fatal("same key gave different streams")
	}
	others := []*RNG{NewRNG(2, "x", 2, 3), NewRNG(1, "y", 2, 3), NewRNG(1, "x", 3, 2), NewRNG(1, "x", 2), NewRNG(1, "x", 2, 3, 0), NewRNG(1, "x")}
	for k, r := range others {
		if b := draw(r); slices.Equal(a, b) {
			t.Errorf("key variant %d gave the same stream", k)
		}
	}
}

func TestRNGDistributions(t *testing.T) {
	r := NewRNG(7, "dist")
	const n = 60000
	counts := make([]int, 6)
	for i := 0; i < n; i++ {
		counts[r.Intn(6)]++
	}
	for v, c := range counts {
		if math.Abs(float64(c)-n/6) > 5*math.Sqrt(n/6) {
			t.Errorf("Intn(6): value %d drawn %d times of %d", v, c, n)
		}
	}
	sum := 0.0
	for i := 0; i < n; i++ {
		f := r.Float64()
		if f < 0 || f >= 1 {
			t.Fatalf("Float64 out of range: %v", f)
		}
		sum += f
	}
	if mean := sum / n; math.Abs(mean-0.5) > 0.01 {
		t.Errorf("Float64 mean %v", mean)
	}
	for i := 0; i < 1000; i++ {
		if v := r.Range(-3, 4); v < -3 || v > 4 {
			t.Fatalf("Range(-3, 4) = %d", v)
		}
	}
	if r.Intn(0) != 0 || r.Intn(-5) != 0 || r.Range(5, 2) != 5 {
		t.Error("degenerate bounds not handled")
	}
	p := r.Perm(50)
	sorted := slices.Clone(p)
	slices.Sort(sorted)
	for i, v := range sorted {
		if v != i {
			t.Fatalf("Perm(50) is not a permutation: %v", p)
		}
	}
	if len(r.Perm(0)) != 0 {
		t.Error("Perm(0) not empty")
	}
}
