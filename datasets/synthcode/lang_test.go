package synthcode

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/keyed"
)

func TestRun(t *testing.T) {
	tests := []struct {
		src, in, want string
	}{
		{"filter >3 | map *2 | sum", "[3 1 5 7]", "24"},
		{"filter > 3|map * 2|sum", "[3 1 5 7]", "24"},
		{"filter\n>3\n|\nsum", "[3 1 5 7]", "12"},
		{"map +1", "[]", "[]"},
		{"map -5", "[1 2]", "[-4 -3]"},
		{"filter <3", "[5 1 2 3]", "[1 2]"},
		{"filter even", "[1 2 3 4]", "[2 4]"},
		{"filter odd", "[-3 -2 1]", "[-3 1]"},
		{"sort", "[3 -1 2]", "[-1 2 3]"},
		{"rev", "[1 2 3]", "[3 2 1]"},
		{"take 2", "[1 2 3]", "[1 2]"},
		{"take 9", "[1 2 3]", "[1 2 3]"},
		{"take 0", "[1 2 3]", "[]"},
		{"drop 2", "[1 2 3]", "[3]"},
		{"drop 5", "[1 2 3]", "[]"},
		{"max", "[4 9 2]", "9"},
		{"min", "[4 9 2]", "2"},
		{"len", "[4 9 2]", "3"},
		{"first", "[4 9 2]", "4"},
		{"last", "[4 9 2]", "2"},
		{"filter >100 | max", "[4 9 2]", "0"},
		{"filter >100 | first", "[4 9 2]", "0"},
		{"sort | rev | take 2 | sum", "[5 1 4 2]", "9"},
	}
	for _, tc := range tests {
		prog, err := Parse(tc.src, DefaultLimits())
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.src, err)
			continue
		}
		in, err := ParseList(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		before := FormatList(in)
		v, err := Run(prog, in, DefaultLimits())
		if err != nil {
			t.Errorf("Run(%q, %s): %v", tc.src, tc.in, err)
			continue
		}
		if got := v.String(); got != tc.want {
			t.Errorf("Run(%q, %s) = %s want %s", tc.src, tc.in, got, tc.want)
		}
		if FormatList(in) != before {
			t.Errorf("Run(%q) modified its input", tc.src)
		}
		// The canonical rendering parses back to the same program.
		again, err := Parse(prog.String(), DefaultLimits())
		if err != nil || again.String() != prog.String() {
			t.Errorf("round trip of %q: %q, %v", prog.String(), again.String(), err)
		}
	}
}

func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		src, want string
	}{
		{"", "empty program"},
		{"   \n ", "empty program"},
		{"sum | map +1", "stage 1: reducer \"sum\" must be the last stage"},
		{"map +1 |", "stage 2: empty stage"},
		{"| sum", "stage 1: empty stage"},
		{"map /2", "map wants +k, -k or *k"},
		{"map +", "missing number"},
		{"map +x", "not a non-negative integer"},
		{"map +-3", "not a non-negative integer"},
		{"filter", "filter wants"},
		{"filter >= 3", "not a non-negative integer"},
		{"filter prime", "filter wants"},
		{"take", "missing number"},
		{"take 1234567890", "more than 9 digits"},
		{"sort 3", "sort takes no argument"},
		{"fold +", "unknown operation \"fold\""},
		{"SUM", "unknown operation"},
		{strings.Repeat("rev|", 40) + "rev", "stages, more than"},
		{strings.Repeat(" ", 3000) + "sum", "bytes, more than"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.src, DefaultLimits())
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%.40q) = %v, want a *SyntaxError", tc.src, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%.40q) error %q, want it to contain %q", tc.src, err, tc.want)
		}
	}
}

func TestLimits(t *testing.T) {
	small := Limits{MaxSource: 100, MaxStages: 8, MaxLen: 5, MaxSteps: 20, MaxAbs: 1000}
	tests := []struct {
		src  string
		in   []int64
		lim  Limits
		want error
	}{
		{"sum", []int64{1, 2, 3, 4, 5, 6}, small, ErrMemory},
		{"rev | rev | rev | rev | rev", []int64{1, 2, 3, 4, 5}, small, ErrSteps},
		{"map *10 | map *10 | map *10", []int64{5}, small, ErrRange},
		{"map +999", []int64{5}, small, ErrRange},
		{"map -999", []int64{-5}, small, ErrRange},
		{"sum", []int64{600, 600}, small, ErrRange},
		{"len", []int64{5000}, small, ErrRange},
		{"map *999999999 | map *999999999 | map *999999999", []int64{999}, DefaultLimits(), ErrRange},
		{"sort", make([]int64, 5000), DefaultLimits(), ErrMemory},
		{"sum", make([]int64, 5000), Limits{MaxSource: 10, MaxStages: 1, MaxLen: 1 << 20, MaxSteps: 1 << 40, MaxAbs: 1 << 62}, ErrMemory},
	}
	for _, tc := range tests {
		prog, err := Parse(tc.src, DefaultLimits())
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.src, err)
		}
		_, err = Run(prog, tc.in, tc.lim)
		if !errors.Is(err, tc.want) {
			t.Errorf("Run(%q) error %v, want %v", tc.src, err, tc.want)
		}
	}
	// Within the limits the same programs run.
	prog, _ := Parse("rev | rev", DefaultLimits())
	if _, err := Run(prog, []int64{1, 2, 3}, small); err != nil {
		t.Errorf("small program under small limits: %v", err)
	}
}

