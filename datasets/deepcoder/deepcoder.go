// Package deepcoder reads the DeepCoder-Preview-Dataset Parquet shards
// (agentica-org/DeepCoder-Preview-Dataset: lcbv5, primeintellect, taco and
// codeforces subsets) into datasets.Problem values with one normalised test
// form, and verifies generated Python programs against those tests inside
// the sandbox (see Verifier).
//
// Each shard has string columns problem, tests (a JSON string whose shape
// depends on the subset), starter_code and metadata (JSON with func_name).
// The tests shapes are:
//
//	lcbv5:          [{"input", "output", "testtype": "stdin"|"functional"}]
//	primeintellect: [{"type": "stdin_stdout", "input", "output"}]
//	taco:           {"inputs": [...], "outputs": [...], "fn_name"?: name}
//	codeforces:     [{"input", "output"}]
//
// A single tests value can exceed 50 MB, so shards are streamed in small
// record batches and problems whose tests exceed Config.MaxTestBytes are
// skipped; every skip is counted by reason (Task.Skipped). A statement that
// repeats an earlier one is dropped (the first is kept) and counted.
//
// Shards lists the shards of a split in the published layout (a folder per
// subset holding train-* and test-* shards). The validation set is either
// carved from the train shards by a seed-keyed hash of each problem (like
// the other file sources), or, with Config.TestPaths, read from test
// shards.
package deepcoder

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/internal/pqread"
)

// Defaults.
const (
	DefaultMaxTestBytes = 4 << 20
	DefaultValFrac      = 0.1
)

// Config configures Open.
type Config struct {
	// Seed keys the train/validation split and the per-epoch train order.
	Seed uint64
	// ValFrac is the validation share (0: DefaultValFrac); not used with
	// TestPaths or EvalOnly.
	ValFrac float64
	// ValSize caps the validation set (0: no cap). Without TestPaths the
	// excess goes back to train; with TestPaths it is left out.
	ValSize int
	// TestPaths are test shards whose problems form the validation set;
	// the shards given to Open are then all train (a train problem whose
	// statement is also a test problem's is left out, as SkipInTest).
	TestPaths []string
	// EvalOnly puts every problem in the validation set (test shards).
	EvalOnly bool
	// MaxTestBytes skips problems whose tests JSON is larger (0:
	// DefaultMaxTestBytes).
	MaxTestBytes int
	// Verifier configures code execution.
	Verifier VerifierConfig
	// Logf, when set, receives one line per skipped problem.
	Logf func(format string, args ...any)
}

// Stats describe what Load read.
type Stats struct {
	Shards, TestShards int
	Rows, TestRows     int // rows of the train and test shards
	// Problems and TestProblems count the distinct problems read from the
	// train and test shards (after skips and repeats).
	Problems, TestProblems int
	// Duplicates counts rows dropped as repeats of an earlier problem
	// statement (within the train shards, or within the test shards);
	// Conflicts those whose tests, function name or starter code differ
	// from the first occurrence's (the first is kept).
	Duplicates, Conflicts int
	// Skipped counts problems left out, by reason.
	Skipped map[string]int
}

// Set is what Load read: the train and validation problems in a
// deterministic order, and the counts.
type Set struct {
	Train, Val []datasets.Problem
	Stats      Stats
}

// Task is a DeepCoder code task; it implements datasets.Task.
type Task struct {
	datasets.FilePool
	ver   *Verifier
	stats Stats
}

var _ datasets.Task = (*Task)(nil)

// Skip reasons.
const (
	SkipTooLarge     = "tests too large"
	SkipBadJSON      = "tests not valid JSON"
	SkipBadShape     = "tests of unknown shape"
	SkipNoTests      = "no tests"
	SkipNoFnName     = "functional tests without a function name"
	SkipBadMetadata  = "metadata not valid JSON"
	SkipUnsupported  = "unsupported test type"
	SkipNullProblem  = "null problem or tests"
	SkipMixedFnNames = "conflicting function names"
	SkipInTest       = "train problem also in the test shards"
)

