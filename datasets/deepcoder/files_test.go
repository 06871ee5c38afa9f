package deepcoder

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/datasetstest"
)

// writeNamed writes rows in the published shard schema at dir/name.
func writeNamed(t *testing.T, dir, name string, rows []row) string {
	t.Helper()
	bld := array.NewRecordBuilder(memory.DefaultAllocator, shardSchema)
	defer bld.Release()
	for _, r := range rows {
		for k, v := range []string{r.problem, r.tests, r.starter, r.metadata} {
			bld.Field(k).(*array.StringBuilder).Append(v)
		}
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	datasetstest.WriteParquet(t, path, rec, 3)
	return path
}

func stdinRows(prefix string, n int) []row {
	var out []row
	for i := 0; i < n; i++ {
		out = append(out, row{fmt.Sprintf("%s %d", prefix, i), fmt.Sprintf(`[{"type": "stdin_stdout", "input": "%d\n", "output": "%d\n"}]`, i, i), "", "{}"})
	}
	return out
}

// publishedRoot lays out a dataset root like the published one, with
// two shards where the published subset has several.
func publishedRoot(t *testing.T) string {
	root := t.TempDir()
	writeNamed(t, filepath.Join(root, "lcbv5"), "train-00000-of-00002.parquet", stdinRows("lcb train a", 3))
	writeNamed(t, filepath.Join(root, "lcbv5"), "train-00001-of-00002.parquet", stdinRows("lcb train b", 3))
	writeNamed(t, filepath.Join(root, "lcbv5"), "test-00000-of-00001.parquet", stdinRows("lcb test", 4))
	writeNamed(t, filepath.Join(root, "primeintellect"), "train-00001-of-00002.parquet", stdinRows("pi b", 5))
	writeNamed(t, filepath.Join(root, "primeintellect"), "train-00000-of-00002.parquet", stdinRows("pi a", 5))
	writeNamed(t, filepath.Join(root, "taco"), "train-00000-of-00001.parquet", stdinRows("taco", 2))
	writeNamed(t, filepath.Join(root, "codeforces"), "test-00000-of-00001.parquet", stdinRows("cf", 2))
	return root
}

func TestShards(t *testing.T) {
	root := publishedRoot(t)
	rel := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			r, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(r))
		}
		return out
	}
	cases := []struct {
		name    string
		path    string
		subsets []string
		split   string
		want    []string
		err     string
	}{
		{"one subset train", root, []string{"primeintellect"}, SplitTrain,
			[]string{"primeintellect/train-00000-of-00002.parquet", "primeintellect/train-00001-of-00002.parquet"}, ""},
		{"published order", root, []string{"taco", "lcbv5"}, SplitTrain,
			[]string{"lcbv5/train-00000-of-00002.parquet", "lcbv5/train-00001-of-00002.parquet", "taco/train-00000-of-00001.parquet"}, ""},
		{"all train", root, nil, SplitTrain,
			[]string{"lcbv5/train-00000-of-00002.parquet", "lcbv5/train-00001-of-00002.parquet", "primeintellect/train-00000-of-00002.parquet", "primeintellect/train-00001-of-00002.parquet", "taco/train-00000-of-00001.parquet"}, ""},
		{"all test", root, nil, SplitTest, []string{"lcbv5/test-00000-of-00001.parquet", "codeforces/test-00000-of-00001.parquet"}, ""},
		{"subset folder", filepath.Join(root, "lcbv5"), nil, SplitTrain, []string{"lcbv5/train-00000-of-00002.parquet", "lcbv5/train-00001-of-00002.parquet"}, ""},
		{"subset folder test", filepath.Join(root, "lcbv5"), nil, SplitTest, []string{"lcbv5/test-00000-of-00001.parquet"}, ""},
		{"file", filepath.Join(root, "taco", "train-00000-of-00001.parquet"), nil, SplitTrain, []string{"taco/train-00000-of-00001.parquet"}, ""},
		{"no train shards", root, []string{"codeforces"}, SplitTrain, nil, "subset codeforces has no train-*.parquet shards"},
		{"no test shards", root, []string{"primeintellect"}, SplitTest, nil, "subset primeintellect has no test-*.parquet shards"},
		{"unknown subset", root, []string{"apps"}, SplitTrain, nil, `unknown subset "apps"`},
		{"subsets on a file", filepath.Join(root, "taco", "train-00000-of-00001.parquet"), []string{"taco"}, SplitTrain, nil, "is a file"},
		{"subsets on a plain folder", filepath.Join(root, "taco"), []string{"taco"}, SplitTrain, nil, "is not a dataset root"},
		{"missing", filepath.Join(root, "nope"), nil, SplitTrain, nil, "no such file"},
		{"plain folder without the split", filepath.Join(root, "codeforces"), nil, SplitTrain, nil, "holds no train-*.parquet shards"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Shards(tc.path, tc.subsets, tc.split)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rel(got), tc.want) {
				t.Fatalf("got %q\nwant %q", rel(got), tc.want)
			}
		})
	}
	// A folder of shards without split names: all of them.
	flat := t.TempDir()
	writeNamed(t, flat, "b.parquet", stdinRows("b", 1))
	writeNamed(t, flat, "a.parquet", stdinRows("a", 1))
	got, err := Shards(flat, nil, SplitTest)
	if err != nil || len(got) != 2 || filepath.Base(got[0]) != "a.parquet" {
		t.Fatalf("flat folder: %q %v", got, err)
	}
}

