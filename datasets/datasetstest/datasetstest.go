// Package datasetstest holds the checks shared by the tests of the
// generated task sources (synth-math, synth-code): problem ids, the size of
// the validation set, and its separation from the train stream; and
// writers of fixture files in the published schemas of the file sources
// (DAPO-Math-17k, its open-r1 processed variant, DeepCoder shards).
package datasetstest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/marlowlab/marlow/datasets"
)

// EachProblem calls check on train problems 0..n-1 of task, whose ids must
// be fmt.Sprintf(trainID, cursor), and then on every validation problem;
// the validation set must hold exactly size problems.
func EachProblem(t testing.TB, task datasets.Task, n int, trainID string, size int, check func(datasets.Problem)) {
	t.Helper()
	for i := 0; i < n; i++ {
		p, err := task.Train(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(trainID, i); p.ID != want {
			t.Fatalf("id %q want %q", p.ID, want)
		}
		check(p)
	}
	val, err := task.Validation()
	if err != nil {
		t.Fatal(err)
	}
	if len(val) != size {
		t.Fatalf("validation has %d problems, want %d", len(val), size)
	}
	for _, p := range val {
		check(p)
	}
}

// ValidationDisjoint checks that the validation problems of task have ids
// fmt.Sprintf(valID, k) and distinct prompts, and that none of train
// problems 0..n-1 has the prompt of a validation problem.
func ValidationDisjoint(t testing.TB, task datasets.Task, valID string, n int) {
	t.Helper()
	val, err := task.Validation()
	if err != nil {
		t.Fatal(err)
	}
	prompts := map[string]string{}
	for k, p := range val {
		if want := fmt.Sprintf(valID, k); p.ID != want {
			t.Fatalf("validation id %q want %q", p.ID, want)
		}
		if other, dup := prompts[p.Prompt]; dup {
			t.Fatalf("validation prompt %q repeated in %s and %s", p.Prompt, other, p.ID)
		}
		prompts[p.Prompt] = p.ID
	}
	for i := 0; i < n; i++ {
		p, err := task.Train(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		if id, clash := prompts[p.Prompt]; clash {
			t.Fatalf("train %s has the prompt of validation %s: %q", p.ID, id, p.Prompt)
		}
	}
}

// WriteParquet writes rec to path as a zstd Parquet file with the Arrow
// schema stored, in row groups of at most rowGroup rows (the writer's
// default when rowGroup <= 0), so readers can be made to cross row-group
// boundaries.
func WriteParquet(t testing.TB, path string, rec arrow.RecordBatch, rowGroup int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Zstd)}
	if rowGroup > 0 {
		opts = append(opts, parquet.WithMaxRowGroupLength(int64(rowGroup)))
	}
	w, err := pqarrow.NewFileWriter(rec.Schema(), f, parquet.NewWriterProperties(opts...), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Digest returns a SHA-256 over every field of train problems 0..n-1 and
// of the validation set of task, to compare problem sets byte for byte.
func Digest(t testing.TB, task datasets.Task, n int) string {
	t.Helper()
	h := sha256.New()
	write := func(p datasets.Problem) {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%v\x00%s\x00%s\x01", p.ID, p.Prompt, p.Truth, p.Solution, p.Tests, p.FnName, p.Starter)
	}
	for i := 0; i < n; i++ {
		p, err := task.Train(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		write(p)
	}
	val, err := task.Validation()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range val {
		write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}