// Open reads the shards at paths, in the order given, and builds the task.
// It fails if the sandbox cannot be set up (see sandbox.New).
func Open(paths []string, cfg Config) (*Task, error) {
	ver, err := NewVerifier(cfg.Verifier)
	if err != nil {
		return nil, fmt.Errorf("deepcoder: %w", err)
	}
	set, err := Load(paths, cfg)
	if err != nil {
		return nil, err
	}
	t := &Task{ver: ver, stats: set.Stats}
	t.FilePool = datasets.NewFilePool(datasets.SourceDeepCoder, cfg.Seed, set.Train, set.Val)
	return t, nil
}

// Load reads the shards at paths (and cfg.TestPaths), in the order given,
// and splits the problems as Open does, without setting up a verifier.
func Load(paths []string, cfg Config) (*Set, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("deepcoder: no shard paths")
	}
	if cfg.ValFrac == 0 {
		cfg.ValFrac = DefaultValFrac
	}
	if cfg.ValFrac < 0 || cfg.ValFrac > 1 || cfg.ValFrac != cfg.ValFrac {
		return nil, fmt.Errorf("deepcoder: validation fraction %v outside [0, 1]", cfg.ValFrac)
	}
	if cfg.ValSize < 0 {
		return nil, fmt.Errorf("deepcoder: negative validation size %d", cfg.ValSize)
	}
	if cfg.MaxTestBytes == 0 {
		cfg.MaxTestBytes = DefaultMaxTestBytes
	}
	if cfg.MaxTestBytes < 0 {
		return nil, fmt.Errorf("deepcoder: negative test byte cap %d", cfg.MaxTestBytes)
	}
	if cfg.EvalOnly && len(cfg.TestPaths) > 0 {
		return nil, fmt.Errorf("deepcoder: EvalOnly and TestPaths both set; give the test shards as the paths instead")
	}
	r := &reader{cfg: cfg, st: Stats{Skipped: map[string]int{}}}
	probs, rows, err := r.readAll(paths)
	if err != nil {
		return nil, err
	}
	r.st.Shards, r.st.Rows, r.st.Problems = len(paths), rows, len(probs)
	set := &Set{}
	switch {
	case cfg.EvalOnly:
		set.Val = probs
	case len(cfg.TestPaths) > 0:
		test, rows, err := r.readAll(cfg.TestPaths)
		if err != nil {
			return nil, err
		}
		r.st.TestShards, r.st.TestRows, r.st.TestProblems = len(cfg.TestPaths), rows, len(test)
		inTest := make(map[string]bool, len(test))
		for _, p := range test {
			inTest[p.Prompt] = true
		}
		for _, p := range probs {
			if inTest[p.Prompt] {
				r.skip(p.ID, SkipInTest)
				continue
			}
			set.Train = append(set.Train, p)
		}
		set.Val, _ = datasets.CapProblems(test, cfg.Seed, cfg.ValSize, "deepcoder/valcap",
			func(p datasets.Problem) string { return p.ID })
	default:
		set.Train, set.Val = datasets.SplitProblems(probs, cfg.Seed, cfg.ValFrac, cfg.ValSize, "deepcoder/valcap",
			func(p datasets.Problem) string { return p.ID })
	}
	set.Stats = r.st
	return set, nil
}

// Skipped returns the number of skipped problems per reason.
func (t *Task) Skipped() map[string]int {
	out := make(map[string]int, len(t.stats.Skipped))
	for k, v := range t.stats.Skipped {
		out[k] = v
	}
	return out
}

// Stats returns what Open read.
func (t *Task) Stats() Stats {
	st := t.stats
	st.Skipped = t.Skipped()
	return st
}

// Name implements datasets.Task.
func (t *Task) Name() string { return datasets.SourceDeepCoder }

// Kind implements datasets.Task.
func (t *Task) Kind() string { return datasets.KindCode }

// Instructions implements datasets.Task.
func (t *Task) Instructions() string { return Instructions }

// Instructions tell an agent how to present a program.
const Instructions = "Write a Python 3 solution. Put the complete program in one fenced code block (```python ... ```); the last code block of your response is graded. Read from standard input and write to standard output, unless a function signature is given, in which case implement that function (or the Solution class method)."

// Verify implements datasets.Task.
func (t *Task) Verify(ctx context.Context, p datasets.Problem, output string) datasets.Verdict {
	return t.ver.Check(ctx, p, output)
}

// Verifier returns the task's verifier (for its isolation level).
func (t *Task) Verifier() *Verifier { return t.ver }

// reader reads shards into problems, counting skips and repeats.
type reader struct {
	cfg Config
	st  Stats
}

