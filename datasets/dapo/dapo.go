// Package dapo reads DAPO-Math-17k in the published Parquet schemas (the
// BytedTsinghua-SIA original, the open-r1 processed variant in any of its
// configs, and the AIME-2024 evaluation file) and grades answers with the
// DAPO answer rule (a port of verl's math_dapo: see Grade).
//
// The original file holds about 1.79M rows that repeat about 17.4k
// distinct prompts roughly 100 times; open-r1/DAPO-Math-17k-Processed holds
// the first row of each distinct prompt, with the prompt also as a plain
// string column and the ground truth as "solution", split into configs
// "all", "en" and "cn". Open streams either in record batches, removes
// DAPO's instruction wrapper from every prompt (see StripWrapper), keeps the
// first row of each distinct problem statement, optionally keeps one
// language (see HasCJK: the rule that made open-r1's "en" and "cn"), and
// splits the problems into train and validation deterministically from the
// seed (by hashing the statement, so the split depends neither on row order
// nor on which download was read). The original file filtered to LangEN and
// open-r1's "en" file therefore give the same problems, in the same order,
// with the same ground truths and the same split. The AIME-2024 file is an
// evaluation set: every problem is a validation problem and the train
// stream is empty.
package dapo

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/internal/pqread"
)

// Variants of the published schema.
const (
	VariantDAPO   = "dapo-math-17k"         // prompt list<struct<content, role>>, extra_info struct<index: string>
	VariantOpenR1 = "dapo-math-17k-open-r1" // prompt string, solution string, source_prompt list<...>
	VariantAIME   = "aime-2024"             // extra_info struct<index: int64, raw_problem: string, split: null>
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
	// Language keeps LangAll (default, also ""), LangEN or LangCN problems.
	Language string
}

// Stats describe what Open read. Wrapper outcomes, skips and problems are
// counted over distinct problem statements.
type Stats struct {
	Variant    string
	Rows       int // rows in the file
	Distinct   int // distinct problem statements (after removing the wrapper)
	Duplicates int // rows dropped as repeats of an earlier statement
	// Conflicts counts repeated statements whose ground truth differs from
	// the first occurrence's (the first is kept).
	Conflicts int
	// Stripped, Bare and NearMiss count the wrapper outcomes (StripWrapper).
	Stripped, Bare, NearMiss int
	// OtherLanguage counts statements left out by the language filter;
	// Empty those with nothing left once the wrapper is removed.
	OtherLanguage, Empty int
	// Problems is what the task holds (train plus validation).
	Problems int
}

// Skip reasons, as Skipped reports them.
const (
	SkipOtherLanguage = "not in the chosen language"
	SkipEmpty         = "empty problem statement"
)

// Skipped returns the skipped statements by reason (reasons with a count
// of zero are left out).
func (s Stats) Skipped() map[string]int {
	out := map[string]int{}
	if s.OtherLanguage > 0 {
		out[SkipOtherLanguage] = s.OtherLanguage
	}
	if s.Empty > 0 {
		out[SkipEmpty] = s.Empty
	}
	return out
}

// Task is a DAPO-style math task; it implements datasets.Task.
type Task struct {
	datasets.FilePool
	cfg   Config
	stats Stats
}

var _ datasets.Task = (*Task)(nil)

