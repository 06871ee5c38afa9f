package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/harness/internal/atomicfile"
)

// Tensor is a named dense tensor in row-major order.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// maxHeaderBytes bounds the JSON header of a safetensors file (the reference
// implementation uses the same 100 MB limit).
const maxHeaderBytes = 100 << 20

// dtypeSizes lists every dtype of the safetensors format with its element
// size in bytes; only F32, BF16 and F16 can be loaded.
var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

type headerEntry struct {
	name    string
	dtype   string
	shape   []int
	begin   int64
	end     int64
	numElem int64
}

// ReadSafetensors reads every tensor of a safetensors file, converting F32,
// BF16 and F16 data to float32, and returns them sorted by name. It checks
// the header (size, JSON syntax, duplicate names, dtype, shape, offsets) and
// that the tensors tile the data section exactly, without overlaps or holes;
// errors name the file and, where one is at fault, the tensor.
func ReadSafetensors(path string) ([]Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read safetensors: %w", err)
	}
	defer f.Close()
	entries, _, dataStart, err := readHeader(f)
	if err != nil {
		return nil, fmt.Errorf("safetensors %s: %w", path, err)
	}
	out := make([]Tensor, 0, len(entries))
	for _, e := range entries {
		raw := make([]byte, e.end-e.begin)
		if _, err := f.ReadAt(raw, dataStart+e.begin); err != nil {
			return nil, fmt.Errorf("safetensors %s: tensor %q: read data: %w", path, e.name, err)
		}
		data := make([]float32, e.numElem)
		decodeFloats(e.dtype, raw, data)
		out = append(out, Tensor{Name: e.name, Shape: e.shape, Data: data})
	}
	slices.SortFunc(out, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ReadSafetensorsMetadata returns the "__metadata__" map of a safetensors
// file (nil when it has none) after validating the header like
// ReadSafetensors; tensor data is not read.
func ReadSafetensorsMetadata(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read safetensors: %w", err)
	}
	defer f.Close()
	_, meta, _, err := readHeader(f)
	if err != nil {
		return nil, fmt.Errorf("safetensors %s: %w", path, err)
	}
	return meta, nil
}

// readHeader reads and validates the header of an open safetensors file. It
// returns the tensor entries in data order, the metadata, and the file
// offset where the data section starts.
func readHeader(f *os.File) ([]headerEntry, map[string]string, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, nil, 0, err
	}
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		return nil, nil, 0, fmt.Errorf("file too short for the 8-byte header length (%d bytes)", st.Size())
	}
	hlen := binary.LittleEndian.Uint64(lenBuf[:])
	if hlen > maxHeaderBytes || int64(hlen) > st.Size()-8 {
		return nil, nil, 0, fmt.Errorf("header length %d exceeds the file (%d bytes) or the %d-byte limit",
			hlen, st.Size(), maxHeaderBytes)
	}
	header := make([]byte, hlen)
	if _, err := io.ReadFull(f, header); err != nil {
		return nil, nil, 0, fmt.Errorf("read header: %w", err)
	}
	entries, meta, err := parseHeader(header, st.Size()-8-int64(hlen))
	if err != nil {
		return nil, nil, 0, err
	}
	return entries, meta, 8 + int64(hlen), nil
}

