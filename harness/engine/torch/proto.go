package torch

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/marlowlab/marlow/harness/engine"
)

// The wire protocol. A frame is a 4-byte little-endian length followed by
// that many bytes of JSON. The client sends requests
// {"id", "op", "args"}; the server answers each with progress frames
// {"id", "progress"} (any number, during long calls) and then exactly one
// final frame {"id", "result"} or {"id", "error": {kind, message,
// traceback}}. Token ids travel as base64 of little-endian int32, log-probs
// as base64 of little-endian float32, and NaN statistics as null.

// Protocol is the protocol version the client speaks; the server's hello
// must report the same.
const Protocol = 1

// maxFrame bounds a frame's length (a corrupt length prefix is an error, not
// a huge allocation).
const maxFrame = 1 << 31

type request struct {
	ID   int64  `json:"id"`
	Op   string `json:"op"`
	Args any    `json:"args"`
}

type reply struct {
	ID       int64           `json:"id"`
	Progress json.RawMessage `json:"progress,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    *ServerError    `json:"error,omitempty"`
}

// ServerError is an error the server reported for one call: a kind (an
// exception class or one of the server's own kinds such as bad_request),
// a message and the Python traceback.
type ServerError struct {
	Op        string `json:"-"`
	Kind      string `json:"kind"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// KindOutOfMemory is the kind of a call that ran out of GPU (or host)
// memory; its message names the operation, the batch and the budget to
// lower, and the server has freed its cache.
const KindOutOfMemory = "out_of_memory"

// Is makes an out_of_memory error match engine.ErrOutOfMemory.
func (e *ServerError) Is(target error) bool {
	return target == engine.ErrOutOfMemory && e.Kind == KindOutOfMemory
}

// Error is the call, kind and message, and the traceback's last lines
// unless the kind is one of the server's own (bad_*, out_of_memory), whose
// message says all.
func (e *ServerError) Error() string {
	s := fmt.Sprintf("torch engine: %s: %s: %s", e.Op, e.Kind, e.Message)
	if tb := strings.TrimSpace(e.Traceback); tb != "" && !strings.HasPrefix(e.Kind, "bad_") && e.Kind != KindOutOfMemory {
		s += "\n" + indent(lastLines(tb, 12))
	}
	return s
}

// writeFrame writes one frame holding the JSON encoding of v.
func writeFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	if len(body) >= maxFrame {
		return fmt.Errorf("encode frame: %d bytes is more than the %d a frame may hold", len(body), maxFrame-1)
	}
	buf := make([]byte, 4+len(body))
	binary.LittleEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	_, err = w.Write(buf)
	return err
}

// readFrame reads one frame's JSON body. A clean end of stream before a
// frame starts is io.EOF; a frame cut short is io.ErrUnexpectedEOF.
func readFrame(r io.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(head[:])
	if n >= maxFrame {
		return nil, fmt.Errorf("frame length %d is more than the %d a frame may hold", n, maxFrame-1)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// tail keeps the last bytes written to it (the server's stderr) and
// forwards everything to an optional writer.
type tail struct {
	mu   sync.Mutex
	buf  []byte
	max  int
	fwd  io.Writer
	fwdE bool
}

func newTail(max int, fwd io.Writer) *tail { return &tail{max: max, fwd: fwd} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0:0], t.buf[len(t.buf)-t.max:]...)
	}
	if t.fwd != nil && !t.fwdE {
		if _, err := t.fwd.Write(p); err != nil {
			t.fwdE = true // a broken log sink must not break the engine
		}
	}
	return len(p), nil
}

// Lines returns the last n lines written.
func (t *tail) Lines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLines(string(t.buf), n)
}

func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	var b strings.Builder
	for sc.Scan() {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("    | ")
		b.WriteString(sc.Text())
	}
	return b.String()
}

// encodeInts is base64 of little-endian int32.
func encodeInts(ids []int32) string {
	b := make([]byte, 4*len(ids))
	for i, v := range ids {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func decodeInts(s string) ([]int32, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("token array: %w", err)
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("token array of %d bytes is not a multiple of 4", len(b))
	}
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

// encodeFloats is base64 of little-endian float32.
func encodeFloats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func decodeFloats(s string) ([]float32, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("float array: %w", err)
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("float array of %d bytes is not a multiple of 4", len(b))
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

// num is a float64 that travels as null when it is NaN (JSON has no NaN).
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

func (n *num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = num(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = num(f)
	return nil
}