func TestLoadTestPaths(t *testing.T) {
	root := publishedRoot(t)
	// lcbv5 train repeats a test problem and one of its own (with other
	// tests: a conflict).
	extra := append(stdinRows("lcb test", 1), row{"lcb train a 0", `[{"input": "9", "output": "9"}]`, "", ""})
	writeNamed(t, filepath.Join(root, "lcbv5"), "train-00002-of-00002.parquet", extra)
	train, err := Shards(root, []string{"lcbv5"}, SplitTrain)
	if err != nil {
		t.Fatal(err)
	}
	test, err := Shards(root, []string{"lcbv5"}, SplitTest)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Seed: 5, TestPaths: test}
	set, err := Load(train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	prompts := func(ps []datasets.Problem) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Prompt)
		}
		return out
	}
	if want := []string{"lcb test 0", "lcb test 1", "lcb test 2", "lcb test 3"}; !reflect.DeepEqual(prompts(set.Val), want) {
		t.Fatalf("validation %q, want the test shard %q", prompts(set.Val), want)
	}
	if want := []string{"lcb train a 0", "lcb train a 1", "lcb train a 2", "lcb train b 0", "lcb train b 1", "lcb train b 2"}; !reflect.DeepEqual(prompts(set.Train), want) {
		t.Fatalf("train %q, want %q", prompts(set.Train), want)
	}
	st := set.Stats
	if st.Shards != 3 || st.TestShards != 1 || st.Rows != 8 || st.TestRows != 4 || st.Problems != 7 || st.TestProblems != 4 ||
		st.Duplicates != 1 || st.Conflicts != 1 ||
		!reflect.DeepEqual(st.Skipped, map[string]int{SkipInTest: 1}) {
		t.Fatalf("stats %+v", st)
	}
	if set.Val[2].ID != "lcbv5/test-00000-of-00001#2" {
		t.Fatalf("test id %q", set.Val[2].ID)
	}
	// The cap keeps a seed-keyed subset of the test problems, in file order,
	// and never moves test problems into train.
	cfg.ValSize = 2
	capped, err := Load(train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(capped.Val) != 2 || len(capped.Train) != 6 {
		t.Fatalf("capped: %d val %d train", len(capped.Val), len(capped.Train))
	}
	again, _ := Load(train, cfg)
	if !reflect.DeepEqual(again.Val, capped.Val) || !reflect.DeepEqual(again.Train, capped.Train) {
		t.Fatal("load not deterministic")
	}
	if _, err := Load(train, Config{TestPaths: test, EvalOnly: true}); err == nil {
		t.Fatal("EvalOnly with TestPaths accepted")
	}
	// Without test paths the split is carved from the train shards.
	pi, _ := Shards(root, []string{"primeintellect"}, SplitTrain)
	carved, err := Load(pi, Config{Seed: 5, ValFrac: 0.5, ValSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(carved.Val) != 3 || len(carved.Train) != 7 {
		t.Fatalf("carved: %d val %d train", len(carved.Val), len(carved.Train))
	}
}
