package datasets

import (
	"fmt"
	"math/bits"
	"sort"
	"sync"

	"github.com/marlowlab/marlow/keyed"
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
	key := keyed.Key(seed, "datasets/epoch", epoch)
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
		f := keyed.Mix64(key^(round*keyed.Golden)^keyed.Mix64(r+round)) & mask
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
		u := keyed.Uniform01(keyed.HashString(seed, "datasets/split", id))
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
	return keyed.HashString(seed, "datasets/holdout", prompt)%HoldoutOneIn == 0
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

// ValidationOnce memoizes a generated task's validation set: the set is
// built on first use and every call returns a fresh copy of it.
type ValidationOnce struct {
	once sync.Once
	val  []Problem
	err  error
}

// Get returns the set, calling build the first time only.
func (v *ValidationOnce) Get(build func() ([]Problem, error)) ([]Problem, error) {
	v.once.Do(func() { v.val, v.err = build() })
	if v.err != nil {
		return nil, v.err
	}
	return append([]Problem(nil), v.val...), nil
}

// HeldOutValidation builds a generated task's fixed validation set: it
// calls draw(0), draw(1), ... and keeps the first size candidates whose
// prompt is held out under seed (see HeldOut) and unseen so far, turning
// the k-th kept candidate into a problem with build(k, c). draw reports
// ok=false for a candidate to skip. It gives up with an error after
// 1000+200*size draws, when the knobs allow too few distinct held-out
// prompts; src prefixes the error.
func HeldOutValidation[C any](src string, seed uint64, size int, draw func(j uint64) (c C, prompt string, ok bool), build func(k int, c C) Problem) ([]Problem, error) {
	out := make([]Problem, 0, size)
	seen := make(map[string]bool, size)
	budget := 1000 + 200*size
	for j := 0; len(out) < size; j++ {
		if j >= budget {
			return nil, fmt.Errorf("%s: found only %d of %d distinct held-out validation prompts in %d draws; widen the knobs or lower ValSize",
				src, len(out), size, budget)
		}
		c, prompt, ok := draw(uint64(j))
		if !ok || seen[prompt] || !HeldOut(seed, prompt) {
			continue
		}
		seen[prompt] = true
		out = append(out, build(len(out), c))
	}
	return out, nil
}

// SplitProblems splits file problems into train and validation by prompt
// text with Split. When valSize > 0 and more than valSize problems fall
// in validation, the valSize whose capKey hashes lowest under (seed,
// capPurpose) stay there and the rest return to train. Both sides keep the
// input order.
func SplitProblems(probs []Problem, seed uint64, valFrac float64, valSize int, capPurpose string, capKey func(Problem) string) (train, val []Problem) {
	prompts := make([]string, len(probs))
	for i, p := range probs {
		prompts[i] = p.Prompt
	}
	trainIdx, valIdx := Split(prompts, seed, valFrac)
	if valSize > 0 && len(valIdx) > valSize {
		order := append([]int(nil), valIdx...)
		key := func(i int) uint64 { return keyed.HashString(seed, capPurpose, capKey(probs[i])) }
		sort.SliceStable(order, func(a, b int) bool { return key(order[a]) < key(order[b]) })
		keep := make(map[int]bool, valSize)
		for _, i := range order[:valSize] {
			keep[i] = true
		}
		kept := make([]int, 0, valSize)
		for _, i := range valIdx {
			if keep[i] {
				kept = append(kept, i)
			} else {
				trainIdx = append(trainIdx, i)
			}
		}
		sort.Ints(trainIdx)
		valIdx = kept
	}
	for _, i := range trainIdx {
		train = append(train, probs[i])
	}
	for _, i := range valIdx {
		val = append(val, probs[i])
	}
	return train, val
}

// FilePool holds the problems a file source has read: a train set that
// Train cycles through in a fresh seed-keyed permutation per epoch, and a
// fixed validation set. File sources embed it for Train, TrainSize and
// Validation.
type FilePool struct {
	source     string
	seed       uint64
	train, val []Problem
}

// NewFilePool returns the pool of source (its name in errors, e.g.
// "deepcoder") with train permuted under seed.
func NewFilePool(source string, seed uint64, train, val []Problem) FilePool {
	return FilePool{source: source, seed: seed, train: train, val: val}
}

// Train returns the problem at cursor i of the train stream.
func (p *FilePool) Train(i int64) (Problem, error) {
	if len(p.train) == 0 {
		return Problem{}, fmt.Errorf("%s: no train problems (evaluation-only file or empty split)", p.source)
	}
	if i < 0 {
		return Problem{}, fmt.Errorf("%s: negative train cursor %d", p.source, i)
	}
	return p.train[EpochIndex(len(p.train), p.seed, i)], nil
}

// TrainSize is the number of distinct train problems.
func (p *FilePool) TrainSize() int { return len(p.train) }

// Validation returns a copy of the validation set.
func (p *FilePool) Validation() ([]Problem, error) {
	return append([]Problem(nil), p.val...), nil
}

// CapProblems keeps at most n of probs (all when n <= 0): the n whose key
// hashes lowest under (seed, purpose). Both the kept and the rest keep the
// input order.
func CapProblems(probs []Problem, seed uint64, n int, purpose string, key func(Problem) string) (kept, rest []Problem) {
	if n <= 0 || len(probs) <= n {
		return append([]Problem(nil), probs...), nil
	}
	order := make([]int, len(probs))
	for i := range order {
		order[i] = i
	}
	h := func(i int) uint64 { return keyed.HashString(seed, purpose, key(probs[i])) }
	sort.SliceStable(order, func(a, b int) bool { return h(order[a]) < h(order[b]) })
	keep := make([]bool, len(probs))
	for _, i := range order[:n] {
		keep[i] = true
	}
	for i, p := range probs {
		if keep[i] {
			kept = append(kept, p)
		} else {
			rest = append(rest, p)
		}
	}
	return kept, rest
}
