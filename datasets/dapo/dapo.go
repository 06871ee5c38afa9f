// Package dapo reads the DAPO-Math-17k training file and the AIME-2024
// evaluation file in their published Parquet schemas, and grades answers
// with the DAPO answer rule (a port of verl's math_dapo: see Grade).
//
// The published DAPO-Math-17k file holds about 1.79M rows that repeat
// about 17.4k distinct prompts roughly 100 times. Open streams the file in
// record batches, keeps the first row of each distinct prompt text, and
// splits the distinct problems into train and validation deterministically
// from the seed (by hashing the prompt text, so the split does not depend on
// row order). The AIME-2024 file is an evaluation set: every problem is a
// validation problem and the train stream is empty.
package dapo

import (
	"context"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/internal/pqread"
)

// Variants of the published schema.
const (
	VariantDAPO = "dapo-math-17k" // extra_info struct<index: string>
	VariantAIME = "aime-2024"     // extra_info struct<index: int64, raw_problem: string, split: null>
)

// DefaultValFrac is the share of distinct problems held out for validation.
const DefaultValFrac = 0.1

// Config configures Open.
type Config struct {
	// Seed keys the train/validation split and the per-epoch train order.
	Seed uint64
	// ValSize caps the validation set (0: no cap). Problems past the cap,
	// in a seed-keyed order, go back to train.
	ValSize int
	// ValFrac is the validation share (0: DefaultValFrac).
	ValFrac float64
	// AnswerMode is ModeAnswer (default) or ModeBoxed.
	AnswerMode string
}

// Stats describe what Open read.
type Stats struct {
	Variant    string
	Rows       int // rows in the file
	Distinct   int // distinct prompt texts
	Duplicates int // rows dropped as repeats of an earlier prompt
	// Conflicts counts repeated prompts whose ground truth differs from the
	// first occurrence's (the first is kept).
	Conflicts int
}

// Task is a DAPO-style math task; it implements datasets.Task.
type Task struct {
	datasets.FilePool
	cfg   Config
	stats Stats
}

var _ datasets.Task = (*Task)(nil)

// Open reads the Parquet file at path (either variant of the schema).
func Open(path string, cfg Config) (*Task, error) {
	switch cfg.AnswerMode {
	case "":
		cfg.AnswerMode = ModeAnswer
	case ModeAnswer, ModeBoxed:
	default:
		return nil, fmt.Errorf("dapo: unknown answer mode %q (want %q or %q)", cfg.AnswerMode, ModeAnswer, ModeBoxed)
	}
	if cfg.ValFrac == 0 {
		cfg.ValFrac = DefaultValFrac
	}
	if cfg.ValFrac < 0 || cfg.ValFrac > 1 || cfg.ValFrac != cfg.ValFrac {
		return nil, fmt.Errorf("dapo: validation fraction %v outside [0, 1]", cfg.ValFrac)
	}
	if cfg.ValSize < 0 {
		return nil, fmt.Errorf("dapo: negative validation size %d", cfg.ValSize)
	}
	probs, stats, err := read(path)
	if err != nil {
		return nil, err
	}
	t := &Task{cfg: cfg, stats: stats}
	if stats.Variant == VariantAIME {
		t.FilePool = datasets.NewFilePool("dapo: "+stats.Variant, cfg.Seed, nil, probs)
		return t, nil
	}
	train, val := datasets.SplitProblems(probs, cfg.Seed, cfg.ValFrac, cfg.ValSize, "dapo/valcap",
		func(p datasets.Problem) string { return p.Prompt })
	t.FilePool = datasets.NewFilePool("dapo: "+stats.Variant, cfg.Seed, train, val)
	return t, nil
}

// Stats returns what Open read.
func (t *Task) Stats() Stats { return t.stats }

// Name implements datasets.Task.
func (t *Task) Name() string { return t.stats.Variant }

// Kind implements datasets.Task.
func (t *Task) Kind() string { return datasets.KindMath }

// Instructions implements datasets.Task. (The DAPO prompts themselves
// already ask for an "Answer:" line.)
func (t *Task) Instructions() string {
	if t.cfg.AnswerMode == ModeBoxed {
		return `Put your final answer within \boxed{}.`
	}
	return "The last line of your response should be of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem."
}

// Verify implements datasets.Task with the DAPO rule in the configured mode.
func (t *Task) Verify(_ context.Context, p datasets.Problem, output string) datasets.Verdict {
	return Grade(output, p.Truth, t.cfg.AnswerMode)
}

// columns the reader needs, with the expected types named for errors.
const (
	wantString = "string"
	wantPrompt = "list<struct<content: string, role: string>>"
	wantReward = "struct<ground_truth: string, style: string>"
	wantExtra  = "struct<index: string> (DAPO-Math-17k) or struct<index: int64, raw_problem: string, split: null> (AIME-2024)"
)