func (r *reader) skip(id, reason string) {
	r.st.Skipped[reason]++
	if r.cfg.Logf != nil {
		r.cfg.Logf("deepcoder: skip %s: %s", id, reason)
	}
}

// readAll reads shards in order and keeps the first problem of each
// distinct statement; it returns the problems and the number of rows.
func (r *reader) readAll(paths []string) ([]datasets.Problem, int, error) {
	var out []datasets.Problem
	first := map[string]int{}
	rows := 0
	for _, path := range paths {
		got, n, err := r.readShard(path)
		if err != nil {
			return nil, 0, err
		}
		rows += n
		for _, p := range got {
			if j, dup := first[p.Prompt]; dup {
				r.st.Duplicates++
				q := out[j]
				if q.FnName != p.FnName || q.Starter != p.Starter || !reflect.DeepEqual(q.Tests, p.Tests) {
					r.st.Conflicts++
				}
				continue
			}
			first[p.Prompt] = len(out)
			out = append(out, p)
		}
	}
	return out, rows, nil
}

// shardName is the stable part of a shard path used in ids: its parent
// directory (the subset) and base name.
func shardName(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	dir := filepath.Base(filepath.Dir(path))
	if dir == "." || dir == "/" {
		return base
	}
	return dir + "/" + base
}

var columns = []string{"problem", "tests", "starter_code", "metadata"}

