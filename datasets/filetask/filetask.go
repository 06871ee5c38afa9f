// Package filetask reads a task from a researcher's own file: one problem
// per JSONL line or Parquet row, with a field mapping that names the
// columns holding the problem, its answer (math) or its tests and entry
// point (code), and a verifier kind that says how an agent's output is
// graded: the DAPO rule's "Answer:" line, the last \boxed{} answer, or the
// problem's tests run in the sandbox.
package filetask

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/dapo"
	"github.com/marlowlab/marlow/datasets/deepcoder"
	"github.com/marlowlab/marlow/datasets/internal/pqread"
)

// Name is the source name a spec's tasks.<name>.source selects.
const Name = datasets.SourceFile

// Verifier kinds.
const (
	// VerifyAnswer grades math with the DAPO rule: the last "Answer:" line
	// of the output's last 300 characters, normalised, equals the answer.
	VerifyAnswer = "answer"
	// VerifyBoxed grades math by the output's last \boxed{...}, normalised
	// the same way.
	VerifyBoxed = "boxed"
	// VerifyCodeTests runs the last fenced Python block of the output, then
	// each of the problem's tests (Python statements such as MBPP's
	// asserts), in the sandbox; every test must pass.
	VerifyCodeTests = "code-tests"
)

// Verifiers lists the verifier kinds.
var Verifiers = []string{VerifyAnswer, VerifyBoxed, VerifyCodeTests}

// Formats of the file.
const (
	FormatJSONL   = "jsonl"
	FormatParquet = "parquet"
)

// Mapping names the fields of the file and how outputs are graded. It is
// the file section of a spec's task (tasks.<name>.file).
type Mapping struct {
	// Format is jsonl or parquet; empty: from the file's extension
	// (.jsonl/.json lines, .parquet).
	Format string `yaml:"format,omitempty" json:"format,omitempty"`
	// Verifier is one of Verifiers.
	Verifier string `yaml:"verifier" json:"verifier"`
	// ID is the field of a problem's id; empty: the row number (from 1).
	ID string `yaml:"id,omitempty" json:"id,omitempty"`
	// Problem is the field of the problem statement.
	Problem string `yaml:"problem" json:"problem"`
	// Answer is the field of a math problem's final answer (a string or a
	// number).
	Answer string `yaml:"answer,omitempty" json:"answer,omitempty"`
	// AnswerAfter, when set, keeps only the text after the last occurrence
	// of this marker in the answer field (GSM8K's "#### 42").
	AnswerAfter string `yaml:"answer_after,omitempty" json:"answer_after,omitempty"`
	// Tests is the field of a code problem's tests: a list of Python
	// statements (or one string of them), run after the agent's program.
	Tests string `yaml:"tests,omitempty" json:"tests,omitempty"`
	// EntryPoint is the field of the function a code problem's tests call;
	// the prompt asks for it. Empty: the prompt does not name one.
	EntryPoint string `yaml:"entry_point,omitempty" json:"entry_point,omitempty"`
}

// Kind is the task kind the verifier grades: code for code-tests, else
// math.
func (m Mapping) Kind() string {
	if m.Verifier == VerifyCodeTests {
		return datasets.KindCode
	}
	return datasets.KindMath
}

// FieldError is a problem with one key of a Mapping.
type FieldError struct {
	Key string // the mapping key, e.g. "answer"
	Msg string
}

func (e FieldError) Error() string { return e.Key + ": " + e.Msg }

