package inspect

import (
	"bytes"
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
	"github.com/marlowlab/marlow/datasets/dapo"
	"github.com/marlowlab/marlow/datasets/datasetstest"
	"github.com/marlowlab/marlow/datasets/deepcoder"
)

func wrap(problem string) string { return dapo.WrapperPrefix + problem + dapo.WrapperSuffix }

// mathRows: 12 English and 3 Chinese wrapped problems, each twice, one
// conflicting repeat, a near miss and a bare prompt.
func mathRows() []datasetstest.MathRow {
	var distinct []datasetstest.MathRow
	for i := 0; i < 12; i++ {
		distinct = append(distinct, datasetstest.MathRow{Prompt: wrap(fmt.Sprintf("Compute $%d + %d$.", i, i)), Truth: fmt.Sprint(2 * i)})
	}
	for i := 0; i < 3; i++ {
		distinct = append(distinct, datasetstest.MathRow{Prompt: wrap(fmt.Sprintf("计算 $%d + 1$。", i)), Truth: fmt.Sprint(i + 1)})
	}
	distinct = append(distinct,
		datasetstest.MathRow{Prompt: wrap("Near miss $1+1$.") + "\n", Truth: "2"},
		datasetstest.MathRow{Prompt: "Bare: compute $3+3$.", Truth: "6"})
	rows := append(append([]datasetstest.MathRow(nil), distinct...), distinct...)
	return append(rows, datasetstest.MathRow{Prompt: distinct[0].Prompt, Truth: "7"})
}

func TestInspectDAPO(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "dapo-math-17k.parquet")
	datasetstest.WriteDAPO(t, orig, mathRows())
	opt := DefaultOptions()
	opt.Language = dapo.LangEN
	opt.ValFrac = 0.3
	r, err := Inspect(orig, opt)
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != SourceDAPO || r.Variant != dapo.VariantDAPO || r.Rows != 35 || r.Distinct != 17 || r.Duplicates != 18 || r.Conflicts != 1 ||
		*r.Wrapper != (Wrapper{Stripped: 15, Bare: 1, NearMiss: 1}) || !reflect.DeepEqual(r.Skipped, map[string]int{dapo.SkipOtherLanguage: 3}) ||
		r.Train+r.Val != 14 || r.Val == 0 {
		t.Fatalf("report %+v wrapper %+v", r, r.Wrapper)
	}
	if len(r.Samples) != 2 || r.Samples[0].Where != "train cursor 0" || r.Samples[1].Where != "validation 0" {
		t.Fatalf("samples %+v", r.Samples)
	}
	var out bytes.Buffer
	if err := r.Write(&out, func(p datasets.Problem) string { return "[user]\n" + p.Prompt }); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"source:      dapo-math (variant dapo-math-17k)",
		"rows:        35\n",
		"distinct:    17 problem statements\n",
		"duplicates:  18 rows",
		"conflicts:   1 of them differ from the first in their ground truth",
		"wrapper:     15 stripped, 1 without it, 1 near misses",
		"skipped:     3\n",
		"3  not in the chosen language",
		fmt.Sprintf("split:       train %d, validation %d (split_seed 1, val_size 200, val_frac 0.3, language en)", r.Train, r.Val),
		"sample (train cursor 0): dapo-math-17k/uuid-",
		"  | [user]\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Solve the following math problem") && !strings.Contains(text, "Near miss") {
		t.Errorf("a sample shows the wrapper:\n%s", text)
	}

	// The open-r1 en file of the same data: same split sizes, no
	// duplicates, nothing filtered.
	seen := map[string]bool{}
	var en []datasetstest.MathRow
	for _, row := range mathRows() {
		if seen[row.Prompt] || strings.Contains(row.Prompt, "计算") {
			continue
		}
		seen[row.Prompt] = true
		en = append(en, row)
	}
	processed := filepath.Join(dir, "en", "train-00000-of-00001.parquet")
	datasetstest.WriteOpenR1(t, processed, en)
	if _, err := Inspect(filepath.Dir(processed), opt); err == nil || !strings.Contains(err.Error(), "is a folder of DAPO files; dapo-math reads one file, e.g. "+processed) {
		t.Fatalf("DAPO folder: %v", err)
	}
	r2, err := Inspect(processed, opt)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Variant != dapo.VariantOpenR1 || r2.Rows != 14 || r2.Distinct != 14 || r2.Duplicates != 0 || len(r2.Skipped) != 0 ||
		r2.Train != r.Train || r2.Val != r.Val || r2.Samples[0].Problem.Prompt != r.Samples[0].Problem.Prompt {
		t.Fatalf("open-r1 report %+v", r2)
	}
}

