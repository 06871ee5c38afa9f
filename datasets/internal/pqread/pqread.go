// Package pqread streams the record batches of a Parquet file for the
// dataset readers, so that a published file of millions of rows (or of
// tens-of-megabyte cells) is never held in memory whole.
package pqread

import (
	"context"
	"fmt"

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