// Open reads the Parquet file at path (any variant of the schema).
func Open(path string, cfg Config) (*Task, error) {
	switch cfg.AnswerMode {
	case "":
		cfg.AnswerMode = ModeAnswer
	case ModeAnswer, ModeBoxed:
	default:
		return nil, fmt.Errorf("dapo: unknown answer mode %q (want %q or %q)", cfg.AnswerMode, ModeAnswer, ModeBoxed)
	}
	switch cfg.Language {
	case "":
		cfg.Language = LangAll
	case LangAll, LangEN, LangCN:
	default:
		return nil, fmt.Errorf("dapo: unknown language %q (want %q, %q or %q)", cfg.Language, LangAll, LangEN, LangCN)
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
	probs, stats, err := read(path, cfg.Language)
	if err != nil {
		return nil, err
	}
	if len(probs) == 0 {
		return nil, fmt.Errorf("dapo: %s: no problems left of %d distinct statements (language %s drops %d, %d empty)",
			path, stats.Distinct, cfg.Language, stats.OtherLanguage, stats.Empty)
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

// Instructions implements datasets.Task. (The reader removed DAPO's own
// instructions from the prompts; these replace them.)
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

// Expected column types, named in errors.
const (
	wantString = "string"
	wantPrompt = "list<struct<content: string, role: string>>"
	wantReward = "struct<ground_truth: string, style: string>"
	wantExtra  = "struct<index: string> (DAPO-Math-17k) or struct<index: int64, raw_problem: string, split: null> (AIME-2024)"
	wantIndex  = "struct<index: int64> or struct<index: string> (open-r1 processed)"
	anyPrompt  = wantPrompt + " (DAPO-Math-17k, AIME-2024) or string (open-r1 processed)"
)

// row is one row's fields as the reader needs them.
type row struct {
	text, truth, id string
}

// read streams the file and returns its problems in first-seen order.
func read(path, lang string) ([]datasets.Problem, Stats, error) {
	var (
		cols  colIdx
		st    Stats
		probs []datasets.Problem
	)
	seen := map[string]string{} // statement -> first ground truth
	rowN := 0
	check := func(sc *arrow.Schema) (err error) {
		cols, err = checkSchema(sc)
		st.Variant = cols.variant
		return err
	}
	prefix := VariantDAPO
	err := pqread.Stream(path, 4096, check, func(rec arrow.RecordBatch) error {
		get, err := cols.rows(rec)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if cols.variant == VariantAIME {
			prefix = VariantAIME
		}
		for i := 0; i < int(rec.NumRows()); i, rowN = i+1, rowN+1 {
			st.Rows++
			r, err := get(i)
			if err != nil {
				return fmt.Errorf("%s: row %d: %w", path, rowN, err)
			}
			problem, w := StripWrapper(r.text)
			if first, dup := seen[problem]; dup {
				st.Duplicates++
				if first != r.truth {
					st.Conflicts++
				}
				continue
			}
			seen[problem] = r.truth
			st.Distinct++
			switch w {
			case Stripped:
				st.Stripped++
			case NearMiss:
				st.NearMiss++
			default:
				st.Bare++
			}
			if strings.TrimSpace(problem) == "" {
				st.Empty++
				continue
			}
			if !keepLanguage(lang, problem) {
				st.OtherLanguage++
				continue
			}
			id := r.id
			if id == "" {
				id = fmt.Sprintf("row%d", rowN)
			}
			probs = append(probs, datasets.Problem{ID: prefix + "/" + id, Prompt: problem, Truth: r.truth})
		}
		return nil
	})
	if err != nil {
		return nil, st, fmt.Errorf("dapo: %w", err)
	}
	st.Problems = len(probs)
	return probs, st, nil
}

// colIdx locates the needed columns and struct fields.
type colIdx struct {
	variant               string
	prompt, reward, extra int
	solution              int // open-r1 only
	content, role         int // fields of a prompt message (list variants)
	truth                 int
	index                 int
}

// rows returns a reader of the rows of rec.
func (c colIdx) rows(rec arrow.RecordBatch) (func(i int) (row, error), error) {
	reward := rec.Column(c.reward).(*array.Struct)
	truth := reward.Field(c.truth).(*array.String)
	extra := rec.Column(c.extra).(*array.Struct)
	index := extra.Field(c.index)
	id := func(i int) string {
		if extra.IsNull(i) || index.IsNull(i) {
			return ""
		}
		switch a := index.(type) {
		case *array.String:
			return a.Value(i)
		case *array.Int64:
			return strconv.FormatInt(a.Value(i), 10)
		}
		return ""
	}
	if c.variant == VariantOpenR1 {
		prompt := rec.Column(c.prompt).(*array.String)
		solution := rec.Column(c.solution).(*array.String)
		return func(i int) (row, error) {
			if prompt.IsNull(i) {
				return row{}, fmt.Errorf("prompt is null")
			}
			if solution.IsNull(i) {
				return row{}, fmt.Errorf("solution is null")
			}
			if !reward.IsNull(i) && !truth.IsNull(i) && truth.Value(i) != solution.Value(i) {
				return row{}, fmt.Errorf("solution %q differs from reward_model.ground_truth %q", solution.Value(i), truth.Value(i))
			}
			return row{text: prompt.Value(i), truth: solution.Value(i), id: id(i)}, nil
		}, nil
	}
	prompt := rec.Column(c.prompt).(*array.List)
	msgs := prompt.ListValues().(*array.Struct)
	content := msgs.Field(c.content).(*array.String)
	role := msgs.Field(c.role).(*array.String)
	return func(i int) (row, error) {
		if prompt.IsNull(i) {
			return row{}, fmt.Errorf("prompt is null")
		}
		text, ok := userMessage(prompt, content, role, i)
		if !ok {
			return row{}, fmt.Errorf("prompt has no user message")
		}
		if reward.IsNull(i) || truth.IsNull(i) {
			return row{}, fmt.Errorf("reward_model.ground_truth is null")
		}
		return row{text: text, truth: truth.Value(i), id: id(i)}, nil
	}, nil
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

// schema looks up columns of a schema; a mismatch names the column and the
// expected type.
type schema struct{ sc *arrow.Schema }

func (s schema) field(name, want string) (arrow.Field, int, error) {
	idx := s.sc.FieldIndices(name)
	if len(idx) == 0 {
		return arrow.Field{}, 0, fmt.Errorf("missing column %q (expected %s)", name, want)
	}
	return s.sc.Field(idx[0]), idx[0], nil
}

func (s schema) str(name string) (int, error) {
	f, i, err := s.field(name, wantString)
	if err != nil {
		return 0, err
	}
	if f.Type.ID() != arrow.STRING {
		return 0, fmt.Errorf("column %q has type %s, expected %s", name, f.Type, wantString)
	}
	return i, nil
}

// messages checks a list<struct<content: string, role: string>> column and
// returns its position and the positions of content and role.
func (s schema) messages(name string) (col, content, role int, err error) {
	f, col, err := s.field(name, wantPrompt)
	if err != nil {
		return 0, 0, 0, err
	}
	bad := fmt.Errorf("column %q has type %s, expected %s", name, f.Type, wantPrompt)
	lt, ok := f.Type.(*arrow.ListType)
	if !ok {
		return 0, 0, 0, bad
	}
	st, ok := lt.Elem().(*arrow.StructType)
	if !ok {
		return 0, 0, 0, bad
	}
	if content, ok = stringField(st, "content"); !ok {
		return 0, 0, 0, bad
	}
	if role, ok = stringField(st, "role"); !ok {
		return 0, 0, 0, bad
	}
	return col, content, role, nil
}

// reward checks the reward_model column and returns its position and the
// position of ground_truth.
func (s schema) reward() (col, truth int, err error) {
	f, col, err := s.field("reward_model", wantReward)
	if err != nil {
		return 0, 0, err
	}
	bad := fmt.Errorf("column %q has type %s, expected %s", "reward_model", f.Type, wantReward)
	st, ok := f.Type.(*arrow.StructType)
	if !ok {
		return 0, 0, bad
	}
	if truth, ok = stringField(st, "ground_truth"); !ok {
		return 0, 0, bad
	}
	if _, ok = stringField(st, "style"); !ok {
		return 0, 0, bad
	}
	return col, truth, nil
}

// checkSchema verifies a published schema and returns the column
// positions and the variant; a mismatch names the column and the expected
// type.
func checkSchema(sc *arrow.Schema) (colIdx, error) {
	var c colIdx
	s := schema{sc}
	for _, name := range []string{"data_source", "ability"} {
		if _, err := s.str(name); err != nil {
			return c, err
		}
	}
	f, i, err := s.field("prompt", anyPrompt)
	if err != nil {
		return c, err
	}
	c.prompt = i
	switch f.Type.ID() {
	case arrow.STRING:
		if len(sc.FieldIndices("solution")) == 0 && len(sc.FieldIndices("source_prompt")) == 0 {
			return c, fmt.Errorf("column %q has type %s, expected %s; a string prompt needs the open-r1 columns %q and %q",
				"prompt", f.Type, wantPrompt, "solution", "source_prompt")
		}
		return checkOpenR1(s, c)
	case arrow.LIST:
	default:
		return c, fmt.Errorf("column %q has type %s, expected %s", "prompt", f.Type, anyPrompt)
	}
	if _, c.content, c.role, err = s.messages("prompt"); err != nil {
		return c, err
	}
	if c.reward, c.truth, err = s.reward(); err != nil {
		return c, err
	}
	var st *arrow.StructType
	var idx int
	var bad error
	if c.extra, st, idx, bad, err = s.extraIndex(wantExtra); err != nil {
		return c, err
	}
	c.index = idx
	switch st.Field(idx).Type.ID() {
	case arrow.STRING:
		c.variant = VariantDAPO
		return c, nil
	case arrow.INT64:
		if _, ok := stringField(st, "raw_problem"); !ok {
			return c, bad
		}
		if j, ok := st.FieldIdx("split"); ok && st.Field(j).Type.ID() != arrow.NULL && st.Field(j).Type.ID() != arrow.STRING {
			return c, bad
		}
		if j := sc.FieldIndices("__index_level_0__"); len(j) > 0 && sc.Field(j[0]).Type.ID() != arrow.INT64 {
			return c, fmt.Errorf("column %q has type %s, expected int64", "__index_level_0__", sc.Field(j[0]).Type)
		}
		c.variant = VariantAIME
		return c, nil
	}
	return c, bad
}

// checkOpenR1 verifies the rest of the open-r1 processed schema: prompt
// string (already checked), solution string, source_prompt (the original
// prompt list), reward_model, extra_info struct<index: int64|string>.
func checkOpenR1(s schema, c colIdx) (colIdx, error) {
	var err error
	c.variant = VariantOpenR1
	if c.solution, err = s.str("solution"); err != nil {
		return c, err
	}
	if _, _, _, err = s.messages("source_prompt"); err != nil {
		return c, err
	}
	if c.reward, c.truth, err = s.reward(); err != nil {
		return c, err
	}
	extra, st, idx, bad, err := s.extraIndex(wantIndex)
	if err != nil {
		return c, err
	}
	c.extra = extra
	if id := st.Field(idx).Type.ID(); id != arrow.INT64 && id != arrow.STRING {
		return c, bad
	}
	c.index = idx
	return c, nil
}

// extraIndex finds the extra_info struct column and its index field. It
// returns the column's position, its struct type, the field's position and
// the error to report when a field has the wrong type; err is set when the
// column is missing or is not a struct with an index field.
func (s schema) extraIndex(want string) (col int, st *arrow.StructType, idx int, bad, err error) {
	f, col, err := s.field("extra_info", want)
	if err != nil {
		return 0, nil, 0, nil, err
	}
	bad = fmt.Errorf("column %q has type %s, expected %s", "extra_info", f.Type, want)
	st, ok := f.Type.(*arrow.StructType)
	if !ok {
		return 0, nil, 0, nil, bad
	}
	if idx, ok = st.FieldIdx("index"); !ok {
		return 0, nil, 0, nil, bad
	}
	return col, st, idx, bad, nil
}

// stringField returns the position of a string field of st.
func stringField(st *arrow.StructType, name string) (int, bool) {
	i, ok := st.FieldIdx(name)
	if !ok || st.Field(i).Type.ID() != arrow.STRING {
		return 0, false
	}
	return i, true
}
