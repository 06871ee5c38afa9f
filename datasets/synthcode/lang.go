package synthcode

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The pipeline language. A program is a list of stages separated by "|";
// it reads a list of integers and either yields a list or, when its last
// stage is a reducer, one integer. Whitespace, newlines included, may
// appear anywhere between tokens.
//
//	map +k   map -k   map *k     add, subtract or multiply each element by k
//	filter >k   filter <k        keep the elements greater / less than k
//	filter even   filter odd     keep the even / odd elements
//	sort   rev                   sort ascending / reverse
//	take k   drop k              keep / remove the first k elements
//	sum max min len first last   reducers; only as the last stage
//
// Constants k are non-negative decimal integers of at most 9 digits.
// max, min, first and last of an empty list are 0, as is sum.

// Stage is one parsed stage.
type Stage struct {
	Op  string // map, filter, sort, rev, take, drop, sum, max, min, len, first, last
	Sym string // map: "+", "-", "*"; filter: ">", "<", "even", "odd"
	K   int64  // the constant of map, filter >/<, take, drop
}

// Program is a parsed pipeline.
type Program []Stage

var reducers = map[string]bool{"sum": true, "max": true, "min": true, "len": true, "first": true, "last": true}

// IsReducer reports whether s ends a pipeline with a single integer.
func (s Stage) IsReducer() bool { return reducers[s.Op] }

// String renders the stage canonically, e.g. "map *2" or "filter even".
func (s Stage) String() string {
	switch s.Op {
	case "map":
		return "map " + s.Sym + strconv.FormatInt(s.K, 10)
	case "filter":
		if s.Sym == "even" || s.Sym == "odd" {
			return "filter " + s.Sym
		}
		return "filter " + s.Sym + strconv.FormatInt(s.K, 10)
	case "take", "drop":
		return s.Op + " " + strconv.FormatInt(s.K, 10)
	default:
		return s.Op
	}
}

// stageCodes are the one-letter codes of the operations that Code writes
// as a letter (map and filter > and < write their symbol instead).
var stageCodes = map[string]string{
	"sort": "s", "rev": "r", "take": "t", "drop": "d",
	"sum": "S", "max": "M", "min": "m", "len": "n", "first": "F", "last": "L",
}

// Code writes the stage in its short code: a map or a filter > or < as
// its symbol and constant ("+3", ">5"), filter even and odd as "e" and
// "o", take and drop as "t" and "d" with their constant ("t2"), and the
// other operations as one letter (stageCodes: sort "s", rev "r", sum
// "S", max "M", min "m", len "n", first "F", last "L"). Every code starts
// with a symbol or letter and its constant follows in digits, so codes
// written one after another read back unambiguously.
func (s Stage) Code() string {
	switch {
	case s.Op == "map", s.Op == "filter" && (s.Sym == ">" || s.Sym == "<"):
		return s.Sym + strconv.FormatInt(s.K, 10)
	case s.Op == "filter":
		return s.Sym[:1] // "e" or "o"
	case s.Op == "take", s.Op == "drop":
		return stageCodes[s.Op] + strconv.FormatInt(s.K, 10)
	}
	return stageCodes[s.Op]
}

// Code writes the program as its stages' codes with nothing between them
// ("map +3 | rev | drop 1" is "+3rd1"): about a fifth of the characters
// of String, and two programs share a code only when they are the same
// program. A character-level model can compare two codes as it compares
// two numbers, where two programs that differ mostly differ in one
// character of twenty.
func (p Program) Code() string {
	var b strings.Builder
	for _, s := range p {
		b.WriteString(s.Code())
	}
	return b.String()
}

// String renders the program canonically, stages joined by " | ".
func (p Program) String() string {
	parts := make([]string, len(p))
	for i, s := range p {
		parts[i] = s.String()
	}
	return strings.Join(parts, " | ")
}

// Limits bound parsing and execution. Every field must be set (the zero
// Limits rejects every program); start from DefaultLimits. Whatever the
// limits say, magnitudes are capped at 2^50 and lists at 4096 elements, so
// no arithmetic can overflow int64.
type Limits struct {
	MaxSource int   // longest accepted source text in bytes
	MaxStages int   // most stages in a program
	MaxLen    int   // longest list a program may hold (input included)
	MaxSteps  int64 // most element operations over a whole run
	MaxAbs    int64 // largest magnitude of any value
}

// DefaultLimits are generous for the task's programs and tight enough that
// no output can slow the harness.
func DefaultLimits() Limits {
	return Limits{MaxSource: 2000, MaxStages: 32, MaxLen: 4096, MaxSteps: 200_000, MaxAbs: 1_000_000_000_000}
}

