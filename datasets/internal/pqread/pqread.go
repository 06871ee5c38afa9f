// Package pqread streams the record batches of a Parquet file for the
// dataset readers, so that a published file of millions of rows (or of
// tens-of-megabyte cells) is never held in memory whole.
package pqread

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Stream opens the Parquet file at path, passes its Arrow schema to check,
// and, when check accepts it, calls each with successive record batches of
// at most batch rows, in file order. A batch is valid only during its call.
// Errors from opening and decoding name path; errors from check are
// wrapped with path; errors from each are returned as they are.
func Stream(path string, batch int64, check func(*arrow.Schema) error, each func(arrow.RecordBatch) error) error {
	if err := checkMagic(path); err != nil {
		return err
	}
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: batch}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	sc, err := fr.Schema()
	if err != nil {
		return fmt.Errorf("schema of %s: %w", path, err)
	}
	if err := check(sc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer rr.Release()
	for rr.Next() {
		if err := each(rr.RecordBatch()); err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// Schema returns the Arrow schema of the Parquet file at path.
func Schema(path string) (*arrow.Schema, error) {
	if err := checkMagic(path); err != nil {
		return nil, err
	}
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	sc, err := fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", path, err)
	}
	return sc, nil
}

// ErrNotParquet is returned (wrapped) for a file that does not start and
// end with Parquet's magic bytes.
var ErrNotParquet = errors.New("not a Parquet file")

// checkMagic refuses a file without Parquet's leading and trailing "PAR1",
// so that a YAML file or a truncated download is named for what it is
// rather than by the Parquet reader's footer arithmetic.
func checkMagic(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	var head, tail [4]byte
	if st.Size() < 12 {
		return fmt.Errorf("%s: %w (%d bytes; a Parquet file has at least 12)", path, ErrNotParquet, st.Size())
	}
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if _, err := f.ReadAt(tail[:], st.Size()-4); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	switch {
	case string(head[:]) != "PAR1":
		return fmt.Errorf("%s: %w (it starts with %q, not PAR1)", path, ErrNotParquet, head[:])
	case string(tail[:]) != "PAR1":
		return fmt.Errorf("%s: %w: no PAR1 at its end (truncated? download it again)", path, ErrNotParquet)
	}
	return nil
}