// Check returns the mapping's mistakes, one per key, in a fixed order.
func (m Mapping) Check() []FieldError {
	var out []FieldError
	bad := func(k, f string, a ...any) { out = append(out, FieldError{k, fmt.Sprintf(f, a...)}) }
	switch m.Format {
	case "", FormatJSONL, FormatParquet:
	default:
		bad("format", "%q is not a format; use jsonl or parquet (or leave it out to go by the file's extension)", m.Format)
	}
	known := false
	for _, v := range Verifiers {
		known = known || v == m.Verifier
	}
	if !known {
		bad("verifier", "%q is not a verifier; use one of %s", m.Verifier, strings.Join(Verifiers, ", "))
	}
	if m.Problem == "" {
		bad("problem", "missing: name the field that holds the problem statement")
	}
	code := m.Verifier == VerifyCodeTests
	if known && !code {
		if m.Answer == "" {
			bad("answer", "missing: verifier %s needs the field that holds the final answer", m.Verifier)
		}
		if m.Tests != "" {
			bad("tests", "only used by verifier %s, not %s; remove it", VerifyCodeTests, m.Verifier)
		}
		if m.EntryPoint != "" {
			bad("entry_point", "only used by verifier %s, not %s; remove it", VerifyCodeTests, m.Verifier)
		}
	}
	if code {
		if m.Tests == "" {
			bad("tests", "missing: verifier %s needs the field that holds the tests", VerifyCodeTests)
		}
		if m.Answer != "" {
			bad("answer", "not used by verifier %s (its tests grade); remove it", VerifyCodeTests)
		}
		if m.AnswerAfter != "" {
			bad("answer_after", "not used by verifier %s; remove it", VerifyCodeTests)
		}
	}
	return out
}

// FormatOf returns the file's format: m.Format, else by extension.
func (m Mapping) FormatOf(path string) (string, error) {
	if m.Format != "" {
		return m.Format, nil
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		return FormatJSONL, nil
	case ".parquet":
		return FormatParquet, nil
	}
	return "", fmt.Errorf("%s: cannot tell the format from the extension %q; name it with file.format (jsonl or parquet)", path, filepath.Ext(path))
}

// Config configures Open.
type Config struct {
	Mapping Mapping
	Seed    uint64  // keys the train/validation split and the train order
	ValFrac float64 // share of problems held out for validation
	ValSize int     // cap on the validation set (0 = none)
	// Verifier configures the sandbox of code-tests (created on first use).
	Verifier deepcoder.VerifierConfig
}

// Task is a task read from a file; it implements datasets.Task.
type Task struct {
	datasets.FilePool
	cfg  Config
	path string
	n    int

	once   sync.Once
	verif  *deepcoder.Verifier
	verErr error
}

var _ datasets.Task = (*Task)(nil)

// Open reads every problem of the file at path.
func Open(path string, cfg Config) (*Task, error) {
	if errs := cfg.Mapping.Check(); len(errs) > 0 {
		return nil, fmt.Errorf("%s: field mapping: %w", path, errors.Join(asErrors(errs)...))
	}
	probs, err := Read(path, cfg.Mapping)
	if err != nil {
		return nil, err
	}
	train, val := datasets.SplitProblems(probs, cfg.Seed, cfg.ValFrac, cfg.ValSize, "filetask/valcap", func(p datasets.Problem) string { return p.ID })
	return &Task{FilePool: datasets.NewFilePool(path, cfg.Seed, train, val), cfg: cfg, path: path, n: len(probs)}, nil
}

func asErrors(fe []FieldError) []error {
	out := make([]error, len(fe))
	for i, e := range fe {
		out[i] = e
	}
	return out
}

// Size is the number of problems in the file.
func (t *Task) Size() int { return t.n }

// Name implements datasets.Task.
func (t *Task) Name() string { return Name }

// Kind implements datasets.Task.
func (t *Task) Kind() string { return t.cfg.Mapping.Kind() }

// Instructions implements datasets.Task.
func (t *Task) Instructions() string {
	switch t.cfg.Mapping.Verifier {
	case VerifyBoxed:
		return `Put your final answer within \boxed{}.`
	case VerifyCodeTests:
		return "Write a Python 3 solution. Put the complete program in one fenced code block (```python ... ```); the last code block of your response is graded by running tests that call your function."
	}
	return "The last line of your response should be of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem."
}

// Verify implements datasets.Task.
func (t *Task) Verify(ctx context.Context, p datasets.Problem, output string) datasets.Verdict {
	switch t.cfg.Mapping.Verifier {
	case VerifyBoxed:
		return dapo.Grade(output, p.Truth, dapo.ModeBoxed)
	case VerifyCodeTests:
		return t.verifyCode(ctx, p, output)
	}
	return dapo.Grade(output, p.Truth, dapo.ModeAnswer)
}