// SyntaxError reports a program that does not parse.
type SyntaxError struct {
	Stage int // 1-based stage number; 0 for the whole program
	Msg   string
}

func (e *SyntaxError) Error() string {
	if e.Stage == 0 {
		return "syntax error: " + e.Msg
	}
	return fmt.Sprintf("syntax error in stage %d: %s", e.Stage, e.Msg)
}

// Errors of execution.
var (
	ErrSteps  = errors.New("step limit exceeded")
	ErrMemory = errors.New("list length limit exceeded")
	ErrRange  = errors.New("value out of range")
)

// Parse reads a program under the limits in lim.
func Parse(src string, lim Limits) (Program, error) {
	if len(src) > lim.MaxSource {
		return nil, &SyntaxError{Msg: fmt.Sprintf("program is %d bytes, more than %d", len(src), lim.MaxSource)}
	}
	if strings.TrimSpace(src) == "" {
		return nil, &SyntaxError{Msg: "empty program"}
	}
	parts := strings.Split(src, "|")
	if len(parts) > lim.MaxStages {
		return nil, &SyntaxError{Msg: fmt.Sprintf("%d stages, more than %d", len(parts), lim.MaxStages)}
	}
	prog := make(Program, 0, len(parts))
	for i, part := range parts {
		st, err := parseStage(part)
		if err != nil {
			return nil, &SyntaxError{Stage: i + 1, Msg: err.Error()}
		}
		if st.IsReducer() && i != len(parts)-1 {
			return nil, &SyntaxError{Stage: i + 1, Msg: fmt.Sprintf("reducer %q must be the last stage", st.Op)}
		}
		prog = append(prog, st)
	}
	return prog, nil
}

func parseStage(s string) (Stage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Stage{}, errors.New("empty stage")
	}
	word, rest := s, ""
	if i := strings.IndexAny(s, " \t\r\n"); i >= 0 {
		word, rest = s[:i], strings.TrimSpace(s[i:])
	}
	noArg := func(st Stage) (Stage, error) {
		if rest != "" {
			return Stage{}, fmt.Errorf("%s takes no argument, got %q", word, rest)
		}
		return st, nil
	}
	switch word {
	case "sort", "rev", "sum", "max", "min", "len", "first", "last":
		return noArg(Stage{Op: word})
	case "take", "drop":
		k, err := parseConst(rest)
		if err != nil {
			return Stage{}, fmt.Errorf("%s: %w", word, err)
		}
		return Stage{Op: word, K: k}, nil
	case "map":
		if rest == "" || !strings.ContainsRune("+-*", rune(rest[0])) {
			return Stage{}, fmt.Errorf("map wants +k, -k or *k, got %q", rest)
		}
		k, err := parseConst(strings.TrimSpace(rest[1:]))
		if err != nil {
			return Stage{}, fmt.Errorf("map %c: %w", rest[0], err)
		}
		return Stage{Op: "map", Sym: rest[:1], K: k}, nil
	case "filter":
		if rest == "even" || rest == "odd" {
			return Stage{Op: "filter", Sym: rest}, nil
		}
		if rest == "" || (rest[0] != '>' && rest[0] != '<') {
			return Stage{}, fmt.Errorf("filter wants >k, <k, even or odd, got %q", rest)
		}
		k, err := parseConst(strings.TrimSpace(rest[1:]))
		if err != nil {
			return Stage{}, fmt.Errorf("filter %c: %w", rest[0], err)
		}
		return Stage{Op: "filter", Sym: rest[:1], K: k}, nil
	}
	return Stage{}, fmt.Errorf("unknown operation %q", word)
}

