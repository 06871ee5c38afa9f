package runlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Named errors of the readers; problems wrap them, so test with errors.Is.
var (
	ErrMissingManifest = errors.New("missing manifest.json")
	ErrBadManifest     = errors.New("unreadable manifest")
	ErrTruncated       = errors.New("truncated Parquet file")
	ErrBadMagic        = errors.New("not a Parquet file (wrong magic)")
	ErrCorrupt         = errors.New("corrupt Parquet file")
	ErrForeignSchema   = errors.New("foreign schema")
	ErrSchemaVersion   = errors.New("unsupported schema version")
	ErrBadRow          = errors.New("bad row")
	ErrDuplicateRow    = errors.New("duplicate row")
	ErrNoRuns          = errors.New("no runs found")
)

// createdBy is the Parquet "created_by" string. It names the library
// version, which is fixed by go.mod, and nothing that varies between runs.
var createdBy = "marlow runlog schema v" + strconv.Itoa(SchemaVersion) + " (" + parquet.DefaultCreatedBy + ")"

// writerProps are the Parquet writer settings of a table: zstd, statistics,
// one row group, and dictionary encoding for string columns only (role and
// policy names and repeated prompts compress well that way; metrics do not).
func writerProps(cols []colInfo) *parquet.WriterProperties {
	opts := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCreatedBy(createdBy),
		parquet.WithStats(true),
		parquet.WithDictionaryDefault(false),
		parquet.WithMaxRowGroupLength(math.MaxInt32),
	}
	for _, c := range cols {
		switch c.kind {
		case kString:
			if !c.distinct {
				opts = append(opts, parquet.WithDictionaryFor(c.name, true))
			}
		case kInt64:
			if c.dict {
				opts = append(opts, parquet.WithDictionaryFor(c.name, true))
			}
		case kFloatMap:
			opts = append(opts, parquet.WithDictionaryFor(c.name+".key_value.key", true))
		}
	}
	return parquet.NewWriterProperties(opts...)
}

// encode writes rows as one Parquet file with one row group. Identical rows
// give identical bytes.
func (t *tableDef[R]) encode(rows []R) ([]byte, error) {
	rec := t.record(rows)
	defer rec.Release()
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(rec.Schema(), &buf, writerProps(t.info().cols), pqarrow.NewArrowWriterProperties())
	if err != nil {
		return nil, fmt.Errorf("%s: parquet writer: %w", t.name, err)
	}
	if err := fw.Write(rec); err != nil {
		fw.Close()
		return nil, fmt.Errorf("%s: write rows: %w", t.name, err)
	}
	if err := fw.Close(); err != nil {
		return nil, fmt.Errorf("%s: close parquet writer: %w", t.name, err)
	}
	return buf.Bytes(), nil
}

// record converts rows to an Arrow record of the table's schema.
func (t *tableDef[R]) record(rows []R) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, t.schema())
	defer b.Release()
	b.Reserve(len(rows))
	for i := range rows {
		r := &rows[i]
		for j, c := range t.cols {
			fb := b.Field(j)
			switch p := c.ref(r).(type) {
			case *string:
				fb.(*array.StringBuilder).Append(*p)
			case *int64:
				fb.(*array.Int64Builder).Append(*p)
			case *bool:
				fb.(*array.BooleanBuilder).Append(*p)
			case *float64:
				appendFloat(fb.(*array.Float64Builder), *p)
			case *map[string]float64:
				mb := fb.(*array.MapBuilder)
				if *p == nil {
					mb.AppendNull()
					continue
				}
				mb.Append(true)
				kb := mb.KeyBuilder().(*array.StringBuilder)
				ib := mb.ItemBuilder().(*array.Float64Builder)
				keys := make([]string, 0, len(*p))
				for k := range *p {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				for _, k := range keys {
					kb.Append(k)
					appendFloat(ib, (*p)[k])
				}
			}
		}
	}
	return b.NewRecordBatch()
}

func appendFloat(b *array.Float64Builder, v float64) {
	if math.IsNaN(v) {
		b.AppendNull()
	} else {
		b.Append(v)
	}
}

// checkFrame looks at the Parquet framing: leading and trailing magic and
// the footer length.
func checkFrame(data []byte) error {
	const magic = "PAR1"
	if len(data) < 4 || string(data[:4]) != magic {
		if len(data) >= 4 && string(data[:4]) == "PARE" {
			return fmt.Errorf("%w: encrypted footer", ErrForeignSchema)
		}
		if len(data) < 4 {
			return fmt.Errorf("%w: %d bytes", ErrTruncated, len(data))
		}
		return fmt.Errorf("%w: starts with %q", ErrBadMagic, data[:4])
	}
	if len(data) < 12 {
		return fmt.Errorf("%w: %d bytes, too short for a footer", ErrTruncated, len(data))
	}
	if string(data[len(data)-4:]) != magic {
		return fmt.Errorf("%w: no trailing magic (footer missing or cut)", ErrTruncated)
	}
	n := binary.LittleEndian.Uint32(data[len(data)-8:])
	if int64(n) > int64(len(data)-12) {
		return fmt.Errorf("%w: footer claims %d bytes, file has %d", ErrTruncated, n, len(data))
	}
	return nil
}