func (r *reader) readShard(path string) ([]datasets.Problem, int, error) {
	idx := make([]int, len(columns))
	check := func(sc *arrow.Schema) error {
		for k, name := range columns {
			fi := sc.FieldIndices(name)
			if len(fi) == 0 {
				return fmt.Errorf("missing column %q (expected string)", name)
			}
			if id := sc.Field(fi[0]).Type.ID(); id != arrow.STRING && id != arrow.LARGE_STRING {
				return fmt.Errorf("column %q has type %s, expected string", name, sc.Field(fi[0]).Type)
			}
			idx[k] = fi[0]
		}
		return nil
	}
	shard := shardName(path)
	var out []datasets.Problem
	row := 0
	// Small batches: one tests value may be tens of megabytes.
	err := pqread.Stream(path, 16, check, func(rec arrow.RecordBatch) error {
		cols := make([]stringCol, len(columns))
		for k := range columns {
			cols[k] = asStringCol(rec.Column(idx[k]))
		}
		for i := 0; i < int(rec.NumRows()); i, row = i+1, row+1 {
			id := fmt.Sprintf("%s#%d", shard, row)
			if cols[0].IsNull(i) || cols[1].IsNull(i) {
				r.skip(id, SkipNullProblem)
				continue
			}
			testsJSON := cols[1].Value(i)
			if len(testsJSON) > r.cfg.MaxTestBytes {
				r.skip(id, SkipTooLarge)
				continue
			}
			var meta, starter string
			if !cols[3].IsNull(i) {
				meta = cols[3].Value(i)
			}
			if !cols[2].IsNull(i) {
				starter = cols[2].Value(i)
			}
			p, reason := buildProblem(id, cols[0].Value(i), testsJSON, starter, meta)
			if reason != "" {
				r.skip(id, reason)
				continue
			}
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("deepcoder: %w", err)
	}
	return out, row, nil
}

type stringCol interface {
	IsNull(i int) bool
	Value(i int) string
}

func asStringCol(a arrow.Array) stringCol {
	if s, ok := a.(*array.String); ok {
		return s
	}
	return a.(*array.LargeString)
}

// buildProblem normalises one row; a non-empty reason means skip it.
func buildProblem(id, problem, testsJSON, starter, metaJSON string) (datasets.Problem, string) {
	fnName := ""
	if strings.TrimSpace(metaJSON) != "" {
		var meta map[string]any
		if err := json.Unmarshal([]byte(metaJSON), &meta); err != nil {
			return datasets.Problem{}, SkipBadMetadata
		}
		if s, ok := meta["func_name"].(string); ok {
			fnName = s
		}
	}
	tests, tacoFn, reason := ParseTests([]byte(testsJSON))
	if reason != "" {
		return datasets.Problem{}, reason
	}
	if tacoFn != "" {
		if fnName != "" && fnName != tacoFn {
			return datasets.Problem{}, SkipMixedFnNames
		}
		fnName = tacoFn
	}
	functional := 0
	for _, tc := range tests {
		if tc.Functional {
			functional++
		}
	}
	if functional > 0 && fnName == "" {
		return datasets.Problem{}, SkipNoFnName
	}
	kind := "stdin"
	switch {
	case functional == len(tests):
		kind = "functional"
	case functional > 0:
		kind = "mixed"
	}
	return datasets.Problem{
		ID:      id,
		Prompt:  problem,
		Truth:   fmt.Sprintf("%d %s tests", len(tests), kind),
		Tests:   tests,
		FnName:  fnName,
		Starter: starter,
	}, ""
}

// ParseTests normalises a tests JSON value of any of the four published
// shapes. It returns the tests, the function name carried by a taco value
// (if any), and a skip reason ("" on success).
func ParseTests(raw []byte) ([]datasets.Test, string, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, "", SkipNoTests
	}
	switch raw[0] {
	case '{':
		return parseTaco(raw)
	case '[':
		return parseList(raw)
	}
	if !json.Valid(raw) {
		return nil, "", SkipBadJSON
	}
	return nil, "", SkipBadShape
}

func parseTaco(raw []byte) ([]datasets.Test, string, string) {
	var v struct {
		Inputs  []json.RawMessage `json:"inputs"`
		Outputs []json.RawMessage `json:"outputs"`
		FnName  *string           `json:"fn_name"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		if !json.Valid(raw) {
			return nil, "", SkipBadJSON
		}
		return nil, "", SkipBadShape
	}
	if v.Inputs == nil || v.Outputs == nil || len(v.Inputs) != len(v.Outputs) {
		return nil, "", SkipBadShape
	}
	if len(v.Inputs) == 0 {
		return nil, "", SkipNoTests
	}
	fn := ""
	if v.FnName != nil {
		fn = *v.FnName
	}
	tests := make([]datasets.Test, len(v.Inputs))
	for k := range v.Inputs {
		if fn != "" {
			// Functional: inputs[k] is the argument list, outputs[k] the
			// expected value.
			var args []json.RawMessage
			if err := json.Unmarshal(v.Inputs[k], &args); err != nil {
				return nil, "", SkipBadShape
			}
			lines := make([]string, len(args))
			for a, arg := range args {
				var c bytes.Buffer
				if err := json.Compact(&c, arg); err != nil {
					return nil, "", SkipBadJSON
				}
				lines[a] = c.String()
			}
			var c bytes.Buffer
			if err := json.Compact(&c, v.Outputs[k]); err != nil {
				return nil, "", SkipBadJSON
			}
			tests[k] = datasets.Test{Input: strings.Join(lines, "\n"), Output: c.String(), Functional: true}
			continue
		}
		in, ok1 := textOf(v.Inputs[k])
		out, ok2 := textOf(v.Outputs[k])
		if !ok1 || !ok2 {
			return nil, "", SkipBadShape
		}
		tests[k] = datasets.Test{Input: in, Output: out}
	}
	return tests, fn, ""
}

// textOf reads a stdin/stdout value: a string, or a list of lines.
func textOf(raw json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err == nil {
		return strings.Join(lines, "\n"), true
	}
	return "", false
}

func parseList(raw []byte) ([]datasets.Test, string, string) {
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		if !json.Valid(raw) {
			return nil, "", SkipBadJSON
		}
		return nil, "", SkipBadShape
	}
	if len(items) == 0 {
		return nil, "", SkipNoTests
	}
	tests := make([]datasets.Test, 0, len(items))
	for _, it := range items {
		in, ok1 := textOf(it["input"])
		out, ok2 := textOf(it["output"])
		if it["input"] == nil || it["output"] == nil || !ok1 || !ok2 {
			return nil, "", SkipBadShape
		}
		tc := datasets.Test{Input: in, Output: out}
		if tt, ok := it["testtype"]; ok { // lcbv5
			var s string
			_ = json.Unmarshal(tt, &s)
			switch s {
			case "stdin":
			case "functional":
				tc.Functional = true
			default:
				return nil, "", SkipUnsupported
			}
		} else if ty, ok := it["type"]; ok { // primeintellect
			var s string
			_ = json.Unmarshal(ty, &s)
			if s != "stdin_stdout" {
				return nil, "", SkipUnsupported
			}
		}
		tests = append(tests, tc)
	}
	return tests, "", ""
}