// read streams the file and returns its distinct problems in first-seen
// order.
func read(path string) ([]datasets.Problem, Stats, error) {
	var (
		cols    colIdx
		variant string
		st      Stats
		probs   []datasets.Problem
	)
	seen := map[string]int{}
	row := 0
	check := func(sc *arrow.Schema) (err error) {
		cols, variant, err = checkSchema(sc)
		st.Variant = variant
		return err
	}
	err := pqread.Stream(path, 4096, check, func(rec arrow.RecordBatch) error {
		prompt := rec.Column(cols.prompt).(*array.List)
		reward := rec.Column(cols.reward).(*array.Struct)
		extra := rec.Column(cols.extra).(*array.Struct)
		msgs := prompt.ListValues().(*array.Struct)
		content := msgs.Field(cols.content).(*array.String)
		role := msgs.Field(cols.role).(*array.String)
		truth := reward.Field(cols.truth).(*array.String)
		index := extra.Field(cols.index)
		for i := 0; i < int(rec.NumRows()); i, row = i+1, row+1 {
			st.Rows++
			if prompt.IsNull(i) {
				return fmt.Errorf("%s: row %d: prompt is null", path, row)
			}
			text, ok := userMessage(prompt, content, role, i)
			if !ok {
				return fmt.Errorf("%s: row %d: prompt has no user message", path, row)
			}
			if reward.IsNull(i) || truth.IsNull(i) {
				return fmt.Errorf("%s: row %d: reward_model.ground_truth is null", path, row)
			}
			gt := truth.Value(i)
			if j, dup := seen[text]; dup {
				st.Duplicates++
				if probs[j].Truth != gt {
					st.Conflicts++
				}
				continue
			}
			id := ""
			if !extra.IsNull(i) && !index.IsNull(i) {
				switch a := index.(type) {
				case *array.String:
					id = a.Value(i)
				case *array.Int64:
					id = strconv.FormatInt(a.Value(i), 10)
				}
			}
			if id == "" {
				id = fmt.Sprintf("row%d", row)
			}
			seen[text] = len(probs)
			probs = append(probs, datasets.Problem{ID: variant + "/" + id, Prompt: text, Truth: gt})
		}
		return nil
	})
	if err != nil {
		return nil, st, fmt.Errorf("dapo: %w", err)
	}
	st.Distinct = len(probs)
	return probs, st, nil
}

// userMessage returns the content of the first message with role "user"
// in row i of the prompt list.
func userMessage(l *array.List, content, role *array.String, i int) (string, bool) {
	start, end := l.ValueOffsets(i)
	for j := int(start); j < int(end); j++ {
		if !role.IsNull(j) && role.Value(j) == "user" && !content.IsNull(j) {
			return content.Value(j), true
		}
	}
	return "", false
}

// colIdx locates the needed columns and struct fields.
type colIdx struct {
	prompt, reward, extra int
	content, role         int
	truth                 int
	index                 int
}

// checkSchema verifies the published schema (either variant) and returns
// the column positions; a mismatch names the column and the expected type.
func checkSchema(sc *arrow.Schema) (colIdx, string, error) {
	var c colIdx
	field := func(name, want string) (arrow.Field, int, error) {
		idx := sc.FieldIndices(name)
		if len(idx) == 0 {
			return arrow.Field{}, 0, fmt.Errorf("missing column %q (expected %s)", name, want)
		}
		return sc.Field(idx[0]), idx[0], nil
	}
	for _, name := range []string{"data_source", "ability"} {
		f, _, err := field(name, wantString)
		if err != nil {
			return c, "", err
		}
		if f.Type.ID() != arrow.STRING {
			return c, "", fmt.Errorf("column %q has type %s, expected %s", name, f.Type, wantString)
		}
	}
	f, i, err := field("prompt", wantPrompt)
	if err != nil {
		return c, "", err
	}
	c.prompt = i
	bad := fmt.Errorf("column %q has type %s, expected %s", "prompt", f.Type, wantPrompt)
	lt, ok := f.Type.(*arrow.ListType)
	if !ok {
		return c, "", bad
	}
	st, ok := lt.Elem().(*arrow.StructType)
	if !ok {
		return c, "", bad
	}
	if c.content, ok = stringField(st, "content"); !ok {
		return c, "", bad
	}
	if c.role, ok = stringField(st, "role"); !ok {
		return c, "", bad
	}
	f, i, err = field("reward_model", wantReward)
	if err != nil {
		return c, "", err
	}
	c.reward = i
	bad = fmt.Errorf("column %q has type %s, expected %s", "reward_model", f.Type, wantReward)
	if st, ok = f.Type.(*arrow.StructType); !ok {
		return c, "", bad
	}
	if c.truth, ok = stringField(st, "ground_truth"); !ok {
		return c, "", bad
	}
	if _, ok = stringField(st, "style"); !ok {
		return c, "", bad
	}
	f, i, err = field("extra_info", wantExtra)
	if err != nil {
		return c, "", err
	}
	c.extra = i
	bad = fmt.Errorf("column %q has type %s, expected %s", "extra_info", f.Type, wantExtra)
	if st, ok = f.Type.(*arrow.StructType); !ok {
		return c, "", bad
	}
	idx, ok := st.FieldIdx("index")
	if !ok {
		return c, "", bad
	}
	c.index = idx
	switch st.Field(idx).Type.ID() {
	case arrow.STRING:
		return c, VariantDAPO, nil
	case arrow.INT64:
		if _, ok := stringField(st, "raw_problem"); !ok {
			return c, "", bad
		}
		if j, ok := st.FieldIdx("split"); ok && st.Field(j).Type.ID() != arrow.NULL && st.Field(j).Type.ID() != arrow.STRING {
			return c, "", bad
		}
		if j := sc.FieldIndices("__index_level_0__"); len(j) > 0 && sc.Field(j[0]).Type.ID() != arrow.INT64 {
			return c, "", fmt.Errorf("column %q has type %s, expected int64", "__index_level_0__", sc.Field(j[0]).Type)
		}
		return c, VariantAIME, nil
	}
	return c, "", bad
}

// stringField returns the position of a string field of st.
func stringField(st *arrow.StructType, name string) (int, bool) {
	i, ok := st.FieldIdx(name)
	if !ok || st.Field(i).Type.ID() != arrow.STRING {
		return 0, false
	}
	return i, true
}
