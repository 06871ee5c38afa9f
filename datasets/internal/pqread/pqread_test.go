package pqread

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/marlowlab/marlow/datasets/datasetstest"
)

func writeInts(t *testing.T, n int) string {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "ints.parquet")
	datasetstest.WriteParquet(t, path, rec, 4)
	return path
}

func TestStream(t *testing.T) {
	path := writeInts(t, 10)
	accept := func(*arrow.Schema) error { return nil }
	var got []int64
	batches := 0
	err := Stream(path, 3, accept, func(rec arrow.RecordBatch) error {
		batches++
		if rec.NumRows() > 3 {
			t.Errorf("batch of %d rows, want at most 3", rec.NumRows())
		}
		got = append(got, rec.Column(0).(*array.Int64).Int64Values()...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || batches < 4 {
		t.Fatalf("%d values in %d batches, want 10 in at least 4", len(got), batches)
	}
	for i, v := range got {
		if v != int64(i) {
			t.Fatalf("value %d is %d: file order lost", i, v)
		}
	}

	stop := errors.New("stop")
	bad := filepath.Join(t.TempDir(), "bad.parquet")
	if err := os.WriteFile(bad, []byte("not parquet at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		path  string
		check func(*arrow.Schema) error
		each  func(arrow.RecordBatch) error
		want  string
		is    error
	}{
		{name: "missing file", path: filepath.Join(t.TempDir(), "absent.parquet"), check: accept, want: "open "},
		{name: "not parquet", path: bad, check: accept, want: bad + ": not a Parquet file"},
		{name: "schema refused", path: path, check: func(*arrow.Schema) error { return errors.New(`missing column "y"`) },
			want: path + `: missing column "y"`},
		{name: "each error as is", path: path, check: accept, each: func(arrow.RecordBatch) error { return stop }, is: stop},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			each := tc.each
			if each == nil {
				each = func(arrow.RecordBatch) error { t.Fatal("each called"); return nil }
			}
			err := Stream(tc.path, 3, tc.check, each)
			switch {
			case err == nil:
				t.Fatal("no error")
			case tc.is != nil && err != tc.is:
				t.Fatalf("err %v, want %v unwrapped", err, tc.is)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}
