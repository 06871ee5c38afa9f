package filetask

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/datasetstest"
	"github.com/marlowlab/marlow/datasets/sandbox"
)

// The mappings of the committed samples, as docs/extending.md shows them.
var (
	gsm8k   = Mapping{Verifier: VerifyAnswer, Problem: "question", Answer: "answer", AnswerAfter: "####"}
	math500 = Mapping{Verifier: VerifyBoxed, ID: "unique_id", Problem: "problem", Answer: "answer"}
	mbpp    = Mapping{Verifier: VerifyCodeTests, ID: "task_id", Problem: "text", Tests: "test_list", EntryPoint: "entry_point"}
)

// sampleRows reads a sample's rows as JSON objects, to compare against.
func sampleRows(t *testing.T, name string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestSamples(t *testing.T) {
	cases := []struct {
		file  string
		m     Mapping
		kind  string
		id0   string
		truth string
		tests int
	}{
		{"gsm8k.jsonl", gsm8k, datasets.KindMath, "1", "55", 0},
		{"math500.jsonl", math500, datasets.KindMath, "sample/number_theory/1.json", "1", 0},
		{"mbpp.jsonl", mbpp, datasets.KindCode, "9001", "3 tests", 3},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", c.file)
			probs, err := Read(path, c.m)
			if err != nil {
				t.Fatal(err)
			}
			rows := sampleRows(t, c.file)
			if len(probs) != len(rows) {
				t.Fatalf("%d problems, want %d", len(probs), len(rows))
			}
			p := probs[0]
			if p.ID != c.id0 || p.Truth != c.truth || len(p.Tests) != c.tests {
				t.Fatalf("first problem id %q truth %q tests %d, want %q %q %d", p.ID, p.Truth, len(p.Tests), c.id0, c.truth, c.tests)
			}
			if !strings.HasPrefix(p.Prompt, rows[0][c.m.Problem].(string)) {
				t.Fatalf("prompt %q does not start with the problem field", p.Prompt)
			}
			task, err := Open(path, Config{Mapping: c.m, Seed: 1, ValFrac: 0.25})
			if err != nil {
				t.Fatal(err)
			}
			if task.Kind() != c.kind || task.Size() != len(rows) {
				t.Fatalf("kind %s size %d, want %s %d", task.Kind(), task.Size(), c.kind, len(rows))
			}
			val, _ := task.Validation()
			if task.TrainSize()+len(val) != len(rows) {
				t.Fatalf("train %d + validation %d != %d rows", task.TrainSize(), len(val), len(rows))
			}
			// Every train position of two epochs holds a train problem, and
			// each epoch visits every train problem once.
			inVal := map[string]bool{}
			for _, p := range val {
				inVal[p.ID] = true
			}
			seen := map[string]int{}
			for i := 0; i < 2*task.TrainSize(); i++ {
				p, err := task.Train(int64(i))
				if err != nil {
					t.Fatal(err)
				}
				if inVal[p.ID] {
					t.Fatalf("train position %d holds validation problem %s", i, p.ID)
				}
				seen[p.ID]++
			}
			for id, n := range seen {
				if n != 2 || len(seen) != task.TrainSize() {
					t.Fatalf("train problem %s visited %d times in 2 epochs (%d distinct of %d)", id, n, len(seen), task.TrainSize())
				}
			}
		})
	}
}