// passMarker is what the test program prints once every test passed.
const passMarker = "@@marlow-tests-passed@@"

// verifyCode runs the output's last Python block and then the problem's
// tests in one sandboxed program; the program's own printing is discarded
// so that only the marker, printed after the last test, is compared.
func (t *Task) verifyCode(ctx context.Context, p datasets.Problem, output string) datasets.Verdict {
	code, lang, ok := deepcoder.ExtractCode(output)
	if !ok {
		return datasets.Verdict{Reason: "no fenced code block"}
	}
	t.once.Do(func() { t.verif, t.verErr = deepcoder.NewVerifier(t.cfg.Verifier) })
	if t.verErr != nil {
		return datasets.Verdict{Answer: code, Reason: fmt.Sprintf("sandbox: %v", t.verErr)}
	}
	prog, err := TestProgram(code, p.Tests)
	if err != nil {
		return datasets.Verdict{Answer: code, Reason: err.Error()}
	}
	q := p
	q.Tests = []datasets.Test{{Output: passMarker}}
	q.FnName = ""
	v := t.verif.Check(ctx, q, "```"+lang+"\n"+prog+"```\n")
	v.Answer = code
	return v
}

// TestProgram is the Python program that code-tests runs: it executes code
// with its output discarded, then each test (Python statements) in the same
// namespace, and prints the pass marker when none raised.
func TestProgram(code string, tests []datasets.Test) (string, error) {
	lit := func(s string) (string, error) {
		b, err := json.Marshal(s) // a JSON string is a valid Python string literal
		return string(b), err
	}
	src, err := lit(code)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("import io, sys\n_out = sys.stdout\nsys.stdout = io.StringIO()\n_ns = {\"__name__\": \"solution\"}\n")
	b.WriteString("exec(compile(" + src + ", \"solution.py\", \"exec\"), _ns)\n")
	for i, tc := range tests {
		s, err := lit(tc.Input)
		if err != nil {
			return "", err
		}
		b.WriteString("exec(compile(" + s + ", \"test" + strconv.Itoa(i+1) + ".py\", \"exec\"), _ns)\n")
	}
	b.WriteString("sys.stdout = _out\nprint(" + strconv.Quote(passMarker) + ")\n")
	return b.String(), nil
}

// Read returns the problems of the file at path in file order. Errors name
// the file, the row (and, for JSONL, the line) and the field.
func Read(path string, m Mapping) ([]datasets.Problem, error) {
	format, err := m.FormatOf(path)
	if err != nil {
		return nil, err
	}
	var probs []datasets.Problem
	seen := map[string]int{}
	add := func(row int, where string, rec map[string]json.RawMessage) error {
		p, err := m.problem(row, rec)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, where, err)
		}
		if first, dup := seen[p.ID]; dup {
			return fmt.Errorf("%s: %s: id %q repeats the id of row %d; ids must be unique (fix the %s field, or leave file.id out to number the rows)", path, where, p.ID, first, m.ID)
		}
		seen[p.ID] = row
		probs = append(probs, p)
		return nil
	}
	switch format {
	case FormatJSONL:
		err = readJSONL(path, add)
	case FormatParquet:
		err = readParquet(path, add)
	default:
		err = fmt.Errorf("%s: unknown format %q", path, format)
	}
	if err != nil {
		return nil, err
	}
	if len(probs) == 0 {
		return nil, fmt.Errorf("%s: the file holds no problems (an empty file); add rows, or point path at the right file", path)
	}
	return probs, nil
}

func readJSONL(path string, add func(int, string, map[string]json.RawMessage) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read task file: %w", err)
	}
	row := 0
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		row++
		where := fmt.Sprintf("row %d (line %d)", row, i+1)
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("%s: %s: not a JSON object: %v; each line must hold one object such as {\"question\": ..., \"answer\": ...}", path, where, err)
		}
		if err := add(row, where, rec); err != nil {
			return err
		}
	}
	return nil
}

