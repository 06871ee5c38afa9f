package dapo

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/marlowlab/marlow/datasets/datasetstest"
)

// published is a prompt exactly as DAPO-Math-17k wraps its problems,
// written out here rather than built from the constants under test.
func published(problem string) string {
	return "Solve the following math problem step by step. The last line of your response should be of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n" +
		problem + "\n\nRemember to put your answer on its own line after \"Answer:\"."
}

func TestStripWrapper(t *testing.T) {
	const prob = "In triangle $ABC$, $AB = 3$. Find $a + b + c$."
	full := published(prob)
	cases := []struct {
		name, in, want string
		w              Wrapping
	}{
		{"published wrapper", full, prob, Stripped},
		{"multi-line problem", published("Line one.\n\nLine two: $x^2$."), "Line one.\n\nLine two: $x^2$.", Stripped},
		{"empty problem", published(""), "", Stripped},
		{"bare problem", prob, prob, Bare},
		{"empty prompt", "", "", Bare},
		{"no final period", strings.TrimSuffix(full, "."), strings.TrimSuffix(full, "."), NearMiss},
		{"trailing newline", full + "\n", full + "\n", NearMiss},
		{"leading space", " " + full, " " + full, NearMiss},
		{"one newline after prefix", strings.Replace(full, "problem.\n\n", "problem.\n", 1), strings.Replace(full, "problem.\n\n", "problem.\n", 1), NearMiss},
		{"upper-case $ANSWER", strings.ReplaceAll(full, "$Answer", "$ANSWER"), strings.ReplaceAll(full, "$Answer", "$ANSWER"), NearMiss},
		{"simple-evals suffix", strings.TrimSuffix(full, ".") + ", and you do not need to use a \\boxed command.", strings.TrimSuffix(full, ".") + ", and you do not need to use a \\boxed command.", NearMiss},
		{"prefix only", strings.TrimSuffix(full, "\n\nRemember to put your answer on its own line after \"Answer:\"."), strings.TrimSuffix(full, "\n\nRemember to put your answer on its own line after \"Answer:\"."), NearMiss},
		{"suffix only", prob + "\n\nRemember to put your answer on its own line after \"Answer:\".", prob + "\n\nRemember to put your answer on its own line after \"Answer:\".", NearMiss},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, w := StripWrapper(tc.in)
			if got != tc.want || w != tc.w {
				t.Fatalf("StripWrapper(%q) = %q, %v; want %q, %v", tc.in, got, w, tc.want, tc.w)
			}
		})
	}
}

