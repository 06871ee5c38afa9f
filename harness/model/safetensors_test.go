package model

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// rawSafetensors assembles a safetensors file from a header and data bytes.
func rawSafetensors(header string, data []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.safetensors")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func u16s(vs ...uint16) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	return b
}

func f32s(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func TestSafetensorsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	nan := math.Float32frombits(0x7fc00123) // NaN with a payload: bits must survive
	ts := []Tensor{
		{Name: "z.weight", Shape: []int{2, 3}, Data: []float32{1, -2, 3.5, 0, float32(math.Inf(-1)), nan}},
		{Name: "a.bias", Shape: []int{1}, Data: []float32{-0.0}},
		{Name: "scalar", Shape: []int{}, Data: []float32{42}},
		{Name: "empty", Shape: []int{0, 4}, Data: []float32{}},
	}
	p1, p2 := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	meta := map[string]string{"format": "pt", "note": "<&>"}
	if err := WriteSafetensors(p1, ts, meta); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSafetensors(p1)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(got))
	for i, g := range got {
		names[i] = g.Name
	}
	if want := []string{"a.bias", "empty", "scalar", "z.weight"}; !slices.Equal(names, want) {
		t.Fatalf("names %v, want %v", names, want)
	}
	for _, g := range got {
		for _, w := range ts {
			if w.Name != g.Name {
				continue
			}
			if !slices.Equal(g.Shape, w.Shape) {
				t.Errorf("%s: shape %v, want %v", g.Name, g.Shape, w.Shape)
			}
			for i := range w.Data {
				if math.Float32bits(g.Data[i]) != math.Float32bits(w.Data[i]) {
					t.Errorf("%s[%d] = %v, want %v (bitwise)", g.Name, i, g.Data[i], w.Data[i])
				}
			}
		}
	}
	gotMeta, err := ReadSafetensorsMetadata(p1)
	if err != nil || gotMeta["format"] != "pt" || gotMeta["note"] != "<&>" || len(gotMeta) != 2 {
		t.Errorf("metadata %v, %v", gotMeta, err)
	}
	// Rewriting what was read (in another order) gives identical bytes.
	slices.Reverse(got)
	if err := WriteSafetensors(p2, got, meta); err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b1, b2) {
		t.Error("F32 rewrite is not byte-identical")
	}
	if hlen := binary.LittleEndian.Uint64(b1); hlen%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", hlen)
	}
	if !bytes.Contains(b1, []byte(`{"__metadata__":{"format":"pt","note":"<&>"},"a.bias":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}`)) {
		t.Errorf("unexpected header layout: %s", b1[8:80])
	}
}

func TestSafetensorsHalfConversion(t *testing.T) {
	// Values worked out by hand from the bit layouts.
	bf16 := []struct {
		bits uint16
		want float32
	}{
		{0x3f80, 1}, {0xc040, -3}, {0x4049, 3.140625}, {0x0000, 0},
		{0x7f80, float32(math.Inf(1))}, {0xff80, float32(math.Inf(-1))},
		{0x3e80, 0.25}, {0x4780, 65536}, {0x0001, math.Float32frombits(1 << 16)},
	}
	f16 := []struct {
		bits uint16
		want float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x3555, 0.333251953125},
		{0x0400, 1.0 / 16384},       // smallest normal 2^-14
		{0x0001, 1.0 / 16777216},    // smallest subnormal 2^-24
		{0x03ff, 1023.0 / 16777216}, // largest subnormal
		{0x8001, -1.0 / 16777216},
		{0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
		{0x3800, 0.5}, {0x5640, 100},
	}
	var bfBits, fBits []uint16
	for _, c := range bf16 {
		bfBits = append(bfBits, c.bits)
	}
	for _, c := range f16 {
		fBits = append(fBits, c.bits)
	}
	bfBits = append(bfBits, 0x7fc1)       // NaN
	fBits = append(fBits, 0x7e00, 0x8000) // NaN, -0
	nb, nf := len(bfBits), len(fBits)
	header := `{"b":{"dtype":"BF16","shape":[` + strconv.Itoa(nb) + `],"data_offsets":[0,` + strconv.Itoa(2*nb) + `]},` +
		`"h":{"dtype":"F16","shape":[` + strconv.Itoa(nf) + `],"data_offsets":[` + strconv.Itoa(2*nb) + `,` + strconv.Itoa(2*nb+2*nf) + `]}}`
	path := writeTemp(t, rawSafetensors(header, append(u16s(bfBits...), u16s(fBits...)...)))
	ts, err := ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range bf16 {
		if got := ts[0].Data[i]; got != c.want {
			t.Errorf("BF16 0x%04x = %v, want %v", c.bits, got, c.want)
		}
	}
	for i, c := range f16 {
		if got := ts[1].Data[i]; got != c.want {
			t.Errorf("F16 0x%04x = %v, want %v", c.bits, got, c.want)
		}
	}
	if !math.IsNaN(float64(ts[0].Data[nb-1])) || !math.IsNaN(float64(ts[1].Data[nf-2])) {
		t.Error("NaN not preserved")
	}
	if negz := ts[1].Data[nf-1]; negz != 0 || !math.Signbit(float64(negz)) {
		t.Errorf("F16 0x8000 = %v, want -0", negz)
	}
}