func readParquet(path string, add func(int, string, map[string]json.RawMessage) error) error {
	row := 0
	return pqread.Stream(path, 256, func(*arrow.Schema) error { return nil }, func(rb arrow.RecordBatch) error {
		sc := rb.Schema()
		for i := 0; i < int(rb.NumRows()); i++ {
			row++
			rec := make(map[string]json.RawMessage, int(rb.NumCols()))
			for c := 0; c < int(rb.NumCols()); c++ {
				col := rb.Column(c)
				if col.IsNull(i) {
					rec[sc.Field(c).Name] = json.RawMessage("null")
					continue
				}
				b, err := json.Marshal(col.GetOneForMarshal(i))
				if err != nil {
					return fmt.Errorf("%s: row %d: column %q: %w", path, row, sc.Field(c).Name, err)
				}
				rec[sc.Field(c).Name] = b
			}
			if err := add(row, fmt.Sprintf("row %d", row), rec); err != nil {
				return err
			}
		}
		return nil
	})
}

// problem builds row's problem from its fields.
func (m Mapping) problem(row int, rec map[string]json.RawMessage) (datasets.Problem, error) {
	var p datasets.Problem
	var err error
	if p.Prompt, err = textField(rec, m.Problem, "problem", false); err != nil {
		return p, err
	}
	if strings.TrimSpace(p.Prompt) == "" {
		return p, fmt.Errorf("field %q (problem): empty", m.Problem)
	}
	if m.ID == "" {
		p.ID = strconv.Itoa(row)
	} else if p.ID, err = textField(rec, m.ID, "id", true); err != nil {
		return p, err
	}
	if m.Verifier == VerifyCodeTests {
		if p.Tests, err = testsField(rec, m.Tests); err != nil {
			return p, err
		}
		if m.EntryPoint != "" {
			if p.FnName, err = textField(rec, m.EntryPoint, "entry_point", false); err != nil {
				return p, err
			}
			p.Prompt += "\n\nYour code should define the function `" + p.FnName + "`."
		}
		p.Truth = fmt.Sprintf("%d tests", len(p.Tests))
		return p, nil
	}
	if p.Truth, err = textField(rec, m.Answer, "answer", true); err != nil {
		return p, err
	}
	if m.AnswerAfter != "" {
		i := strings.LastIndex(p.Truth, m.AnswerAfter)
		if i < 0 {
			return p, fmt.Errorf("field %q (answer): no %q marker in %.60q (file.answer_after)", m.Answer, m.AnswerAfter, p.Truth)
		}
		p.Truth = p.Truth[i+len(m.AnswerAfter):]
	}
	p.Truth = strings.TrimSpace(p.Truth)
	if p.Truth == "" {
		return p, fmt.Errorf("field %q (answer): empty", m.Answer)
	}
	return p, nil
}

// textField returns a string field; numbers are accepted (as their JSON
// text) when number is set.
func textField(rec map[string]json.RawMessage, field, role string, number bool) (string, error) {
	raw, ok := rec[field]
	if !ok {
		return "", fmt.Errorf("field %q (%s): missing; the row has %s", field, role, keys(rec))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	if number {
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&n); err == nil {
			return n.String(), nil
		}
	}
	want := "a string"
	if number {
		want = "a string or a number"
	}
	return "", fmt.Errorf("field %q (%s): wrong type: %.40s is not %s", field, role, raw, want)
}

// testsField returns the tests: a list of strings, or one string.
func testsField(rec map[string]json.RawMessage, field string) ([]datasets.Test, error) {
	raw, ok := rec[field]
	if !ok {
		return nil, fmt.Errorf("field %q (tests): missing; the row has %s", field, keys(rec))
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, fmt.Errorf("field %q (tests): wrong type: %.40s is not a list of strings or a string", field, raw)
		}
		list = []string{one}
	}
	var out []datasets.Test
	for _, s := range list {
		if strings.TrimSpace(s) != "" {
			out = append(out, datasets.Test{Input: s})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("field %q (tests): no tests", field)
	}
	return out, nil
}

func keys(rec map[string]json.RawMessage) string {
	ks := make([]string, 0, len(rec))
	for k := range rec {
		ks = append(ks, strconv.Quote(k))
	}
	if len(ks) == 0 {
		return "no fields"
	}
	sort.Strings(ks)
	return "fields " + strings.Join(ks, ", ")
}
