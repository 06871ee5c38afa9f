package datasets

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
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

func TestEpochIndex(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 16, 17, 100, 1000, 4097} {
		var prev []int
		for epoch := int64(0); epoch < 3; epoch++ {
			seen := make([]bool, n)
			order := make([]int, n)
			for pos := int64(0); pos < int64(n); pos++ {
				k := EpochIndex(n, 42, epoch*int64(n)+pos)
				if k < 0 || k >= n || seen[k] {
					t.Fatalf("n=%d epoch %d: index %d repeated or out of range", n, epoch, k)
				}
				seen[k] = true
				order[pos] = k
			}
			if n >= 5 && prev != nil && slices.Equal(prev, order) {
				t.Errorf("n=%d: epochs %d and %d share a permutation", n, epoch-1, epoch)
			}
			prev = order
		}
	}
	if EpochIndex(100, 1, 12345) != EpochIndex(100, 1, 12345) {
		t.Error("EpochIndex not deterministic")
	}
	differ := 0
	for i := int64(0); i < 100; i++ {
		if EpochIndex(100, 1, i) != EpochIndex(100, 2, i) {
			differ++
		}
	}
	if differ < 50 {
		t.Errorf("seeds 1 and 2 agree on %d of 100 positions", 100-differ)
	}
	for _, tc := range []struct {
		n int
		i int64
	}{{0, 0}, {-1, 3}, {10, -1}} {
		if got := EpochIndex(tc.n, 1, tc.i); got != -1 {
			t.Errorf("EpochIndex(%d, 1, %d) = %d, want -1", tc.n, tc.i, got)
		}
	}
}

func TestSplit(t *testing.T) {
	ids := make([]string, 2000)
	for i := range ids {
		ids[i] = fmt.Sprintf("id-%d", i)
	}
	train, val := Split(ids, 9, 0.1)
	if len(train)+len(val) != len(ids) {
		t.Fatalf("split lost items: %d + %d", len(train), len(val))
	}
	if len(val) < 150 || len(val) > 250 {
		t.Errorf("valFrac 0.1 of 2000 gave %d validation items", len(val))
	}
	if !slices.IsSorted(train) || !slices.IsSorted(val) {
		t.Error("positions not increasing")
	}
	inVal := map[string]bool{}
	for _, k := range val {
		inVal[ids[k]] = true
	}
	// Stable under row order: reversing and truncating the rows keeps every
	// id on its side.
	rev := slices.Clone(ids[:1500])
	slices.Reverse(rev)
	tr2, val2 := Split(rev, 9, 0.1)
	for _, k := range val2 {
		if !inVal[rev[k]] {
			t.Fatalf("%s moved to validation after reordering", rev[k])
		}
	}
	for _, k := range tr2 {
		if inVal[rev[k]] {
			t.Fatalf("%s moved to train after reordering", rev[k])
		}
	}
	for _, tc := range []struct {
		frac     float64
		trainLen int
	}{{0, 2000}, {-1, 2000}, {math.NaN(), 2000}, {1, 0}, {2, 0}} {
		tr, _ := Split(ids, 9, tc.frac)
		if len(tr) != tc.trainLen {
			t.Errorf("valFrac %v: %d train items, want %d", tc.frac, len(tr), tc.trainLen)
		}
	}
	_, v3 := Split(ids, 10, 0.1)
	if slices.Equal(val, v3) {
		t.Error("different seeds gave the same split")
	}
}

func TestHeldOutShare(t *testing.T) {
	held := 0
	for i := 0; i < 8000; i++ {
		if HeldOut(3, fmt.Sprintf("prompt %d", i)) {
			held++
		}
	}
	if held < 800 || held > 1200 {
		t.Errorf("held out %d of 8000, want about 1000", held)
	}
}

func TestIsPrintable(t *testing.T) {
	for s, want := range map[string]bool{"abc\n~ ": true, "": true, "a\tb": false, "\x7f": false, "é": false, "a\r\n": false} {
		if got := IsPrintable(s); got != want {
			t.Errorf("IsPrintable(%q) = %v", s, got)
		}
	}
}

// countTask is a minimal Task for TrainBatch.
type countTask struct{ failAt int64 }

func (countTask) Name() string                                    { return "count" }
func (countTask) Kind() string                                    { return KindMath }
func (countTask) Instructions() string                            { return "" }
func (countTask) Validation() ([]Problem, error)                  { return nil, nil }
func (countTask) Verify(context.Context, Problem, string) Verdict { return Verdict{} }
func (c countTask) Train(i int64) (Problem, error) {
	if i == c.failAt {
		return Problem{}, fmt.Errorf("boom")
	}
	return Problem{ID: fmt.Sprint(i)}, nil
}

func TestTrainBatch(t *testing.T) {
	ps, next, err := TrainBatch(countTask{failAt: -1}, 5, 3)
	if err != nil || next != 8 || len(ps) != 3 || ps[0].ID != "5" || ps[2].ID != "7" {
		t.Fatalf("TrainBatch = %v, %d, %v", ps, next, err)
	}
	for _, tc := range []struct {
		cursor int64
		n      int
		want   string
	}{{-1, 2, "negative train cursor"}, {0, -2, "negative batch size"}, {3, 4, "cursor 4: boom"}} {
		if _, _, err := TrainBatch(countTask{failAt: 4}, tc.cursor, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TrainBatch(%d, %d) error %v, want %q", tc.cursor, tc.n, err, tc.want)
		}
	}
}
