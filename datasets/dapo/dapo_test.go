package dapo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/marlowlab/marlow/datasets/datasetstest"
)

var (
	msgType    = arrow.StructOf(arrow.Field{Name: "content", Type: arrow.BinaryTypes.String, Nullable: true}, arrow.Field{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true})
	promptType = arrow.ListOf(msgType)
	rewardType = arrow.StructOf(arrow.Field{Name: "ground_truth", Type: arrow.BinaryTypes.String, Nullable: true}, arrow.Field{Name: "style", Type: arrow.BinaryTypes.String, Nullable: true})
)

func dapoSchema(extra arrow.DataType, more ...arrow.Field) *arrow.Schema {
	fs := []arrow.Field{
		{Name: "data_source", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "prompt", Type: promptType, Nullable: true},
		{Name: "ability", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "reward_model", Type: rewardType, Nullable: true},
		{Name: "extra_info", Type: extra, Nullable: true},
	}
	return arrow.NewSchema(append(fs, more...), nil)
}

var (
	dapoExtra = arrow.StructOf(arrow.Field{Name: "index", Type: arrow.BinaryTypes.String, Nullable: true})
	aimeExtra = arrow.StructOf(
		arrow.Field{Name: "index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "raw_problem", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "split", Type: arrow.Null, Nullable: true},
	)
)

// writeParquet writes JSON rows under schema as a zstd Parquet file with
// small row groups, so readers must cross row-group boundaries.
func writeParquet(t *testing.T, sc *arrow.Schema, rows []map[string]any) string {
	t.Helper()
	js, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(string(js)))
	if err != nil {
		t.Fatalf("build record: %v", err)
	}
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "data.parquet")
	datasetstest.WriteParquet(t, path, rec, 7)
	return path
}

func dapoRow(i int, prompt, truth string) map[string]any {
	return map[string]any{
		"data_source":  "math_dapo",
		"prompt":       []map[string]any{{"content": prompt, "role": "user"}},
		"ability":      "MATH",
		"reward_model": map[string]any{"ground_truth": truth, "style": "rule-lapse"},
		"extra_info":   map[string]any{"index": fmt.Sprintf("uuid-%d", i)},
	}
}

// dapoRows repeats n distinct prompts reps times, interleaved like the
// published file.
func dapoRows(n, reps int) []map[string]any {
	var rows []map[string]any
	for r := 0; r < reps; r++ {
		for i := 0; i < n; i++ {
			rows = append(rows, dapoRow(r*n+i, fmt.Sprintf("Solve problem %d. Remember to put your answer after \"Answer:\".", i), fmt.Sprint(i*7)))
		}
	}
	return rows
}