// parseHeader decodes and validates a safetensors JSON header for a data
// section of dataLen bytes. Entries come back in data-offset order.
func parseHeader(header []byte, dataLen int64) ([]headerEntry, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, fmt.Errorf("header is not valid JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, fmt.Errorf("header is not a JSON object")
	}
	seen := map[string]bool{}
	var entries []headerEntry
	var meta map[string]string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("header is not valid JSON: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, nil, fmt.Errorf("header is not valid JSON: key %v", tok)
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("header lists %q twice", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("header is not valid JSON at %q: %w", name, err)
		}
		if name == "__metadata__" {
			if err := json.Unmarshal(raw, &meta); err != nil {
				return nil, nil, fmt.Errorf("__metadata__ must map strings to strings: %w", err)
			}
			continue
		}
		e, err := parseEntry(name, raw, dataLen)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("header is not valid JSON: %w", err)
	}
	rest := bytes.TrimRight(header[dec.InputOffset():], " \t\r\n")
	if len(rest) > 0 {
		return nil, nil, fmt.Errorf("header has %d bytes of trailing data after the JSON object", len(rest))
	}
	slices.SortFunc(entries, func(a, b headerEntry) int {
		if a.begin != b.begin {
			return compareInt64(a.begin, b.begin)
		}
		if a.end != b.end {
			return compareInt64(a.end, b.end)
		}
		return strings.Compare(a.name, b.name)
	})
	var pos int64
	for i, e := range entries {
		if e.begin < pos {
			return nil, nil, fmt.Errorf("tensor %q: data_offsets [%d, %d] overlap tensor %q ending at %d",
				e.name, e.begin, e.end, entries[i-1].name, pos)
		}
		if e.begin > pos {
			return nil, nil, fmt.Errorf("tensor %q: data_offsets start at %d, leaving a hole after byte %d", e.name, e.begin, pos)
		}
		pos = e.end
	}
	if pos != dataLen {
		return nil, nil, fmt.Errorf("data section has %d bytes but the tensors cover %d", dataLen, pos)
	}
	return entries, meta, nil
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseEntry validates one tensor entry of the header.
func parseEntry(name string, raw json.RawMessage, dataLen int64) (headerEntry, error) {
	var info struct {
		Dtype   *string       `json:"dtype"`
		Shape   []json.Number `json:"shape"`
		Offsets []json.Number `json:"data_offsets"`
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	d.DisallowUnknownFields()
	if err := d.Decode(&info); err != nil {
		return headerEntry{}, fmt.Errorf("tensor %q: bad header entry: %w", name, err)
	}
	if name == "" {
		return headerEntry{}, fmt.Errorf("header has a tensor with an empty name")
	}
	if info.Dtype == nil {
		return headerEntry{}, fmt.Errorf("tensor %q: missing dtype", name)
	}
	size, known := dtypeSizes[*info.Dtype]
	if !known {
		return headerEntry{}, fmt.Errorf("tensor %q: unknown dtype %q", name, *info.Dtype)
	}
	if *info.Dtype != "F32" && *info.Dtype != "BF16" && *info.Dtype != "F16" {
		return headerEntry{}, fmt.Errorf("tensor %q: unsupported dtype %s (only F32, BF16 and F16 load)", name, *info.Dtype)
	}
	if info.Shape == nil {
		return headerEntry{}, fmt.Errorf("tensor %q: missing shape", name)
	}
	if len(info.Offsets) != 2 {
		return headerEntry{}, fmt.Errorf("tensor %q: data_offsets must be [begin, end], got %d numbers", name, len(info.Offsets))
	}
	e := headerEntry{name: name, dtype: *info.Dtype, numElem: 1}
	limit := math.MaxInt64 / int64(size)
	for i, n := range info.Shape {
		dim, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil || dim < 0 {
			return headerEntry{}, fmt.Errorf("tensor %q: shape[%d] = %s is not a non-negative integer", name, i, n)
		}
		if dim > 0 && e.numElem > limit/dim {
			return headerEntry{}, fmt.Errorf("tensor %q: shape %v is too large", name, info.Shape)
		}
		e.numElem *= dim
		e.shape = append(e.shape, int(dim))
	}
	if e.shape == nil {
		e.shape = []int{}
	}
	for i, n := range info.Offsets {
		v, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil || v < 0 {
			return headerEntry{}, fmt.Errorf("tensor %q: data_offsets[%d] = %s is not a non-negative integer", name, i, n)
		}
		if i == 0 {
			e.begin = v
		} else {
			e.end = v
		}
	}
	if e.end < e.begin {
		return headerEntry{}, fmt.Errorf("tensor %q: data_offsets [%d, %d] end before they begin", name, e.begin, e.end)
	}
	if e.end > dataLen {
		return headerEntry{}, fmt.Errorf("tensor %q: data_offsets [%d, %d] run past the %d-byte data section (file truncated?)",
			name, e.begin, e.end, dataLen)
	}
	if want := e.numElem * int64(size); e.end-e.begin != want {
		return headerEntry{}, fmt.Errorf("tensor %q: %s shape %v needs %d bytes but data_offsets [%d, %d] hold %d",
			name, e.dtype, e.shape, want, e.begin, e.end, e.end-e.begin)
	}
	return e, nil
}

// decodeFloats converts little-endian raw data of dtype F32, BF16 or F16
// into dst.
func decodeFloats(dtype string, raw []byte, dst []float32) {
	switch dtype {
	case "F32":
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case "BF16":
		for i := range dst {
			dst[i] = BF16ToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case "F16":
		for i := range dst {
			dst[i] = F16ToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	}
}

// BF16ToFloat32 converts a bfloat16 bit pattern to float32 (exact).
func BF16ToFloat32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// F16ToFloat32 converts an IEEE 754 half-precision bit pattern to float32
// (exact, including subnormals, infinities and NaN payloads).
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0: // signed zero
		return math.Float32frombits(sign)
	}
	// Subnormal: value = mant * 2^-24.
	v := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// WriteSafetensors writes tensors as F32 with the optional metadata. The
// header lists "__metadata__" first (when meta is non-empty) and then the
// tensors sorted by name, with data laid out in that order and the header
// padded with spaces to a multiple of 8 bytes, so the same tensors always
// give the same bytes. The file is written to a temporary name, fsynced and
// renamed into place.
func WriteSafetensors(path string, ts []Tensor, meta map[string]string) error {
	sorted := slices.Clone(ts)
	slices.SortFunc(sorted, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	var errs []error
	for i, t := range sorted {
		if err := checkTensorData(t); err != nil {
			errs = append(errs, err)
		}
		if i > 0 && sorted[i-1].Name == t.Name {
			errs = append(errs, fmt.Errorf("tensor %q given twice", t.Name))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("write safetensors %s: %w", path, errors.Join(errs...))
	}
	header, err := buildHeader(sorted, meta)
	if err != nil {
		return fmt.Errorf("write safetensors %s: %w", path, err)
	}
	return atomicfile.WriteFrom(path, func(w io.Writer) error {
		var lenBuf [8]byte
		binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
		if _, err := w.Write(lenBuf[:]); err != nil {
			return err
		}
		if _, err := w.Write(header); err != nil {
			return err
		}
		buf := make([]byte, 0, 1<<16)
		for _, t := range sorted {
			for _, v := range t.Data {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
				if len(buf) == cap(buf) {
					if _, err := w.Write(buf); err != nil {
						return err
					}
					buf = buf[:0]
				}
			}
		}
		_, err := w.Write(buf)
		return err
	})
}

// checkTensorData checks that a tensor's name, shape and data agree.
func checkTensorData(t Tensor) error {
	if t.Name == "" {
		return fmt.Errorf("tensor with shape %v has an empty name", t.Shape)
	}
	if t.Name == "__metadata__" {
		return fmt.Errorf("tensor name %q is reserved", t.Name)
	}
	n := 1
	for i, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("tensor %q: shape[%d] = %d is negative", t.Name, i, d)
		}
		n *= d
	}
	if n != len(t.Data) {
		return fmt.Errorf("tensor %q: shape %v holds %d values but data has %d", t.Name, t.Shape, n, len(t.Data))
	}
	return nil
}

// buildHeader renders the JSON header for tensors already sorted by name.
func buildHeader(sorted []Tensor, meta map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	if len(meta) > 0 {
		keys := make([]string, 0, len(meta))
		for k := range meta {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString(`"__metadata__":{`)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(&b, k)
			b.WriteByte(':')
			writeJSONString(&b, meta[k])
		}
		b.WriteByte('}')
		first = false
	}
	var off int64
	for _, t := range sorted {
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeJSONString(&b, t.Name)
		b.WriteString(`:{"dtype":"F32","shape":[`)
		for i, d := range t.Shape {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		end := off + 4*int64(len(t.Data))
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, end)
		off = end
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	if b.Len() > maxHeaderBytes {
		return nil, fmt.Errorf("header of %d bytes exceeds the %d-byte limit", b.Len(), maxHeaderBytes)
	}
	return b.Bytes(), nil
}

// writeJSONString writes s as a JSON string without HTML escaping.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)           // cannot fail for a string
	b.Truncate(b.Len() - 1) // drop the newline Encode appends
}
