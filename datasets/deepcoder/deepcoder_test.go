package deepcoder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/datasetstest"
)

type row struct{ problem, tests, starter, metadata string }

var shardSchema = arrow.NewSchema([]arrow.Field{
	{Name: "problem", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "tests", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "starter_code", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "metadata", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// writeShard writes rows as a Parquet shard at dir/subset/train.parquet
// with row groups of 3 rows.
func writeShard(t *testing.T, dir, subset string, sc *arrow.Schema, rows []row) string {
	t.Helper()
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	for _, r := range rows {
		for k, v := range []string{r.problem, r.tests, r.starter, r.metadata} {
			switch b := bld.Field(k).(type) {
			case *array.StringBuilder:
				b.Append(v)
			case *array.Int64Builder:
				b.Append(int64(len(v)))
			}
		}
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	if err := os.MkdirAll(filepath.Join(dir, subset), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, subset, "train.parquet")
	datasetstest.WriteParquet(t, path, rec, 3)
	return path
}

func TestOpenShards(t *testing.T) {
	testVerifier(t) // skips where the sandbox cannot run
	dir := t.TempDir()
	big := `[{"input": "` + strings.Repeat("1 ", 600) + `", "output": "x"}]`
	var lcb, pi, taco, cf []row
	for i := 0; i < 5; i++ {
		lcb = append(lcb, row{fmt.Sprintf("lcb %d", i), `[{"input": "1\n2", "output": "3", "testtype": "functional"}]`, "class Solution:\n    def add(self, a, b):\n        pass\n", `{"func_name": "add"}`})
		pi = append(pi, row{fmt.Sprintf("pi %d", i), `[{"type": "stdin_stdout", "input": "1\n", "output": "1\n"}]`, "", "{}"})
		taco = append(taco, row{fmt.Sprintf("taco %d", i), `{"inputs": [[1, 2]], "outputs": [[3]], "fn_name": "add"}`, "def add(a, b):\n", ""})
		cf = append(cf, row{fmt.Sprintf("cf %d", i), `[{"input": "5\n", "output": "5\n"}]`, "", ""})
	}
	// Rows that must be skipped, one per reason.
	lcb = append(lcb, row{"no fn", `[{"input": "1", "output": "1", "testtype": "functional"}]`, "", "{}"})
	pi = append(pi, row{"bad type", `[{"type": "function_call", "input": "1", "output": "1"}]`, "", ""})
	taco = append(taco, row{"bad json", `{"inputs": [`, "", ""})
	cf = append(cf, row{"too big", big, "", ""}, row{"empty", `[]`, "", ""}, row{"bad meta", `[{"input": "", "output": ""}]`, "", "{"})
	paths := []string{
		writeShard(t, dir, "lcbv5", shardSchema, lcb),
		writeShard(t, dir, "primeintellect", shardSchema, pi),
		writeShard(t, dir, "taco", shardSchema, taco),
		writeShard(t, dir, "codeforces", shardSchema, cf),
	}
	var logged []string
	cfg := Config{Seed: 3, MaxTestBytes: 1000, Verifier: verInst.cfg, Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }}
	task, err := Open(paths, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantSkips := map[string]int{SkipNoFnName: 1, SkipUnsupported: 1, SkipBadJSON: 1, SkipTooLarge: 1, SkipNoTests: 1, SkipBadMetadata: 1}
	if got := task.Skipped(); !reflect.DeepEqual(got, wantSkips) {
		t.Fatalf("skips %v, want %v", got, wantSkips)
	}
	if len(logged) != 6 || !strings.Contains(strings.Join(logged, "\n"), "codeforces/train#5: tests too large") {
		t.Fatalf("log lines %q", logged)
	}
	val, _ := task.Validation()
	if task.TrainSize()+len(val) != 20 {
		t.Fatalf("%d train + %d val, want 20", task.TrainSize(), len(val))
	}
	all := append([]datasets.Problem(nil), val...)
	for i := 0; i < task.TrainSize(); i++ {
		p, err := task.Train(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p)
	}
	byPrompt := map[string]datasets.Problem{}
	for _, p := range all {
		byPrompt[p.Prompt] = p
	}
	want := map[string]datasets.Problem{
		"lcb 0":  {ID: "lcbv5/train#0", Prompt: "lcb 0", Truth: "1 functional tests", FnName: "add", Starter: "class Solution:\n    def add(self, a, b):\n        pass\n", Tests: []datasets.Test{{Input: "1\n2", Output: "3", Functional: true}}},
		"pi 2":   {ID: "primeintellect/train#2", Prompt: "pi 2", Truth: "1 stdin tests", Tests: []datasets.Test{{Input: "1\n", Output: "1\n"}}},
		"taco 4": {ID: "taco/train#4", Prompt: "taco 4", Truth: "1 functional tests", FnName: "add", Starter: "def add(a, b):\n", Tests: []datasets.Test{{Input: "1\n2", Output: "[3]", Functional: true}}},
		"cf 1":   {ID: "codeforces/train#1", Prompt: "cf 1", Truth: "1 stdin tests", Tests: []datasets.Test{{Input: "5\n", Output: "5\n"}}},
	}
	for k, w := range want {
		if got := byPrompt[k]; !reflect.DeepEqual(got, w) {
			t.Errorf("problem %q:\n got %+v\nwant %+v", k, got, w)
		}
	}
	// The task verifies through the sandbox.
	p := byPrompt["taco 4"]
	if v := task.Verify(context.Background(), p, fence("def add(a, b):\n    return a + b\n")); !v.Correct {
		t.Fatalf("taco functional: %s", v.Reason)
	}
	// Same inputs and seed give the same split; EvalOnly puts all in val.
	task2, err := Open(paths, cfg)
	if err != nil {
		t.Fatal(err)
	}
	val2, _ := task2.Validation()
	if !reflect.DeepEqual(val, val2) {
		t.Fatal("split not deterministic")
	}
	cfg.EvalOnly = true
	ev, err := Open(paths, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if vs, _ := ev.Validation(); len(vs) != 20 || ev.TrainSize() != 0 {
		t.Fatalf("eval only: %d val %d train", len(vs), ev.TrainSize())
	}
	if _, err := ev.Train(0); err == nil {
		t.Fatal("eval-only task has a train stream")
	}
}

func TestOpenShardErrors(t *testing.T) {
	testVerifier(t)
	dir := t.TempDir()
	badSchema := arrow.NewSchema([]arrow.Field{
		{Name: "problem", Type: arrow.BinaryTypes.String},
		{Name: "tests", Type: arrow.PrimitiveTypes.Int64},
		{Name: "starter_code", Type: arrow.BinaryTypes.String},
		{Name: "metadata", Type: arrow.BinaryTypes.String},
	}, nil)
	path := writeShard(t, dir, "bad", badSchema, []row{{"p", "[]", "", ""}})
	_, err := Open([]string{path}, Config{Verifier: verInst.cfg})
	if err == nil || !strings.Contains(err.Error(), `column "tests" has type int64, expected string`) {
		t.Fatalf("wrong-type error: %v", err)
	}
	noMeta := arrow.NewSchema(shardSchema.Fields()[:3], nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, noMeta)
	defer bld.Release()
	rec := bld.NewRecordBatch()
	defer rec.Release()
	p2 := filepath.Join(dir, "nometa.parquet")
	datasetstest.WriteParquet(t, p2, rec, 0)
	if _, err := Open([]string{p2}, Config{Verifier: verInst.cfg}); err == nil || !strings.Contains(err.Error(), `missing column "metadata"`) {
		t.Fatalf("missing-column error: %v", err)
	}
	for _, cfg := range []Config{{ValFrac: -1}, {ValSize: -1}, {MaxTestBytes: -5}} {
		cfg.Verifier = verInst.cfg
		if _, err := Open([]string{path}, cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	if _, err := Open(nil, Config{}); err == nil {
		t.Error("no paths accepted")
	}
}

func TestParseTests(t *testing.T) {
	cases := []struct {
		name   string
		raw    string
		tests  []datasets.Test
		fn     string
		reason string
	}{
		{"lcb stdin", `[{"input":"1","output":"2","testtype":"stdin"}]`, []datasets.Test{{Input: "1", Output: "2"}}, "", ""},
		{"lcb functional", `[{"input":"[1]\n2","output":"3","testtype":"functional"}]`, []datasets.Test{{Input: "[1]\n2", Output: "3", Functional: true}}, "", ""},
		{"lcb unknown testtype", `[{"input":"1","output":"2","testtype":"interactive"}]`, nil, "", SkipUnsupported},
		{"primeintellect", `[{"type":"stdin_stdout","input":"a","output":"b"}]`, []datasets.Test{{Input: "a", Output: "b"}}, "", ""},
		{"codeforces", `[{"input":"a","output":"b"},{"input":"c","output":"d"}]`, []datasets.Test{{Input: "a", Output: "b"}, {Input: "c", Output: "d"}}, "", ""},
		{"taco stdin", `{"inputs":["1\n"],"outputs":["2\n"]}`, []datasets.Test{{Input: "1\n", Output: "2\n"}}, "", ""},
		{"taco stdin lines", `{"inputs":[["1","2"]],"outputs":[["3"]]}`, []datasets.Test{{Input: "1\n2", Output: "3"}}, "", ""},
		{"taco functional", `{"inputs":[[1, "a", [2, 3]]],"outputs":[[true]],"fn_name":"f"}`, []datasets.Test{{Input: "1\n\"a\"\n[2,3]", Output: "[true]", Functional: true}}, "f", ""},
		{"taco null fn", `{"inputs":["x"],"outputs":["y"],"fn_name":null}`, []datasets.Test{{Input: "x", Output: "y"}}, "", ""},
		{"taco length mismatch", `{"inputs":["x"],"outputs":[]}`, nil, "", SkipBadShape},
		{"taco functional args not list", `{"inputs":[1],"outputs":[1],"fn_name":"f"}`, nil, "", SkipBadShape},
		{"empty list", `[]`, nil, "", SkipNoTests},
		{"empty taco", `{"inputs":[],"outputs":[]}`, nil, "", SkipNoTests},
		{"blank", `  `, nil, "", SkipNoTests},
		{"truncated", `[{"input":`, nil, "", SkipBadJSON},
		{"scalar", `42`, nil, "", SkipBadShape},
		{"garbage", `hello`, nil, "", SkipBadJSON},
		{"missing output", `[{"input":"a"}]`, nil, "", SkipBadShape},
		{"numeric input", `[{"input":1,"output":"b"}]`, nil, "", SkipBadShape},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tests, fn, reason := ParseTests([]byte(tc.raw))
			if reason != tc.reason || fn != tc.fn || !reflect.DeepEqual(tests, tc.tests) {
				t.Fatalf("got %+v %q %q; want %+v %q %q", tests, fn, reason, tc.tests, tc.fn, tc.reason)
			}
		})
	}
}

func TestOutputsMatch(t *testing.T) {
	cases := []struct {
		got, want string
		ok        bool
	}{
		{"7\n", "7\n", true},
		{"7", "7\n", true},
		{"  7  \n\n\n", "7", true},
		{"1 2\r\n3\r\n", "1 2\n3\n", true},
		{"1 2 3\n", "1\n2\n3\n", true}, // token fallback ignores layout
		{"2.3333333333\n", "2.333333\n", true},
		{"2.34\n", "2.333333\n", false},
		{"1e9", "1000000000", true},
		{"YES", "yes", false},
		{"1 2", "1 2 3", false},
		{"", "", true},
		{"", "0", false},
		{"nan", "nan", true},
		{"nan", "NaN", false},
		{"inf", "1e400", false}, // out of float64 range: not a number
		{"-0", "0", true},
		{"0.0000001", "0", true},
		{"0.00001", "0", false},
	}
	for _, tc := range cases {
		if got := OutputsMatch(tc.got, tc.want); got != tc.ok {
			t.Errorf("OutputsMatch(%q, %q) = %v, want %v", tc.got, tc.want, got, tc.ok)
		}
	}
}

func TestJSONEqual(t *testing.T) {
	cases := []struct {
		got, want string
		ok        bool
	}{
		{"3", "3", true},
		{"3", "3.0", true},
		{"3", "4", false},
		{"18446744073709551617", "18446744073709551616", false},
		{"0.1", "0.10000000001", true},
		{`"a"`, `"a"`, true},
		{`"a"`, `"b"`, false},
		{"[1, 2]", "[1,2]", true},
		{"[1, 2]", "[2, 1]", false},
		{"3", "[3]", true}, // TACO wraps expected values in a list
		{"[3]", "[[3]]", true},
		{"[3]", "3", false},
		{`{"a": 1}`, `{"a":1}`, true},
		{`{"a": 1}`, `{"a":1,"b":2}`, false},
		{"true", "true", true},
		{"true", "1", false},
		{"null", "null", true},
		{"", "1", false},
		{"1 2", "1", false},
	}
	for _, tc := range cases {
		if got := JSONEqual(tc.got, tc.want); got != tc.ok {
			t.Errorf("JSONEqual(%q, %q) = %v, want %v", tc.got, tc.want, got, tc.ok)
		}
	}
}

func TestExtractCode(t *testing.T) {
	cases := []struct {
		name, out, code, lang string
		ok                    bool
	}{
		{"single", "x\n```python\nprint(1)\n```\ny", "print(1)\n", "python", true},
		{"last wins", "```python\na\n```\n```py\nb\n```", "b\n", "py", true},
		{"no lang", "```\nc\n```", "c\n", "", true},
		{"indented fence", "  ```python\nd\n  ```", "d\n", "python", true},
		{"unclosed last", "```python\na\n```\n```python\nb", "a\n", "python", true},
		{"none", "just text", "", "", false},
		{"only open", "```python\nx", "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, lang, ok := ExtractCode(tc.out)
			if code != tc.code || lang != tc.lang || ok != tc.ok {
				t.Fatalf("got %q %q %v", code, lang, ok)
			}
		})
	}
}
