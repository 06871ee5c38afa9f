package deepcoder

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/sandbox"
)

// Verifier defaults.
const (
	DefaultTestTimeout  = 6 * time.Second
	DefaultTotalTimeout = 60 * time.Second
	DefaultWorkers      = 2
	// FloatTolerance is the absolute and relative tolerance of numeric
	// comparisons.
	FloatTolerance = 1e-6
)

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	// Python is the interpreter (absolute path). Default: the first of
	// /usr/bin/python3, /usr/local/bin/python3, or python3 on PATH with
	// symlinks resolved. It must be executable by the sandbox user.
	Python string
	// TestTimeout bounds each test's wall clock (default 6 s); the CPU
	// limit is its ceiling in seconds.
	TestTimeout time.Duration
	// TotalTimeout bounds all tests of one output (default 60 s).
	TotalTimeout time.Duration
	// Workers bounds concurrent program runs across all Check calls
	// (default 2).
	Workers int
	// Limits are the sandbox limits (timeout and CPU are set from
	// TestTimeout when zero).
	Limits sandbox.Limits
	// TempRoot is where working directories are created (default the
	// system temp dir).
	TempRoot string
	// AllowUnsafe runs code without network isolation (--unsafe-code-exec).
	AllowUnsafe bool
}

// Verifier grades generated Python programs against a problem's tests.
// It is safe for concurrent use.
type Verifier struct {
	cfg  VerifierConfig
	sb   *sandbox.Sandbox
	pool chan struct{}
}

// NewVerifier probes the sandbox and resolves the interpreter.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if cfg.TestTimeout == 0 {
		cfg.TestTimeout = DefaultTestTimeout
	}
	if cfg.TotalTimeout == 0 {
		cfg.TotalTimeout = DefaultTotalTimeout
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.TestTimeout < 0 || cfg.TotalTimeout < 0 || cfg.Workers < 0 {
		return nil, fmt.Errorf("verifier: negative timeout or worker count in %+v", cfg)
	}
	if cfg.Python == "" {
		py, err := findPython()
		if err != nil {
			return nil, err
		}
		cfg.Python = py
	}
	if !filepath.IsAbs(cfg.Python) {
		return nil, fmt.Errorf("verifier: python interpreter %q is not an absolute path", cfg.Python)
	}
	if _, err := os.Stat(cfg.Python); err != nil {
		return nil, fmt.Errorf("verifier: python interpreter: %w", err)
	}
	lim := cfg.Limits
	if lim.Timeout == 0 {
		lim.Timeout = cfg.TestTimeout
	}
	if lim.CPUSeconds == 0 {
		lim.CPUSeconds = uint64(math.Ceil(cfg.TestTimeout.Seconds()))
	}
	sb, err := sandbox.New(sandbox.Config{Limits: lim, TempRoot: cfg.TempRoot, AllowUnsafe: cfg.AllowUnsafe})
	if err != nil {
		return nil, fmt.Errorf("verifier: %w", err)
	}
	return &Verifier{cfg: cfg, sb: sb, pool: make(chan struct{}, cfg.Workers)}, nil
}

// Isolation is the sandbox level applied to every program (for the run
// manifest).
func (v *Verifier) Isolation() sandbox.Isolation { return v.sb.Isolation() }

func findPython() (string, error) {
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		return "", fmt.Errorf("verifier: python3 not found: %w", err)
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("verifier: resolve %s: %w", p, err)
	}
	return filepath.Abs(r)
}

// ExtractCode returns the body and language tag of the last complete
// fenced code block (``` ... ```) of output.
func ExtractCode(output string) (code, lang string, ok bool) {
	lines := strings.Split(output, "\n")
	open := -1
	var blocks [][3]int // start line, end line, open line
	for i, l := range lines {
		s := strings.TrimSpace(l)
		if !strings.HasPrefix(s, "```") {
			continue
		}
		if open < 0 {
			open = i
			continue
		}
		if strings.Trim(s, "`") == "" {
			blocks = append(blocks, [3]int{open + 1, i, open})
			open = -1
		}
	}
	if len(blocks) == 0 {
		return "", "", false
	}
	b := blocks[len(blocks)-1]
	lang = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(lines[b[2]]), "`"))
	return strings.Join(lines[b[0]:b[1]], "\n") + "\n", lang, true
}

var pythonTags = map[string]bool{"": true, "python": true, "python3": true, "py": true, "py3": true}

// resultMarker precedes the JSON result the functional harness prints.
const resultMarker = "\n@@marlow-result@@"

// harness runs a functional test: it loads solution.py, finds the function
// (a Solution method, else a top-level function), calls it with the JSON
// arguments read one per line from stdin, and prints the JSON result after
// the marker.
const harness = `import json, sys
def _plain(x):
    if isinstance(x, (list, tuple)):
        return [_plain(e) for e in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (set, frozenset)):
        return sorted(_plain(e) for e in x)
    return x
_name = sys.argv[1]
_args = [json.loads(l) for l in sys.stdin.read().split("\n") if l.strip()]
_ns = {"__name__": "solution"}
exec(compile(open("solution.py").read(), "solution.py", "exec"), _ns)
if isinstance(_ns.get("Solution"), type) and hasattr(_ns["Solution"], _name):
    _fn = getattr(_ns["Solution"](), _name)
elif callable(_ns.get(_name)):
    _fn = _ns[_name]
else:
    sys.exit("function %s not found" % _name)
_res = _fn(*_args)
sys.stdout.write("\n@@marlow-result@@" + json.dumps(_plain(_res)))
sys.stdout.flush()
`

