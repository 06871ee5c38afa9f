package runlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// parquetWith writes rows of the steps table under a schema whose metadata
// is replaced by meta.
func parquetWith(t *testing.T, meta map[string]string) []byte {
	t.Helper()
	rec := stepsDef.record(genSteps("r", 2))
	defer rec.Release()
	md := arrow.MetadataFrom(meta)
	sc := arrow.NewSchema(rec.Schema().Fields(), &md)
	out := array.NewRecordBatch(sc, rec.Columns(), rec.NumRows())
	defer out.Release()
	var buf bytes.Buffer
	tbl := array.NewTableFromRecords(sc, []arrow.RecordBatch{out})
	defer tbl.Release()
	if err := pqarrow.WriteTable(tbl, &buf, 1024, writerProps(stepsDef.info().cols), pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// foreignParquet is a plain Parquet file that is not a run table.
func foreignParquet(t *testing.T) []byte {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(sc, &buf, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCorruptFiles(t *testing.T) {
	const seg = "steps/000003.parquet"
	edit := func(name string, f func([]byte) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			p := filepath.Join(dir, filepath.FromSlash(name))
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	replace := func(name string, data func(t *testing.T) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), data(t), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name   string
		mutate func(t *testing.T, dir string)
		want   error
		file   string // path the problem names, relative to the run
		text   string // in the problem's message
	}{
		{"truncated footer", edit(seg, func(b []byte) []byte { return b[:len(b)-10] }), ErrTruncated, seg, "trailing magic"},
		{"cut in half", edit(seg, func(b []byte) []byte { return b[:len(b)/2] }), ErrTruncated, seg, "truncated"},
		{"empty file", edit(seg, func(b []byte) []byte { return nil }), ErrTruncated, seg, "0 bytes"},
		{"footer length too big", edit(seg, func(b []byte) []byte {
			b = bytes.Clone(b)
			copy(b[len(b)-8:], []byte{0xff, 0xff, 0xff, 0x7f})
			return b
		}), ErrTruncated, seg, "footer claims"},
		{"wrong magic", edit(seg, func(b []byte) []byte { return append([]byte("PK\x03\x04"), b[4:]...) }), ErrBadMagic, seg, "wrong magic"},
		{"garbled footer", edit(seg, func(b []byte) []byte {
			b = bytes.Clone(b)
			for i := len(b) - 60; i < len(b)-8; i++ {
				b[i] = 0xee
			}
			return b
		}), ErrCorrupt, seg, "corrupt"},
		{"foreign schema", replace(seg, foreignParquet), ErrForeignSchema, seg, "marlow.schema_version"},
		{"other table's file", func(t *testing.T, dir string) {
			data, err := os.ReadFile(filepath.Join(dir, "evals", "000003.parquet"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(seg)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, ErrForeignSchema, seg, `table "evals" in a steps folder`},
		{"future version", replace(seg, func(t *testing.T) []byte {
			return parquetWith(t, map[string]string{MetaSchemaVersion: "9", MetaTable: TableSteps})
		}), ErrSchemaVersion, seg, "version 9"},
		{"missing manifest", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, ManifestFile)); err != nil {
				t.Fatal(err)
			}
		}, ErrMissingManifest, "", "missing manifest"},
		{"bad manifest", replace(ManifestFile, func(*testing.T) []byte { return []byte(`{"run_id": "r", `) }), ErrBadManifest, ManifestFile, "unreadable manifest"},
		{"unknown manifest key", replace(ManifestFile, func(*testing.T) []byte {
			return []byte(`{"schema_version": 1, "run_id": "r", "colour": "blue"}`)
		}), ErrBadManifest, ManifestFile, "colour"},
		{"manifest version", replace(ManifestFile, func(*testing.T) []byte { return []byte(`{"schema_version": 9, "run_id": "r"}`) }), ErrSchemaVersion, ManifestFile, "version 9"},
		{"duplicate rows", replace(seg, func(t *testing.T) []byte {
			rows := append(genSteps("r", 2), genSteps("r", 3)...)
			data, err := stepsDef.encode(append(rows, genSteps("r", 3)[1]))
			if err != nil {
				t.Fatal(err)
			}
			return data
		}), ErrDuplicateRow, seg, "row 10: repeats a row of steps/000003.parquet (step 3)"},
		{"row outside its segment", replace(seg, func(t *testing.T) []byte {
			stray := genSteps("r", 1)
			for i := range stray {
				stray[i].Policy = "other" // not a duplicate, only misplaced
			}
			data, err := stepsDef.encode(append(stray, genSteps("r", 3)...))
			if err != nil {
				t.Fatal(err)
			}
			return data
		}), ErrBadRow, seg, "5 rows, the first row 0: step 1, outside this segment's steps 2..3"},
		{"row of another run", replace(seg, func(t *testing.T) []byte {
			data, err := stepsDef.encode(append(genSteps("r", 2), genSteps("q", 3)...))
			if err != nil {
				t.Fatal(err)
			}
			return data
		}), ErrBadRow, seg, `run id "q"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "exp", "r")
			if err := writeScenario(dir, "r", 6); err != nil {
				t.Fatal(err)
			}
			tc.mutate(t, dir)
			wantPath := filepath.Join(dir, filepath.FromSlash(tc.file))

			probs := Check(root)
			if len(probs) != 1 {
				t.Fatalf("Check found %d problems, want 1: %v", len(probs), probs)
			}
			p := probs[0]
			if !errors.Is(p.Err, tc.want) || p.Path != wantPath || !strings.Contains(p.String(), tc.text) {
				t.Fatalf("problem %q (err %v), want %v at %s mentioning %q", p.String(), p.Err, tc.want, wantPath, tc.text)
			}
			if strings.Count(p.String(), wantPath) != 1 {
				t.Fatalf("problem line names the file %d times: %q", strings.Count(p.String(), wantPath), p.String())
			}

			// Readers fail with the same named error, naming the file; row
			// checks (duplicates, stray rows) are Check's alone.
			if errors.Is(tc.want, ErrDuplicateRow) || errors.Is(tc.want, ErrBadRow) {
				return
			}
			_, err := ReadRun(dir)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), wantPath) {
				t.Fatalf("ReadRun: %v, want %v naming %s", err, tc.want, wantPath)
			}
			if _, err := ReadRuns(root); !errors.Is(err, tc.want) {
				t.Fatalf("ReadRuns: %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCheckSources(t *testing.T) {
	root := t.TempDir()
	if probs := Check(root); len(probs) != 1 || !errors.Is(probs[0].Err, ErrNoRuns) {
		t.Fatalf("empty tree: %v", probs)
	}
	missing := filepath.Join(root, "nope")
	if probs := Check(missing); len(probs) != 1 || !errors.Is(probs[0].Err, os.ErrNotExist) {
		t.Fatalf("missing tree: %v", probs)
	}
	notArchive := filepath.Join(root, "x.tar.zst")
	if err := os.WriteFile(notArchive, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if probs := Check(notArchive); len(probs) != 1 || !strings.Contains(probs[0].String(), "archive") {
		t.Fatalf("bad archive: %v", probs)
	}
	// A single run folder can be checked directly.
	dir := filepath.Join(root, "runs", "r")
	if err := writeScenario(dir, "r", 3); err != nil {
		t.Fatal(err)
	}
	if probs := Check(dir); len(probs) != 0 {
		t.Fatalf("sound run: %v", probs)
	}
}