func TestHasCJK(t *testing.T) {
	cases := []struct {
		s    string
		want bool
	}{
		{"Find the sum of all $x$.", false},
		{"已知函数 $f(x)$，求 $f(2)$。", true},
		{"Compute $x$，then stop。", false}, // full-width punctuation alone is not Chinese
		{"ひらがな and カタカナ", false},
		{"Extension A: \u3400", true},
		{"Compatibility: \uF900", true},
		{"Edge \u9FFF", true},
		{"Outside \uA000", false},
		{"Extension B \U00020000", false},
		{"", false},
	}
	for _, tc := range cases {
		if got := HasCJK(tc.s); got != tc.want {
			t.Errorf("HasCJK(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

// fixtureRow is one row of the original file, with whether its problem is
// Chinese stated by the fixture (not computed by the code under test).
type fixtureRow struct {
	content, truth string
	chinese        bool
}

// originalRows is a small DAPO-Math-17k: wrapped English and Chinese
// problems repeated and interleaved, one repeat with another ground truth,
// a near-miss wrapper, a bare prompt, the bare form of a wrapped problem,
// and English problems with full-width punctuation.
func originalRows() []fixtureRow {
	var distinct []fixtureRow
	for i := 0; i < 30; i++ {
		distinct = append(distinct, fixtureRow{published(fmt.Sprintf("Let $n = %d$. Find the remainder of $n^2$ mod 7.", i)), fmt.Sprint(i * i % 7), false})
	}
	for i := 0; i < 8; i++ {
		distinct = append(distinct, fixtureRow{published(fmt.Sprintf("已知 $x = %d$，求 $x+1$ 的值。", i)), fmt.Sprint(i + 1), true})
	}
	distinct = append(distinct,
		fixtureRow{published("Compute $2+2$，then add 1."), "5", false},
		fixtureRow{strings.TrimSuffix(published("Near miss: compute $3 \\cdot 3$."), "."), "9", false},
		fixtureRow{"A bare prompt: compute $10-1$.", "9", false},
		fixtureRow{published("Ext A \u3400 problem: compute 1."), "1", true},
	)
	var rows []fixtureRow
	for r := 0; r < 3; r++ {
		rows = append(rows, distinct...)
		// The bare form of a wrapped problem: a different prompt, the same
		// statement.
		rows = append(rows, fixtureRow{"Let $n = 4$. Find the remainder of $n^2$ mod 7.", "2", false})
	}
	// A later repeat with another ground truth (a conflict; first wins).
	rows = append(rows, fixtureRow{distinct[5].content, "999", false})
	return rows
}

func writeOriginal(t *testing.T, rows []fixtureRow) string {
	t.Helper()
	var out []datasetstest.MathRow
	for _, r := range rows {
		out = append(out, datasetstest.MathRow{Prompt: r.content, Truth: r.truth})
	}
	path := filepath.Join(t.TempDir(), "dapo-math-17k.parquet")
	datasetstest.WriteDAPO(t, path, out)
	return path
}

// writeOpenR1 derives the open-r1 processed file from the original rows
// the way open-r1's create_dataset.py describes it: the first message's
// content becomes prompt, the ground truth solution, rows with a repeated
// prompt are dropped (the first kept), and the config keeps all rows, the
// non-Chinese ones (en) or the Chinese ones (cn).
func writeOpenR1(t *testing.T, rows []fixtureRow, config string) string {
	t.Helper()
	seen := map[string]bool{}
	var out []datasetstest.MathRow
	for _, r := range rows {
		if seen[r.content] {
			continue
		}
		seen[r.content] = true
		if (config == "en" && r.chinese) || (config == "cn" && !r.chinese) {
			continue
		}
		out = append(out, datasetstest.MathRow{Prompt: r.content, Truth: r.truth})
	}
	path := filepath.Join(t.TempDir(), config, "train-00000-of-00001.parquet")
	datasetstest.WriteOpenR1(t, path, out)
	return path
}

// statements lists the (statement, truth) pairs of a task's validation
// set and of one epoch of its train stream, in order.
func statements(t *testing.T, task *Task) []string {
	t.Helper()
	var out []string
	val, err := task.Validation()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range val {
		out = append(out, "val\x00"+p.Prompt+"\x00"+p.Truth)
	}
	for i := 0; i < task.TrainSize(); i++ {
		p, err := task.Train(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, "train\x00"+p.Prompt+"\x00"+p.Truth)
	}
	return out
}

// TestOpenR1MatchesOriginal proves that the original file read with a
// language filter and open-r1's processed file of that config give the
// same problems, ground truths, split and train order.
func TestOpenR1MatchesOriginal(t *testing.T) {
	rows := originalRows()
	orig := writeOriginal(t, rows)
	for _, tc := range []struct {
		config, lang string
		problems     int
	}{
		{"en", LangEN, 33}, // 30 wrapped, the full-width one, the near miss, the bare prompt
		{"cn", LangCN, 9},  // 8 wrapped, the Extension A one
		{"all", LangAll, 42},
	} {
		t.Run(tc.config, func(t *testing.T) {
			cfg := Config{Seed: 7, Language: tc.lang, ValFrac: 0.2}
			a, err := Open(orig, cfg)
			if err != nil {
				t.Fatal(err)
			}
			processed := writeOpenR1(t, rows, tc.config)
			b, err := Open(processed, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if b.Stats().Variant != VariantOpenR1 || a.Stats().Variant != VariantDAPO {
				t.Fatalf("variants %q %q", a.Stats().Variant, b.Stats().Variant)
			}
			sa, sb := statements(t, a), statements(t, b)
			if len(sa) != tc.problems || a.Stats().Problems != tc.problems {
				t.Fatalf("%d problems (stats %d), want %d", len(sa), a.Stats().Problems, tc.problems)
			}
			if !reflect.DeepEqual(sa, sb) {
				t.Fatalf("original (%d) and open-r1 %s (%d) differ:\n%q\n%q", len(sa), tc.config, len(sb), sa, sb)
			}
			if a.Stats().Problems != b.Stats().Problems || a.Stats().Problems == 0 {
				t.Fatalf("problems %d vs %d", a.Stats().Problems, b.Stats().Problems)
			}
			// The processed file of a config needs no filter to give the same
			// set; reading it with the filter drops nothing.
			if tc.lang != LangAll {
				c, err := Open(processed, Config{Seed: 7, ValFrac: 0.2})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(statements(t, c), sb) || b.Stats().OtherLanguage != 0 {
					t.Fatalf("filter changed the %s file (dropped %d)", tc.config, b.Stats().OtherLanguage)
				}
			}
			for _, s := range sa {
				if strings.Contains(s, "Solve the following") && !strings.Contains(s, "Near miss") {
					t.Fatalf("wrapper left in %q", s)
				}
			}
		})
	}
}

func TestOpenOriginalStats(t *testing.T) {
	rows := originalRows()
	task, err := Open(writeOriginal(t, rows), Config{Seed: 1, Language: LangEN})
	if err != nil {
		t.Fatal(err)
	}
	// 42 distinct prompts; the bare "n = 4" prompt repeats the statement of
	// a wrapped one, so 42 distinct statements. Of them: 40 wrapped
	// (30 English, 8 Chinese, the full-width one, the Extension A one), the
	// near miss, the bare prompt. 9 Chinese statements are filtered out.
	want := Stats{Variant: VariantDAPO, Rows: len(rows), Distinct: 42, Duplicates: len(rows) - 42, Conflicts: 1,
		Stripped: 40, Bare: 1, NearMiss: 1, OtherLanguage: 9, Problems: 33}
	if got := task.Stats(); got != want {
		t.Fatalf("stats\n got %+v\nwant %+v", got, want)
	}
	if sk := task.Stats().Skipped(); !reflect.DeepEqual(sk, map[string]int{SkipOtherLanguage: 9}) {
		t.Fatalf("skipped %v", sk)
	}
	// The near miss passes through whole; the conflict keeps the first truth.
	found := false
	for _, s := range statements(t, task) {
		if strings.HasPrefix(s, "val\x00Solve the following") || strings.HasPrefix(s, "train\x00Solve the following") {
			found = strings.Contains(s, "Near miss") && strings.HasSuffix(s, "after \"Answer:\"\x009")
		}
		if strings.Contains(s, "Let $n = 5$.") && !strings.HasSuffix(s, "\x004") {
			t.Fatalf("conflict did not keep the first truth: %q", s)
		}
	}
	if !found {
		t.Fatal("near miss not passed through unchanged")
	}
	if _, err := Open(writeOriginal(t, rows[:8]), Config{Language: LangCN}); err == nil || !strings.Contains(err.Error(), "no problems left") {
		t.Fatalf("all filtered: %v", err)
	}
	if _, err := Open(writeOriginal(t, rows), Config{Language: "fr"}); err == nil {
		t.Fatal("unknown language accepted")
	}
}

func TestOpenR1SchemaErrors(t *testing.T) {
	replace := func(name string, typ arrow.DataType) *arrow.Schema {
		fs := append([]arrow.Field(nil), datasetstest.OpenR1Schema.Fields()...)
		for i := range fs {
			if fs[i].Name == name {
				fs[i].Type = typ
			}
		}
		return arrow.NewSchema(fs, nil)
	}
	drop := func(name string) *arrow.Schema {
		var fs []arrow.Field
		for _, f := range datasetstest.OpenR1Schema.Fields() {
			if f.Name != name {
				fs = append(fs, f)
			}
		}
		return arrow.NewSchema(fs, nil)
	}
	cases := []struct {
		name   string
		schema *arrow.Schema
		want   []string
	}{
		{"solution int", replace("solution", arrow.PrimitiveTypes.Int64), []string{`column "solution" has type int64, expected string`}},
		{"source_prompt string", replace("source_prompt", arrow.BinaryTypes.String), []string{`column "source_prompt"`, "list<struct<content: string, role: string>>"}},
		{"index float", replace("extra_info", arrow.StructOf(arrow.Field{Name: "index", Type: arrow.PrimitiveTypes.Float64, Nullable: true})), []string{`column "extra_info"`, "struct<index: int64>"}},
		{"prompt int", replace("prompt", arrow.PrimitiveTypes.Int64), []string{`column "prompt" has type int64`, "or string (open-r1 processed)"}},
		{"missing solution", drop("solution"), []string{`missing column "solution" (expected string)`}},
		{"missing source_prompt", drop("source_prompt"), []string{`missing column "source_prompt"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.parquet")
			bld := array.NewRecordBuilder(memory.DefaultAllocator, tc.schema)
			defer bld.Release()
			for _, fb := range bld.Fields() {
				fb.AppendNull()
			}
			rec := bld.NewRecordBatch()
			defer rec.Release()
			datasetstest.WriteParquet(t, path, rec, 0)
			_, err := Open(path, Config{})
			if err == nil {
				t.Fatal("want schema error")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
	// A row whose solution disagrees with its reward model is named.
	bad := []map[string]any{{
		"prompt": "p", "solution": "1", "data_source": "math_dapo",
		"source_prompt": []map[string]any{{"content": "p", "role": "user"}}, "ability": "MATH",
		"reward_model": map[string]any{"ground_truth": "2", "style": "rule-lapse"}, "extra_info": map[string]any{"index": 0},
	}}
	if _, err := Open(writeParquet(t, datasetstest.OpenR1Schema, bad), Config{}); err == nil || !strings.Contains(err.Error(), "row 0: solution \"1\" differs") {
		t.Fatalf("mismatched solution: %v", err)
	}
}