// Check grades output for p: the last fenced code block must pass every
// test of p.
func (v *Verifier) Check(ctx context.Context, p datasets.Problem, output string) datasets.Verdict {
	code, lang, ok := ExtractCode(output)
	if !ok {
		return datasets.Verdict{Reason: "no fenced code block"}
	}
	if !pythonTags[strings.ToLower(lang)] {
		return datasets.Verdict{Answer: code, Reason: fmt.Sprintf("code block language %q is not Python", lang)}
	}
	if len(p.Tests) == 0 {
		return datasets.Verdict{Answer: code, Reason: "problem has no tests"}
	}
	ctx, cancel := context.WithTimeout(ctx, v.cfg.TotalTimeout)
	defer cancel()
	for k, tc := range p.Tests {
		reason, err := v.runTest(ctx, code, p.FnName, tc)
		if err != nil {
			if ctx.Err() != nil {
				return datasets.Verdict{Answer: code, Reason: fmt.Sprintf("test %d: overall time limit %s reached", k+1, v.cfg.TotalTimeout)}
			}
			return datasets.Verdict{Answer: code, Reason: fmt.Sprintf("test %d: harness error: %v", k+1, err)}
		}
		if reason != "" {
			return datasets.Verdict{Answer: code, Reason: fmt.Sprintf("test %d of %d: %s", k+1, len(p.Tests), reason)}
		}
	}
	return datasets.Verdict{Correct: true, Answer: code, Reason: "ok"}
}

// runTest runs one test; it returns a failure reason ("" when it passed).
func (v *Verifier) runTest(ctx context.Context, code, fn string, tc datasets.Test) (string, error) {
	select {
	case v.pool <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-v.pool }()
	spec := sandbox.Spec{Stdin: []byte(tc.Input)}
	if tc.Functional {
		if fn == "" {
			return "functional test without a function name", nil
		}
		spec.Args = []string{v.cfg.Python, "-I", "harness.py", fn}
		spec.Files = map[string][]byte{"solution.py": []byte(code), "harness.py": []byte(harness)}
	} else {
		spec.Args = []string{v.cfg.Python, "-I", "main.py"}
		spec.Files = map[string][]byte{"main.py": []byte(code)}
	}
	res, err := v.sb.Run(ctx, spec)
	if err != nil {
		return "", err
	}
	if !res.OK() {
		return res.Failure() + lastLine(res.Stderr), nil
	}
	if tc.Functional {
		out := string(res.Stdout)
		i := strings.LastIndex(out, resultMarker)
		if i < 0 {
			return "no result from the function", nil
		}
		got := out[i+len(resultMarker):]
		if !JSONEqual(got, tc.Output) {
			return fmt.Sprintf("returned %.80s, want %.80s", got, tc.Output), nil
		}
		return "", nil
	}
	if !OutputsMatch(string(res.Stdout), tc.Output) {
		return fmt.Sprintf("wrong output %.80q, want %.80q", res.Stdout, tc.Output), nil
	}
	return "", nil
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 120 {
		s = s[:120]
	}
	return " (" + s + ")"
}

// OutputsMatch compares a program's stdout with the expected output: first
// line by line with each line's surrounding whitespace stripped (trailing
// blank lines ignored); failing that, whitespace-separated tokens pairwise,
// equal as strings or as numbers within FloatTolerance.
func OutputsMatch(got, want string) bool {
	gl, wl := strippedLines(got), strippedLines(want)
	if len(gl) == len(wl) {
		same := true
		for i := range gl {
			if gl[i] != wl[i] {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	gt, wt := strings.Fields(got), strings.Fields(want)
	if len(gt) != len(wt) {
		return false
	}
	for i := range gt {
		if gt[i] == wt[i] {
			continue
		}
		a, err1 := strconv.ParseFloat(gt[i], 64)
		b, err2 := strconv.ParseFloat(wt[i], 64)
		if err1 != nil || err2 != nil || !closeEnough(a, b) {
			return false
		}
	}
	return true
}

func strippedLines(s string) []string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func closeEnough(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return false
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= FloatTolerance*math.Max(1, math.Abs(b))
}

// JSONEqual compares a function's JSON result with the expected JSON value:
// structurally, integers exactly, other numbers within FloatTolerance. As in
// the TACO evaluator, a result also matches an expected one-element list
// holding it.
func JSONEqual(got, want string) bool {
	g, err1 := decodeJSON(got)
	w, err2 := decodeJSON(want)
	if err1 != nil || err2 != nil {
		return false
	}
	if valueEqual(g, w) {
		return true
	}
	if wl, ok := w.([]any); ok && len(wl) == 1 {
		return valueEqual(g, wl[0])
	}
	return false
}

func decodeJSON(s string) (any, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func valueEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		bx, okx := new(big.Int).SetString(string(x), 10)
		by, oky := new(big.Int).SetString(string(y), 10)
		if okx && oky {
			return bx.Cmp(by) == 0
		}
		fx, err1 := x.Float64()
		fy, err2 := y.Float64()
		return err1 == nil && err2 == nil && closeEnough(fx, fy)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !valueEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !valueEqual(xv, yv) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}