func TestMathVerifiers(t *testing.T) {
	ctx := context.Background()
	g, err := Open(filepath.Join("testdata", "gsm8k.jsonl"), Config{Mapping: gsm8k, Seed: 1, ValFrac: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(filepath.Join("testdata", "math500.jsonl"), Config{Mapping: math500, Seed: 1, ValFrac: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	gp := datasets.Problem{Truth: "55"}
	bp := datasets.Problem{Truth: `\frac{3}{4}`}
	cases := []struct {
		name string
		task *Task
		p    datasets.Problem
		out  string
		want bool
	}{
		{"answer line", g, gp, "72 - 17 = 55\nAnswer: 55", true},
		{"wrong answer", g, gp, "Answer: 54", false},
		{"boxed is not an answer line", g, gp, `\boxed{55}`, false},
		{"boxed", b, bp, `So it is \boxed{\frac{3}{4}}.`, true},
		{"boxed wrong", b, bp, `\boxed{\frac{2}{3}}`, false},
		{"answer line is not boxed", b, bp, `Answer: \frac{3}{4}`, false},
	}
	for _, c := range cases {
		if got := c.task.Verify(ctx, c.p, c.out).Correct; got != c.want {
			t.Errorf("%s: correct %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCodeTests(t *testing.T) {
	if !sandbox.Probe().Network {
		t.Skipf("no network isolation on this machine: %s", sandbox.Probe().Detail)
	}
	task, err := Open(filepath.Join("testdata", "mbpp.jsonl"), Config{Mapping: mbpp, Seed: 1, ValFrac: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	probs, err := Read(filepath.Join("testdata", "mbpp.jsonl"), mbpp)
	if err != nil {
		t.Fatal(err)
	}
	rows := sampleRows(t, "mbpp.jsonl")
	fence := func(code string) string { return "Here:\n```python\n" + code + "\n```\n" }
	for i, p := range probs {
		ref := rows[i]["code"].(string)
		if v := task.Verify(context.Background(), p, fence("print('noise')\n"+ref)); !v.Correct {
			t.Errorf("%s: the reference solution fails: %s", p.ID, v.Reason)
		}
		if v := task.Verify(context.Background(), p, fence("def "+p.FnName+"(*a):\n    return None")); v.Correct {
			t.Errorf("%s: a wrong solution passes", p.ID)
		}
	}
	if v := task.Verify(context.Background(), probs[0], "no code"); v.Correct || v.Reason != "no fenced code block" {
		t.Errorf("no code block: %+v", v)
	}
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadErrors(t *testing.T) {
	cases := []struct {
		name, text string
		m          Mapping
		want       []string
	}{
		{"empty file", "\n\n", gsm8k, []string{"holds no problems"}},
		{"unreadable line", `{"question": "q", "answer": "#### 1"}` + "\n" + `{"question": "q2", "answ`, gsm8k, []string{"row 2 (line 2)", "not a JSON object"}},
		{"missing field", `{"question": "q", "answer": "#### 1"}` + "\n\n" + `{"question": "q2"}`, gsm8k, []string{"row 2 (line 3)", `field "answer" (answer): missing`, `"question"`}},
		{"wrong type", `{"question": ["q"], "answer": "#### 1"}`, gsm8k, []string{"row 1 (line 1)", `field "question" (problem): wrong type`}},
		{"no marker", `{"question": "q", "answer": "1"}`, gsm8k, []string{"row 1", `no "####" marker`}},
		{"numeric answer", `{"question": "q", "answer": 7}`, Mapping{Verifier: VerifyAnswer, Problem: "question", Answer: "answer"}, nil},
		{"tests wrong type", `{"text": "t", "task_id": 1, "entry_point": "f", "test_list": [1]}`, mbpp, []string{`field "test_list" (tests): wrong type`}},
		{"duplicate id", `{"text": "t", "task_id": 1, "entry_point": "f", "test_list": ["assert f()"]}` + "\n" + `{"text": "u", "task_id": 1, "entry_point": "f", "test_list": ["assert f()"]}`, mbpp, []string{"row 2", `id "1" repeats the id of row 1`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "data.jsonl", c.text)
			_, err := Read(path, c.m)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append([]string{path}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, err := Read(filepath.Join(t.TempDir(), "absent.jsonl"), gsm8k); err == nil || !strings.Contains(err.Error(), "absent.jsonl") {
		t.Errorf("absent file: %v", err)
	}
	if _, err := Read(writeFile(t, "data.csv", "x"), gsm8k); err == nil || !strings.Contains(err.Error(), "file.format") {
		t.Errorf("unknown extension: %v", err)
	}
}

func TestMappingCheck(t *testing.T) {
	cases := []struct {
		m    Mapping
		keys []string
	}{
		{gsm8k, nil},
		{math500, nil},
		{mbpp, nil},
		{Mapping{Verifier: "exact", Problem: "q"}, []string{"verifier"}},
		{Mapping{Verifier: VerifyAnswer}, []string{"problem", "answer"}},
		{Mapping{Verifier: VerifyBoxed, Problem: "q", Answer: "a", Tests: "t"}, []string{"tests"}},
		{Mapping{Verifier: VerifyCodeTests, Problem: "q", Answer: "a"}, []string{"tests", "answer"}},
		{Mapping{Format: "csv", Verifier: VerifyAnswer, Problem: "q", Answer: "a"}, []string{"format"}},
	}
	for _, c := range cases {
		var got []string
		for _, e := range c.m.Check() {
			got = append(got, e.Key)
		}
		if strings.Join(got, ",") != strings.Join(c.keys, ",") {
			t.Errorf("%+v: keys %v, want %v", c.m, got, c.keys)
		}
	}
}

// TestParquet reads the MATH-500 sample written as Parquet: the same
// problems as the JSONL file.
func TestParquet(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "problem", Type: arrow.BinaryTypes.String},
		{Name: "answer", Type: arrow.BinaryTypes.String},
		{Name: "level", Type: arrow.PrimitiveTypes.Int64},
		{Name: "unique_id", Type: arrow.BinaryTypes.String},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)},
	}, nil)
	rows := sampleRows(t, "math500.jsonl")
	for _, r := range rows {
		r["tags"] = []string{"a", "b"}
		delete(r, "solution")
		delete(r, "subject")
	}
	js, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(string(js)))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "math500.parquet")
	datasetstest.WriteParquet(t, path, rec, 3)
	got, err := Read(path, math500)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Read(filepath.Join("testdata", "math500.jsonl"), math500)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d problems, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Prompt != want[i].Prompt || got[i].Truth != want[i].Truth {
			t.Errorf("row %d: %+v, want %+v", i+1, got[i], want[i])
		}
	}
	// A list column read as tests, and a wrong type named with its row.
	m := Mapping{Verifier: VerifyCodeTests, Problem: "problem", Tests: "tags"}
	if ps, err := Read(path, m); err != nil || len(ps[0].Tests) != 2 {
		t.Errorf("list column as tests: %v", err)
	}
	m = Mapping{Verifier: VerifyAnswer, Problem: "tags", Answer: "answer"}
	if _, err := Read(path, m); err == nil || !strings.Contains(err.Error(), "row 1") || !strings.Contains(err.Error(), `field "tags" (problem): wrong type`) {
		t.Errorf("wrong type: %v", err)
	}
	// Level is numeric: accepted as an id.
	m = Mapping{Verifier: VerifyAnswer, ID: "level", Problem: "problem", Answer: "answer"}
	if _, err := Read(path, m); err == nil || !strings.Contains(err.Error(), "repeats the id") {
		t.Errorf("numeric ids repeat in the sample: %v", err)
	}
}

func TestTestProgram(t *testing.T) {
	prog, err := TestProgram("print(\"hi\")\ndef f():\n    return '\\n'\n", []datasets.Test{{Input: "assert f() == '\\n'"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`exec(compile("print(\"hi\")\ndef f():`, `"test1.py"`, passMarker} {
		if !strings.Contains(prog, w) {
			t.Errorf("program lacks %q:\n%s", w, prog)
		}
	}
}