// openTable parses a segment file and checks its table name, schema version
// and columns against t. It never panics on bad input.
func openTable(t tableInfo, data []byte) (tbl arrow.Table, err error) {
	return readSegment(t, data, func(fr *pqarrow.FileReader) (arrow.Table, error) {
		return fr.ReadTable(context.Background())
	})
}

// segmentHolds reports whether the string column col of a segment of t
// holds one of values, decoding that column alone (after the checks
// openTable makes).
func segmentHolds(t tableInfo, data []byte, col string, values []string) (bool, error) {
	idx := -1
	for i, c := range t.cols {
		if c.name == col {
			idx = i
		}
	}
	if idx < 0 {
		return false, fmt.Errorf("runlog: table %s has no column %q", t.name, col)
	}
	tbl, err := readSegment(t, data, func(fr *pqarrow.FileReader) (arrow.Table, error) {
		groups := make([]int, fr.ParquetReader().NumRowGroups())
		for i := range groups {
			groups[i] = i
		}
		return fr.ReadRowGroups(context.Background(), []int{idx}, groups)
	})
	if err != nil {
		return false, err
	}
	defer tbl.Release()
	found := false
	err = func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%w: %v", ErrCorrupt, p)
			}
		}()
		for _, chunk := range tbl.Column(0).Data().Chunks() {
			a, ok := chunk.(*array.String)
			if !ok {
				return fmt.Errorf("%w: column %q is not strings", ErrForeignSchema, col)
			}
			for k := 0; k < a.Len() && !found; k++ {
				found = slices.Contains(values, a.Value(k))
			}
		}
		return nil
	}()
	return found, err
}

// readSegment checks a segment file's frame, table name, schema version
// and columns against t, then reads it with read. It never panics on bad
// input.
func readSegment(t tableInfo, data []byte, read func(*pqarrow.FileReader) (arrow.Table, error)) (tbl arrow.Table, err error) {
	return readSegmentWith(t, data, pqarrow.ArrowReadProperties{}, read)
}

// decodeBatches decodes a segment of t batchRows rows at a time (the
// columns named in skip left unset), handing each batch's rows to fn: a
// segment costs its bytes and one batch, not all its rows at once.
func decodeBatches[R any](t *tableDef[R], data []byte, batchRows int64, skip []string, fn func([]R)) error {
	var ferr error
	_, err := readSegmentWith(t.info(), data, pqarrow.ArrowReadProperties{BatchSize: batchRows}, func(fr *pqarrow.FileReader) (arrow.Table, error) {
		rr, err := fr.GetRecordReader(context.Background(), nil, nil)
		if err != nil {
			return nil, err
		}
		defer rr.Release()
		for rr.Next() {
			rec := rr.RecordBatch()
			tbl := array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec})
			rows, err := t.rowsSkipping(tbl, skip)
			tbl.Release()
			if err != nil {
				ferr = err
				return nil, nil
			}
			fn(rows)
		}
		if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return nil, nil
	})
	if err != nil {
		return err
	}
	return ferr
}