func TestReadSafetensorsErrors(t *testing.T) {
	eight := f32s(1, 2)
	tests := []struct {
		name    string
		file    []byte
		wantErr string
	}{
		{"too short", []byte{1, 2, 3}, "too short"},
		{"header past end", append(u16s(0xffff, 0, 0, 0), '{', '}'), "header length 65535 exceeds"},
		{"corrupt header", rawSafetensors(`{"a":{"dtype":"F32",`, nil), "not valid JSON"},
		{"header not object", rawSafetensors(`[1,2]`, nil), "not a JSON object"},
		{"trailing garbage", rawSafetensors(`{}xyz`, nil), "trailing data"},
		{"unknown dtype", rawSafetensors(`{"w":{"dtype":"F17","shape":[2],"data_offsets":[0,8]}}`, eight), `tensor "w": unknown dtype "F17"`},
		{"unsupported dtype", rawSafetensors(`{"w":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}}`, eight), `tensor "w": unsupported dtype I32`},
		{"missing dtype", rawSafetensors(`{"w":{"shape":[2],"data_offsets":[0,8]}}`, eight), `tensor "w": missing dtype`},
		{"unknown field", rawSafetensors(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}`, eight), `tensor "w": bad header entry`},
		{"negative dim", rawSafetensors(`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, eight), `tensor "w": shape[0] = -2`},
		{"fractional dim", rawSafetensors(`{"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}`, eight), `tensor "w": shape[0] = 2.5`},
		{"huge shape", rawSafetensors(`{"w":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}}`, eight), `tensor "w": shape`},
		{"size mismatch", rawSafetensors(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, eight), `tensor "w": F32 shape [3] needs 12 bytes`},
		{"truncated data", rawSafetensors(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, eight), `tensor "w": data_offsets [0, 16] run past the 8-byte data section`},
		{"reversed offsets", rawSafetensors(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, eight), `tensor "w": data_offsets [8, 0] end before`},
		{"one offset", rawSafetensors(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}}`, eight), `tensor "w": data_offsets must be [begin, end]`},
		{"overlap", rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight),
			`tensor "b": data_offsets [4, 8] overlap tensor "a"`},
		{"hole", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight), `tensor "a": data_offsets start at 4, leaving a hole`},
		{"extra data", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, eight), "data section has 8 bytes but the tensors cover 4"},
		{"duplicate name", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight), `header lists "a" twice`},
		{"bad metadata", rawSafetensors(`{"__metadata__":{"k":1}}`, nil), "__metadata__ must map strings to strings"},
		{"empty name", rawSafetensors(`{"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, eight), "empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadSafetensors(writeTemp(t, tt.file))
			if err == nil {
				t.Fatalf("ReadSafetensors succeeded, want error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
	if _, err := ReadSafetensors(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestWriteSafetensorsErrors(t *testing.T) {
	tests := []struct {
		name    string
		ts      []Tensor
		wantErr string
	}{
		{"data mismatch", []Tensor{{Name: "w", Shape: []int{2, 2}, Data: []float32{1, 2, 3}}}, `tensor "w": shape [2 2] holds 4 values but data has 3`},
		{"duplicate", []Tensor{{Name: "w", Shape: []int{1}, Data: []float32{1}}, {Name: "w", Shape: []int{1}, Data: []float32{2}}}, `tensor "w" given twice`},
		{"negative", []Tensor{{Name: "w", Shape: []int{-1}}}, `tensor "w": shape[0] = -1 is negative`},
		{"empty name", []Tensor{{Shape: []int{1}, Data: []float32{1}}}, "empty name"},
		{"reserved", []Tensor{{Name: "__metadata__", Shape: []int{1}, Data: []float32{1}}}, "reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			err := WriteSafetensors(filepath.Join(dir, "x.safetensors"), tt.ts, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("files left behind: %v", entries)
			}
		})
	}
}

// FuzzReadSafetensorsHeader feeds arbitrary headers to the parser: it must
// return tensors whose data match their shapes, or an error, never panic.
func FuzzReadSafetensorsHeader(f *testing.F) {
	f.Add(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8)
	f.Add(`{"__metadata__":{"k":"v"},"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}}`, 8)
	f.Add(`{"a":{"dtype":"F16","shape":[],"data_offsets":[0,2]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}`, 6)
	f.Add(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{}}`, 4)
	f.Fuzz(func(t *testing.T, header string, dataLen int) {
		if dataLen < 0 || dataLen > 1<<12 {
			return
		}
		path := filepath.Join(t.TempDir(), "f.safetensors")
		if err := os.WriteFile(path, rawSafetensors(header, make([]byte, dataLen)), 0o644); err != nil {
			t.Fatal(err)
		}
		ts, err := ReadSafetensors(path)
		if err != nil {
			return
		}
		for _, x := range ts {
			n := 1
			for _, d := range x.Shape {
				n *= d
			}
			if n != len(x.Data) {
				t.Fatalf("tensor %q: shape %v but %d values", x.Name, x.Shape, len(x.Data))
			}
		}
	})
}