func TestInspectDeepCoder(t *testing.T) {
	root := t.TempDir()
	stdin := func(prefix string, n int) []datasetstest.CodeRow {
		var out []datasetstest.CodeRow
		for i := 0; i < n; i++ {
			out = append(out, datasetstest.CodeRow{Problem: fmt.Sprintf("%s %d", prefix, i), Tests: `[{"type": "stdin_stdout", "input": "1\n", "output": "1\n"}]`, Metadata: "{}"})
		}
		return out
	}
	pi := append(stdin("pi", 12), datasetstest.CodeRow{Problem: "pi 0", Tests: `[{"type": "stdin_stdout", "input": "2\n", "output": "2\n"}]`},
		datasetstest.CodeRow{Problem: "broken", Tests: `[{"type": "stdin_stdout"`})
	datasetstest.WriteDeepCoder(t, filepath.Join(root, "primeintellect", "train-00000-of-00001.parquet"), pi)
	datasetstest.WriteDeepCoder(t, filepath.Join(root, "lcbv5", "train-00000-of-00001.parquet"), stdin("lcb", 4))
	datasetstest.WriteDeepCoder(t, filepath.Join(root, "lcbv5", "test-00000-of-00001.parquet"), stdin("lcb test", 3))
	opt := DefaultOptions()
	opt.Subsets = []string{"primeintellect"}
	opt.ValFrac, opt.ValSize = 0.5, 4
	r, err := Inspect(root, opt)
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != SourceDeepCoder || len(r.Files) != 1 || r.Rows != 14 || r.Distinct != 12 || r.Duplicates != 1 || r.Conflicts != 1 ||
		!reflect.DeepEqual(r.Skipped, map[string]int{deepcoder.SkipBadJSON: 1}) || r.Val != 4 || r.Train != 8 || len(r.Samples) != 2 {
		t.Fatalf("report %+v", r)
	}
	var out bytes.Buffer
	if err := r.Write(&out, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"source:      deepcoder (variant shards)",
		"primeintellect/train-00000-of-00001.parquet",
		"rows:        14\n",
		"distinct:    12 problem statements\n",
		"conflicts:   1 of them differ from the first in their tests",
		"1  tests not valid JSON",
		"split:       train 8, validation 4 (split_seed 1, val_size 4, val_frac 0.5, subsets primeintellect)",
		"sample (train cursor 0): primeintellect/train-00000-of-00001#",
		", 1 stdin tests\n  | pi ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// lcbv5 with its test shards as the validation set.
	opt = DefaultOptions()
	opt.Subsets, opt.TestPath = []string{"lcbv5"}, root
	r, err = Inspect(root, opt)
	if err != nil {
		t.Fatal(err)
	}
	if r.Train != 4 || r.Val != 3 || r.TestRows != 3 || len(r.TestFiles) != 1 || r.Samples[1].Problem.Prompt != "lcb test 0" {
		t.Fatalf("test-file report %+v", r)
	}
	out.Reset()
	if err := r.Write(&out, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "split:       train 4, validation 3 (split_seed 1, val_size 200, validation = the test files, subsets lcbv5)") {
		t.Errorf("output:\n%s", out.String())
	}
	// A shard file is detected as DeepCoder.
	if src, err := Detect(filepath.Join(root, "lcbv5", "test-00000-of-00001.parquet")); err != nil || src != SourceDeepCoder {
		t.Fatalf("detect shard: %q %v", src, err)
	}
}

func TestInspectWrongFile(t *testing.T) {
	dir := t.TempDir()
	// A DAPO file whose ground truth is an integer, read as dapo-math.
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "data_source", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "prompt", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "solution", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "ability", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "reward_model", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	bad := writeNulls(t, filepath.Join(dir, "bad.parquet"), sc)
	if _, err := Inspect(bad, DefaultOptions()); err == nil || !strings.Contains(err.Error(), `column "solution" has type int64, expected string`) {
		t.Fatalf("wrong type: %v", err)
	}
	// A file of neither source.
	other := writeNulls(t, filepath.Join(dir, "other.parquet"), arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true}}, nil))
	if _, err := Inspect(other, DefaultOptions()); err == nil || !strings.Contains(err.Error(), `column "reward_model"`) || !strings.Contains(err.Error(), "its columns: text") {
		t.Fatalf("unknown file: %v", err)
	}
	// Named as DeepCoder, the reader names the missing column.
	opt := DefaultOptions()
	opt.Source = SourceDeepCoder
	if _, err := Inspect(other, opt); err == nil || !strings.Contains(err.Error(), `missing column "problem" (expected string)`) {
		t.Fatalf("deepcoder on other: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.parquet"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(filepath.Join(dir, "junk.parquet"), DefaultOptions()); err == nil {
		t.Fatal("junk accepted")
	}
	opt = DefaultOptions()
	opt.Source = "apps"
	if _, err := Inspect(bad, opt); err == nil || !strings.Contains(err.Error(), `unknown source "apps"`) {
		t.Fatalf("unknown source: %v", err)
	}
}

func writeNulls(t *testing.T, path string, sc *arrow.Schema) string {
	t.Helper()
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	for _, fb := range bld.Fields() {
		fb.AppendNull()
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	datasetstest.WriteParquet(t, path, rec, 0)
	return path
}