func parseConst(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("missing number")
	}
	if len(s) > 9 {
		return 0, fmt.Errorf("number %q has more than 9 digits", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a non-negative integer", s)
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// Value is a program's result: a list, or one integer when Scalar.
type Value struct {
	Scalar bool
	N      int64
	List   []int64
}

// String renders a value as tests store it: "12" or "[6 8]" ("[]" empty).
func (v Value) String() string {
	if v.Scalar {
		return strconv.FormatInt(v.N, 10)
	}
	return FormatList(v.List)
}

// FormatList renders a list as "[a b c]".
func FormatList(xs []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(x, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// ParseList reads a list written by FormatList.
func ParseList(s string) ([]int64, error) {
	s = strings.TrimSpace(s)
	body, ok := strings.CutPrefix(s, "[")
	if ok {
		body, ok = strings.CutSuffix(body, "]")
	}
	if !ok {
		return nil, fmt.Errorf("list %q is not of the form [a b c]", s)
	}
	out := []int64{}
	for _, f := range strings.Fields(body) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("list %q: element %q is not an integer", s, f)
		}
		out = append(out, v)
	}
	return out, nil
}

// Run executes prog on input under lim. It never modifies input.
func Run(prog Program, input []int64, lim Limits) (Value, error) {
	if len(input) > lim.MaxLen {
		return Value{}, fmt.Errorf("input of %d elements: %w (%d)", len(input), ErrMemory, lim.MaxLen)
	}
	var steps int64
	charge := func(n int64) error {
		steps += n
		if steps > lim.MaxSteps {
			return fmt.Errorf("%w (%d)", ErrSteps, lim.MaxSteps)
		}
		return nil
	}
	// Capping magnitudes at 2^50 keeps every sum of at most 2^12 elements
	// and every checked product inside int64.
	maxAbs := min(lim.MaxAbs, 1<<50)
	if len(input) > 1<<12 {
		return Value{}, fmt.Errorf("input of %d elements: %w (hard cap %d)", len(input), ErrMemory, 1<<12)
	}
	xs := slices.Clone(input)
	for _, x := range xs {
		if x > maxAbs || x < -maxAbs {
			return Value{}, fmt.Errorf("input element %d: %w (|v| <= %d)", x, ErrRange, maxAbs)
		}
	}
	for i, st := range prog {
		if err := charge(int64(len(xs)) + 1); err != nil {
			return Value{}, fmt.Errorf("stage %d (%s): %w", i+1, st, err)
		}
		var err error
		switch st.Op {
		case "map":
			for j, x := range xs {
				if xs[j], err = mapOne(x, st, maxAbs); err != nil {
					return Value{}, fmt.Errorf("stage %d (%s): %w", i+1, st, err)
				}
			}
		case "filter":
			kept := xs[:0]
			for _, x := range xs {
				if keep(x, st) {
					kept = append(kept, x)
				}
			}
			xs = kept
		case "sort":
			// Charge n log n comparisons on top of the linear pass.
			if err := charge(int64(len(xs)) * int64(bitsLen(len(xs)))); err != nil {
				return Value{}, fmt.Errorf("stage %d (%s): %w", i+1, st, err)
			}
			slices.Sort(xs)
		case "rev":
			slices.Reverse(xs)
		case "take":
			if st.K < int64(len(xs)) {
				xs = xs[:st.K]
			}
		case "drop":
			if st.K < int64(len(xs)) {
				xs = xs[st.K:]
			} else {
				xs = xs[:0]
			}
		default:
			n := reduce(xs, st.Op)
			if n > maxAbs || n < -maxAbs {
				return Value{}, fmt.Errorf("stage %d (%s): result %d: %w (|v| <= %d)", i+1, st, n, ErrRange, maxAbs)
			}
			return Value{N: n, Scalar: true}, nil
		}
	}
	return Value{List: xs}, nil
}

func bitsLen(n int) int {
	b := 0
	for n > 0 {
		b++
		n >>= 1
	}
	return b
}

func mapOne(x int64, st Stage, maxAbs int64) (int64, error) {
	var r int64
	switch st.Sym {
	case "+":
		r = x + st.K
	case "-":
		r = x - st.K
	default:
		// |x| <= maxAbs <= 2^50 and K < 10^9: check before multiplying.
		if st.K != 0 && (x > maxAbs/st.K || x < -maxAbs/st.K) {
			return 0, fmt.Errorf("%d * %d: %w (|v| <= %d)", x, st.K, ErrRange, maxAbs)
		}
		r = x * st.K
	}
	if r > maxAbs || r < -maxAbs {
		return 0, fmt.Errorf("%d %s %d: %w (|v| <= %d)", x, st.Sym, st.K, ErrRange, maxAbs)
	}
	return r, nil
}

func keep(x int64, st Stage) bool {
	switch st.Sym {
	case ">":
		return x > st.K
	case "<":
		return x < st.K
	case "even":
		return x%2 == 0
	default:
		return x%2 != 0
	}
}

func reduce(xs []int64, op string) int64 {
	if len(xs) == 0 {
		return 0
	}
	switch op {
	case "sum":
		var s int64
		for _, x := range xs {
			s += x
		}
		return s
	case "max":
		return slices.Max(xs)
	case "min":
		return slices.Min(xs)
	case "len":
		return int64(len(xs))
	case "first":
		return xs[0]
	default:
		return xs[len(xs)-1]
	}
}
