package datasets

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

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
