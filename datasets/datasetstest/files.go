package datasetstest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Schemas of the published files, for fixtures written by tests.
var (
	messageList = arrow.ListOf(arrow.StructOf(
		arrow.Field{Name: "content", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true}))
	rewardModel = arrow.StructOf(
		arrow.Field{Name: "ground_truth", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "style", Type: arrow.BinaryTypes.String, Nullable: true})

	// DAPOSchema is BytedTsinghua-SIA/DAPO-Math-17k's.
	DAPOSchema = arrow.NewSchema([]arrow.Field{
		{Name: "data_source", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "prompt", Type: messageList, Nullable: true},
		{Name: "ability", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "reward_model", Type: rewardModel, Nullable: true},
		{Name: "extra_info", Type: arrow.StructOf(arrow.Field{Name: "index", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	}, nil)
	// OpenR1Schema is open-r1/DAPO-Math-17k-Processed's (every config).
	OpenR1Schema = arrow.NewSchema([]arrow.Field{
		{Name: "prompt", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "solution", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "data_source", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "source_prompt", Type: messageList, Nullable: true},
		{Name: "ability", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "reward_model", Type: rewardModel, Nullable: true},
		{Name: "extra_info", Type: arrow.StructOf(arrow.Field{Name: "index", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), Nullable: true},
	}, nil)
	// DeepCoderSchema is agentica-org/DeepCoder-Preview-Dataset's (every
	// subset and split).
	DeepCoderSchema = arrow.NewSchema([]arrow.Field{
		{Name: "problem", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tests", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "starter_code", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "metadata", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
)

// MathRow is one row of a DAPO fixture: the whole user message and the
// ground truth.
type MathRow struct{ Prompt, Truth string }

// CodeRow is one row of a DeepCoder fixture.
type CodeRow struct{ Problem, Tests, Starter, Metadata string }

// WriteDAPO writes rows at path in DAPO-Math-17k's schema (index "uuid-i").
func WriteDAPO(t testing.TB, path string, rows []MathRow) {
	t.Helper()
	var out []map[string]any
	for i, r := range rows {
		out = append(out, map[string]any{
			"data_source":  "math_dapo",
			"prompt":       []map[string]any{{"content": r.Prompt, "role": "user"}},
			"ability":      "MATH",
			"reward_model": map[string]any{"ground_truth": r.Truth, "style": "rule-lapse"},
			"extra_info":   map[string]any{"index": fmt.Sprintf("uuid-%d", i)},
		})
	}
	writeJSON(t, path, DAPOSchema, out)
}

// WriteOpenR1 writes rows at path in open-r1's processed schema (index i).
func WriteOpenR1(t testing.TB, path string, rows []MathRow) {
	t.Helper()
	var out []map[string]any
	for i, r := range rows {
		out = append(out, map[string]any{
			"prompt":        r.Prompt,
			"solution":      r.Truth,
			"data_source":   "math_dapo",
			"source_prompt": []map[string]any{{"content": r.Prompt, "role": "user"}},
			"ability":       "MATH",
			"reward_model":  map[string]any{"ground_truth": r.Truth, "style": "rule-lapse"},
			"extra_info":    map[string]any{"index": i},
		})
	}
	writeJSON(t, path, OpenR1Schema, out)
}

// WriteDeepCoder writes rows at path in DeepCoder's shard schema, creating
// its folder.
func WriteDeepCoder(t testing.TB, path string, rows []CodeRow) {
	t.Helper()
	var out []map[string]any
	for _, r := range rows {
		out = append(out, map[string]any{"problem": r.Problem, "tests": r.Tests, "starter_code": r.Starter, "metadata": r.Metadata})
	}
	writeJSON(t, path, DeepCoderSchema, out)
}

// writeJSON writes JSON rows under sc as a Parquet file in row groups of 5.
func writeJSON(t testing.TB, path string, sc *arrow.Schema, rows []map[string]any) {
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
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	WriteParquet(t, path, rec, 5)
}
