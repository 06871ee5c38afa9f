// Package tensorboard writes TensorBoard event files: TFRecord framing
// (length, masked CRC-32C of the length, data, masked CRC-32C of the data)
// around hand-encoded tensorflow.Event protocol buffers whose Summary holds
// simple scalar values. Only what scalars need is encoded: an Event's
// wall_time (field 1, double), step (2, int64), file_version (3, string)
// and summary (5); a Summary's repeated value (1); a Value's tag (1,
// string) and simple_value (2, float).
package tensorboard

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
)

// FileVersion is the file_version of the first event of every file.
const FileVersion = "brain.Event:2"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// record frames data as one TFRecord.
func record(data []byte) []byte {
	out := make([]byte, 0, len(data)+16)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	out = append(out, n[:]...)
	out = binary.LittleEndian.AppendUint32(out, maskedCRC(n[:]))
	out = append(out, data...)
	return binary.LittleEndian.AppendUint32(out, maskedCRC(data))
}

// Protocol buffer wire types.
const (
	wireVarint = 0
	wire64     = 1
	wireBytes  = 2
	wire32     = 5
)

func key(field, wire int) uint64 { return uint64(field<<3 | wire) }

func appendBytesField(b []byte, field int, v []byte) []byte {
	b = binary.AppendUvarint(b, key(field, wireBytes))
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// Scalar is one tagged value of a step.
type Scalar struct {
	Tag   string
	Value float64 // written as a float32, TensorBoard's simple_value
}

// event encodes a tensorflow.Event: wall time and step, then either the
// file version (version != "") or a summary of scalars.
func event(wall float64, step int64, version string, scalars []Scalar) []byte {
	var b []byte
	b = binary.AppendUvarint(b, key(1, wire64))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(wall))
	if step != 0 {
		b = binary.AppendUvarint(b, key(2, wireVarint))
		b = binary.AppendUvarint(b, uint64(step))
	}
	if version != "" {
		return appendBytesField(b, 3, []byte(version))
	}
	var summary []byte
	for _, s := range scalars {
		var v []byte
		v = appendBytesField(v, 1, []byte(s.Tag))
		v = binary.AppendUvarint(v, key(2, wire32))
		v = binary.LittleEndian.AppendUint32(v, math.Float32bits(float32(s.Value)))
		summary = appendBytesField(summary, 1, v)
	}
	return appendBytesField(b, 5, summary)
}

// Writer appends events to one event file.
type Writer struct {
	w    io.Writer
	f    *os.File
	path string
}

// Create creates (or truncates) the event file path and writes its
// file_version event with wall time wall.
func Create(path string, wall float64) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	w := &Writer{w: f, f: f, path: path}
	if _, err := f.Write(record(event(wall, 0, FileVersion, nil))); err != nil {
		f.Close()
		return nil, fmt.Errorf("tensorboard: write %s: %w", path, err)
	}
	return w, nil
}

// Append opens the existing event file path for appending.
func Append(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	return &Writer{w: f, f: f, path: path}, nil
}

// Scalars writes one event of step with the given values (none: nothing is
// written). Values that are NaN are left out, since TensorBoard would draw
// them as gaps anyway.
func (w *Writer) Scalars(step int64, wall float64, values []Scalar) error {
	kept := make([]Scalar, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v.Value) {
			kept = append(kept, v)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	if _, err := w.w.Write(record(event(wall, step, "", kept))); err != nil {
		return fmt.Errorf("tensorboard: write %s: %w", w.path, err)
	}
	return nil
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("tensorboard: close %s: %w", w.path, err)
	}
	return nil
}
