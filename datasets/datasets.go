package datasets

import (
	"fmt"
	"math/bits"
)

// Cursors. A train cursor is simply the int64 position in a source's train
// stream: Train(i) is a pure function of the source's seed and i, so a run
// stores the next position in its checkpoint and resumes by asking for
// Train(cursor) again. Synthetic sources generate problem i directly from
// the stream keyed by (seed, i). File sources hold n problems and cycle
// through epochs, visiting them in a fresh permutation per epoch keyed by
// (seed, epoch): Train(i) = problems[EpochIndex(n, seed, i)].

// TrainBatch returns the n problems at cursor, cursor+1, ... of t's train
// stream and the cursor that follows them.
func TrainBatch(t Task, cursor int64, n int) ([]Problem, int64, error) {
	if cursor < 0 {
		return nil, cursor, fmt.Errorf("datasets: %s: negative train cursor %d", t.Name(), cursor)
	}
	if n < 0 {
		return nil, cursor, fmt.Errorf("datasets: %s: negative batch size %d", t.Name(), n)
	}
	out := make([]Problem, 0, n)
	for k := 0; k < n; k++ {
		p, err := t.Train(cursor + int64(k))
		if err != nil {
			return nil, cursor, fmt.Errorf("datasets: %s: train problem at cursor %d: %w", t.Name(), cursor+int64(k), err)
		}
		out = append(out, p)
	}
	return out, cursor + int64(n), nil
}

// EpochIndex maps position i of an unbounded train stream over n items to
// an item index in [0, n). Positions [e*n, (e+1)*n) form epoch e and visit
// every item exactly once, in a permutation keyed by (seed, e); different
// epochs use unrelated permutations. It costs O(1) memory and expected
// O(1) time (a keyed Feistel permutation with cycle walking), so file
// sources need not materialise permutations. It returns -1 when n <= 0 or
// i < 0; callers validate those first.
func EpochIndex(n int, seed uint64, i int64) int {
	if n <= 0 || i < 0 {
		return -1
	}
	if n == 1 {
		return 0
	}
	epoch := uint64(i / int64(n))
	pos := uint64(i % int64(n))
	width := bits.Len64(uint64(n - 1))
	if width%2 == 1 {
		width++
	}
	half := uint(width / 2)
	mask := uint64(1)<<half - 1
	key := Key(seed, "datasets/epoch", epoch)
	// Cycle walking: the Feistel network permutes [0, 4^half); iterating it
	// from pos < n must return below n, since pos lies on its own cycle.
	x := pos
	for {
		x = feistel(x, key, half, mask)
		if x < uint64(n) {
			return int(x)
		}
	}
}

// feistel is a 4-round balanced Feistel network on 2*half bits.
func feistel(x, key uint64, half uint, mask uint64) uint64 {
	l, r := x>>half, x&mask
	for round := uint64(0); round < 4; round++ {
		f := mix64(key^(round*golden)^mix64(r+round)) & mask
		l, r = r, l^f
	}
	return l<<half | r
}

// Split assigns each of ids to train or validation by hashing the id under
// seed, so the assignment of an id never depends on the row order, the
// other ids or the number of rows; duplicated ids land on the same side.
// About valFrac of the ids go to validation (none when valFrac <= 0 or is
// NaN, all when valFrac >= 1). It returns the positions in ids of the
// train and validation items, each in increasing order.
func Split(ids []string, seed uint64, valFrac float64) (train, val []int) {
	train = []int{}
	val = []int{}
	for i, id := range ids {
		u := float64(HashString(seed, "datasets/split", id)>>11) / (1 << 53)
		if u < valFrac {
			val = append(val, i)
		} else {
			train = append(train, i)
		}
	}
	return train, val
}

// HoldoutOneIn is the share (one in HoldoutOneIn) of a synthetic task's
// prompt space reserved for validation.
const HoldoutOneIn = 8

// HeldOut reports whether a prompt belongs to the validation part of a
// generated task's prompt space under seed. Generators keep train problems
// whose prompt is not held out and validation problems whose prompt is, so
// no validation prompt ever equals a train prompt at any cursor position.
func HeldOut(seed uint64, prompt string) bool {
	return HashString(seed, "datasets/holdout", prompt)%HoldoutOneIn == 0
}

// IsPrintable reports whether s holds only printable ASCII and newlines,
// the alphabet of the tiny models' tokenizers.
func IsPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\n' && (c < 0x20 || c > 0x7e) {
			return false
		}
	}
	return true
}