func TestParseList(t *testing.T) {
	for _, s := range []string{"", "1 2", "[1 2", "1 2]", "[1 x]", "[1.5]"} {
		if _, err := ParseList(s); err == nil {
			t.Errorf("ParseList(%q) succeeded", s)
		}
	}
	xs, err := ParseList(" [ -1  2 3 ] ")
	if err != nil || FormatList(xs) != "[-1 2 3]" {
		t.Errorf("ParseList: %v %v", xs, err)
	}
}

// TestRandomPrograms feeds many random token soups to Parse and Run; none
// may panic, and every failure must be an error.
func TestRandomPrograms(t *testing.T) {
	tokens := []string{"map", "filter", "sort", "rev", "take", "drop", "sum", "max", "min", "len", "first", "last",
		"|", "+", "-", "*", ">", "<", "even", "odd", "0", "3", "999999999", "x", " ", "\n", "```", "=", "-7"}
	rng := keyed.NewRNG(1, "fuzz")
	lim := Limits{MaxSource: 200, MaxStages: 16, MaxLen: 64, MaxSteps: 500, MaxAbs: 1 << 40}
	parsed := 0
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := rng.Range(1, 12); n > 0; n-- {
			b.WriteString(tokens[rng.Intn(len(tokens))])
			if rng.Bernoulli(0.6) {
				b.WriteByte(' ')
			}
		}
		prog, err := Parse(b.String(), lim)
		if err != nil {
			continue
		}
		parsed++
		in := make([]int64, rng.Range(0, 80))
		for j := range in {
			in[j] = int64(rng.Range(-1000, 1000))
		}
		_, _ = Run(prog, in, lim)
	}
	if parsed < 100 {
		t.Fatalf("only %d of 20000 random programs parsed; the generator is not exercising Run", parsed)
	}
}

func FuzzParseRun(f *testing.F) {
	for _, s := range []string{"filter >3 | map *2 | sum", "sort | rev | take 2", "map *999999999 | sum", "|", "filter even | len"} {
		f.Add(s, "[3 1 5 7 -2]")
	}
	f.Fuzz(func(t *testing.T, src, input string) {
		prog, err := Parse(src, DefaultLimits())
		if err != nil {
			return
		}
		in, err := ParseList(input)
		if err != nil {
			return
		}
		v, err := Run(prog, in, DefaultLimits())
		if err == nil && !v.Scalar && len(v.List) > len(in) {
			t.Fatalf("%q grew the list from %d to %d", src, len(in), len(v.List))
		}
	})
}

// TestCode writes each kind of stage in its short code, and checks over
// many random programs that two programs share a code only when they are
// the same program.
func TestCode(t *testing.T) {
	cases := []struct{ src, want string }{
		{"map +3 | rev | drop 1", "+3rd1"},
		{"map *3 | rev | drop 1", "*3rd1"},
		{"map -12 | filter >5 | last", "-12>5L"},
		{"filter <4 | sort | first", "<4sF"},
		{"filter even | take 2 | sum", "et2S"},
		{"filter odd | max", "oM"},
		{"rev | min", "rm"},
		{"sort | len", "sn"},
	}
	for _, tc := range cases {
		prog, err := Parse(tc.src, DefaultLimits())
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.src, err)
		}
		if got := prog.Code(); got != tc.want {
			t.Errorf("Code of %q = %q, want %q", tc.src, got, tc.want)
		}
	}
	ops := []string{"map +", "map -", "map *", "filter >", "filter <", "take ", "drop "}
	bare := []string{"filter even", "filter odd", "sort", "rev"}
	ends := []string{"sum", "max", "min", "len", "first", "last"}
	rng := keyed.NewRNG(1, "code")
	byCode := map[string]string{}
	for i := 0; i < 20000; i++ {
		var parts []string
		for n := rng.Range(1, 4); n > 0; n-- {
			if rng.Bernoulli(0.5) {
				parts = append(parts, ops[rng.Intn(len(ops))]+strconv.Itoa(rng.Range(0, 120)))
			} else {
				parts = append(parts, bare[rng.Intn(len(bare))])
			}
		}
		if rng.Bernoulli(0.5) {
			parts = append(parts, ends[rng.Intn(len(ends))])
		}
		prog, err := Parse(strings.Join(parts, " | "), DefaultLimits())
		if err != nil {
			t.Fatalf("Parse(%q): %v", strings.Join(parts, " | "), err)
		}
		code, src := prog.Code(), prog.String()
		if prev, ok := byCode[code]; ok && prev != src {
			t.Fatalf("programs %q and %q share the code %q", prev, src, code)
		}
		byCode[code] = src
	}
	if len(byCode) < 5000 {
		t.Fatalf("only %d distinct programs drawn; the check is not exercising Code", len(byCode))
	}
}