func TestOpenDAPO(t *testing.T) {
	path := writeParquet(t, dapoSchema(dapoExtra), dapoRows(40, 3))
	task, err := Open(path, Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := task.Stats()
	if st != (Stats{Variant: VariantDAPO, Rows: 120, Distinct: 40, Duplicates: 80, Bare: 40, Problems: 40}) {
		t.Fatalf("stats %+v", st)
	}
	val, _ := task.Validation()
	if task.TrainSize()+len(val) != 40 || len(val) == 0 || len(val) > 12 {
		t.Fatalf("split %d/%d", task.TrainSize(), len(val))
	}
	inVal := map[string]bool{}
	for _, p := range val {
		inVal[p.Prompt] = true
		if !strings.HasPrefix(p.ID, "dapo-math-17k/uuid-") {
			t.Fatalf("id %q", p.ID)
		}
	}
	// One epoch of the train stream visits every train problem once.
	seen := map[string]bool{}
	for i := 0; i < task.TrainSize(); i++ {
		p, err := task.Train(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		if seen[p.Prompt] || inVal[p.Prompt] {
			t.Fatalf("train %d repeats or leaks %q", i, p.Prompt)
		}
		seen[p.Prompt] = true
		if v := task.Verify(context.Background(), p, "work...\nAnswer: "+p.Truth); !v.Correct {
			t.Fatalf("truth rejected: %+v", v)
		}
	}
	// Same seed, reversed rows: same validation set.
	rows := dapoRows(40, 3)
	for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
		rows[i], rows[j] = rows[j], rows[i]
	}
	task2, err := Open(writeParquet(t, dapoSchema(dapoExtra), rows), Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	val2, _ := task2.Validation()
	if len(val2) != len(val) {
		t.Fatalf("row order changed the split: %d vs %d", len(val2), len(val))
	}
	for _, p := range val2 {
		if !inVal[p.Prompt] {
			t.Fatalf("row order changed the split: %q", p.Prompt)
		}
	}
	// A different seed gives a different split.
	task3, err := Open(path, Config{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	val3, _ := task3.Validation()
	same := len(val3) == len(val)
	for _, p := range val3 {
		same = same && inVal[p.Prompt]
	}
	if same {
		t.Fatal("seed does not change the split")
	}
	// Validation cap.
	capped, err := Open(path, Config{Seed: 1, ValSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	cv, _ := capped.Validation()
	if len(cv) != 2 || capped.TrainSize() != 38 {
		t.Fatalf("cap: %d val, %d train", len(cv), capped.TrainSize())
	}
}

func TestOpenConflicts(t *testing.T) {
	rows := []map[string]any{dapoRow(0, "P", "1"), dapoRow(1, "P", "2"), dapoRow(2, "Q", "3")}
	task, err := Open(writeParquet(t, dapoSchema(dapoExtra), rows), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if st := task.Stats(); st.Distinct != 2 || st.Conflicts != 1 || st.Duplicates != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestOpenAIME(t *testing.T) {
	var rows []map[string]any
	for r := 0; r < 2; r++ {
		for i := 0; i < 5; i++ {
			rows = append(rows, map[string]any{
				"data_source":       "math_dapo",
				"prompt":            []map[string]any{{"content": fmt.Sprintf("AIME %d", i), "role": "user"}},
				"ability":           "MATH",
				"reward_model":      map[string]any{"ground_truth": fmt.Sprint(100 + i), "style": "rule-lapse"},
				"extra_info":        map[string]any{"index": i, "raw_problem": fmt.Sprintf("raw %d", i), "split": nil},
				"__index_level_0__": r*5 + i,
			})
		}
	}
	sc := dapoSchema(aimeExtra, arrow.Field{Name: "__index_level_0__", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	task, err := Open(writeParquet(t, sc, rows), Config{AnswerMode: ModeBoxed})
	if err != nil {
		t.Fatal(err)
	}
	if task.Name() != VariantAIME || task.Stats().Distinct != 5 {
		t.Fatalf("name %s stats %+v", task.Name(), task.Stats())
	}
	val, _ := task.Validation()
	if len(val) != 5 || val[3].ID != "aime-2024/3" || val[3].Truth != "103" {
		t.Fatalf("validation %+v", val)
	}
	if _, err := task.Train(0); err == nil {
		t.Fatal("evaluation file has a train stream")
	}
	if v := task.Verify(context.Background(), val[0], `so \boxed{100}.`); !v.Correct {
		t.Fatalf("boxed mode: %+v", v)
	}
}

func TestOpenSchemaErrors(t *testing.T) {
	good := dapoSchema(dapoExtra)
	replace := func(name string, typ arrow.DataType) *arrow.Schema {
		fs := append([]arrow.Field(nil), good.Fields()...)
		for i := range fs {
			if fs[i].Name == name {
				fs[i].Type = typ
			}
		}
		return arrow.NewSchema(fs, nil)
	}
	drop := func(name string) *arrow.Schema {
		var fs []arrow.Field
		for _, f := range good.Fields() {
			if f.Name != name {
				fs = append(fs, f)
			}
		}
		return arrow.NewSchema(fs, nil)
	}
	intTruth := arrow.StructOf(arrow.Field{Name: "ground_truth", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, arrow.Field{Name: "style", Type: arrow.BinaryTypes.String, Nullable: true})
	cases := []struct {
		name   string
		schema *arrow.Schema
		want   []string
	}{
		{"prompt as string", replace("prompt", arrow.BinaryTypes.String), []string{`"prompt"`, "list<struct<content: string, role: string>>"}},
		{"ground truth int", replace("reward_model", intTruth), []string{`"reward_model"`, "ground_truth: string"}},
		{"index float", replace("extra_info", arrow.StructOf(arrow.Field{Name: "index", Type: arrow.PrimitiveTypes.Float64, Nullable: true})), []string{`"extra_info"`, "index: string"}},
		{"ability int", replace("ability", arrow.PrimitiveTypes.Int64), []string{`"ability"`, "expected string"}},
		{"missing data_source", drop("data_source"), []string{`missing column "data_source"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Build a one-row file with zero values of the schema.
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
}

func TestOpenBadInput(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing.parquet"), Config{}); err == nil {
		t.Error("missing file accepted")
	}
	garbage := filepath.Join(t.TempDir(), "garbage.parquet")
	if err := os.WriteFile(garbage, []byte("not parquet at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(garbage, Config{}); err == nil {
		t.Error("garbage accepted")
	}
	path := writeParquet(t, dapoSchema(dapoExtra), dapoRows(3, 1))
	for _, cfg := range []Config{{AnswerMode: "latex"}, {ValFrac: 1.5}, {ValSize: -1}} {
		if _, err := Open(path, cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	noUser := []map[string]any{dapoRow(0, "x", "1")}
	noUser[0]["prompt"] = []map[string]any{{"content": "sys", "role": "system"}}
	if _, err := Open(writeParquet(t, dapoSchema(dapoExtra), noUser), Config{}); err == nil || !strings.Contains(err.Error(), "row 0") {
		t.Errorf("prompt without user message: %v", err)
	}
}

// BenchmarkOpen measures streaming a file of 1000 distinct prompts repeated
// 20 times (the published file's shape, smaller).
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	rows := dapoRows(1000, 20)
	js, err := json.Marshal(rows)
	if err != nil {
		b.Fatal(err)
	}
	sc := dapoSchema(dapoExtra)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(string(js)))
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Release()
	path := filepath.Join(dir, "bench.parquet")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(sc, f, parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithMaxRowGroupLength(10000)), pqarrow.DefaultWriterProps())
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		task, err := Open(path, Config{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		if task.Stats().Rows != len(rows) {
			b.Fatal("row count")
		}
	}
	b.ReportMetric(float64(len(rows)*b.N)/b.Elapsed().Seconds(), "rows/s")
}