// readSegmentWith is readSegment with the given read properties; read may
// return a nil table.
func readSegmentWith(t tableInfo, data []byte, props pqarrow.ArrowReadProperties, read func(*pqarrow.FileReader) (arrow.Table, error)) (tbl arrow.Table, err error) {
	if err := checkFrame(data); err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			tbl, err = nil, fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	defer pf.Close()
	kv := pf.MetaData().KeyValueMetadata()
	ver := kv.FindValue(MetaSchemaVersion)
	if ver == nil {
		return nil, fmt.Errorf("%w: no %s metadata (not written by marlow runlog)", ErrForeignSchema, MetaSchemaVersion)
	}
	version, verr := strconv.Atoi(*ver)
	if verr != nil || !t.reads(version) {
		return nil, fmt.Errorf("%w: %s file has version %s, this build reads %s", ErrSchemaVersion, t.name, *ver, readVersions(t))
	}
	if name := kv.FindValue(MetaTable); name == nil || *name != t.name {
		got := "none"
		if name != nil {
			got = strconv.Quote(*name)
		}
		return nil, fmt.Errorf("%w: table %s in a %s folder", ErrForeignSchema, got, t.name)
	}
	fr, err := pqarrow.NewFileReader(pf, props, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err := checkSchema(t, fr, t.colsAt(version)); err != nil {
		return nil, err
	}
	tbl, err = read(fr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return tbl, nil
}

// readVersions names the schema versions a table definition reads.
func readVersions(t tableInfo) string {
	var vs []string
	for v := MinReadVersion; v <= SchemaVersion; v++ {
		if t.reads(v) {
			vs = append(vs, strconv.Itoa(v))
		}
	}
	return strings.Join(vs, " and ")
}

// checkSchema checks that the file's columns are the first n of t's (a
// file of an older version lacks the columns appended since).
func checkSchema(t tableInfo, fr *pqarrow.FileReader, n int) error {
	got, err := fr.Schema()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	want := t.schema
	if got.NumFields() != n {
		return fmt.Errorf("%w: %d columns, %s has %d", ErrForeignSchema, got.NumFields(), t.name, n)
	}
	for i, w := range want.Fields()[:n] {
		g := got.Field(i)
		if g.Name != w.Name {
			return fmt.Errorf("%w: column %d is %q, want %q", ErrForeignSchema, i, g.Name, w.Name)
		}
		if !sameType(g.Type, w.Type) {
			return fmt.Errorf("%w: column %q has type %s, want %s", ErrForeignSchema, g.Name, g.Type, w.Type)
		}
		if g.Nullable && !w.Nullable {
			return fmt.Errorf("%w: column %q is nullable, want required", ErrForeignSchema, g.Name)
		}
	}
	return nil
}

// sameType compares types ignoring the names Parquet gives nested fields.
func sameType(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	if am, ok := a.(*arrow.MapType); ok {
		bm := b.(*arrow.MapType)
		return sameType(am.KeyType(), bm.KeyType()) && sameType(am.ItemType(), bm.ItemType())
	}
	return arrow.TypeEqual(a, b)
}

// rows converts a table read by openTable (whose schema was checked) into
// typed rows.
func (t *tableDef[R]) rows(tbl arrow.Table) (out []R, err error) {
	return t.rowsSkipping(tbl, nil)
}

// rowsSkipping is rows leaving the fields of the columns named in skip at
// their zero value, undecoded.
func (t *tableDef[R]) rowsSkipping(tbl arrow.Table, skip []string) (out []R, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	out = make([]R, tbl.NumRows())
	for j, c := range t.cols {
		if j >= int(tbl.NumCols()) {
			// A column appended after the file's schema version: null.
			for i := range out {
				setMissing(c.ref(&out[i]))
			}
			continue
		}
		if slices.Contains(skip, c.name) {
			continue
		}
		i := 0
		for _, chunk := range tbl.Column(j).Data().Chunks() {
			for k := 0; k < chunk.Len(); k++ {
				if err := setField(c.ref(&out[i]), chunk, k); err != nil {
					return nil, fmt.Errorf("column %q row %d: %w", c.name, i, err)
				}
				i++
			}
		}
		if i != len(out) {
			return nil, fmt.Errorf("%w: column %q has %d values for %d rows", ErrCorrupt, c.name, i, len(out))
		}
	}
	return out, nil
}

// setMissing sets a field of a column the file does not hold to its null:
// NaN, a nil map, or the zero value of a required column.
func setMissing(dst any) {
	switch p := dst.(type) {
	case *float64:
		*p = math.NaN()
	case *map[string]float64:
		*p = nil
	case *string:
		*p = ""
	case *int64:
		*p = 0
	case *bool:
		*p = false
	}
}

func setField(dst any, arr arrow.Array, k int) error {
	switch p := dst.(type) {
	case *float64:
		a := arr.(*array.Float64)
		if a.IsNull(k) {
			*p = math.NaN()
		} else {
			*p = a.Value(k)
		}
		return nil
	case *map[string]float64:
		a := arr.(*array.Map)
		if a.IsNull(k) {
			*p = nil
			return nil
		}
		keys := a.Keys().(*array.String)
		items := a.Items().(*array.Float64)
		start, end := a.ValueOffsets(k)
		m := make(map[string]float64, end-start)
		for e := start; e < end; e++ {
			key := keys.Value(int(e))
			if _, dup := m[key]; dup {
				return fmt.Errorf("%w: map key %q repeated", ErrCorrupt, key)
			}
			if items.IsNull(int(e)) {
				m[key] = math.NaN()
			} else {
				m[key] = items.Value(int(e))
			}
		}
		*p = m
		return nil
	}
	if arr.IsNull(k) {
		return fmt.Errorf("%w: null in a required column", ErrCorrupt)
	}
	switch p := dst.(type) {
	case *string:
		*p = arr.(*array.String).Value(k)
	case *int64:
		*p = arr.(*array.Int64).Value(k)
	case *bool:
		*p = arr.(*array.Boolean).Value(k)
	default:
		return fmt.Errorf("runlog: unsupported field type %T", dst)
	}
	return nil
}

// decode parses a segment file into typed rows.
func (t *tableDef[R]) decode(data []byte) ([]R, error) {
	tbl, err := openTable(t.info(), data)
	if err != nil {
		return nil, err
	}
	defer tbl.Release()
	return t.rows(tbl)
}
