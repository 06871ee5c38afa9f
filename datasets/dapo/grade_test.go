package dapo

import (
	"strings"
	"testing"
)

type gradeCase struct {
	name    string
	output  string
	truth   string
	mode    string
	correct bool
	answer  string // normalised prediction; "" when none found
}

var (
	pad300 = strings.Repeat("x", 300)
	pad280 = strings.Repeat("y", 280)
)

// gradeCases pin the published rule's behaviour, quirks included; the
// expectations were cross-checked against the reference implementation.
var gradeCases = []gradeCase{
	// extraction
	{"plain", "Answer: 42", "42", ModeAnswer, true, "42"},
	{"lower case", "so the answer: 42", "42", ModeAnswer, true, "42"},
	{"upper case spaced colon", "ANSWER : 42", "42", ModeAnswer, true, "42"},
	{"no space", "Answer:42", "42", ModeAnswer, true, "42"},
	{"no colon", "The answer is 42", "42", ModeAnswer, false, ""},
	{"last line wins", "Answer: 41\nAnswer: 42", "42", ModeAnswer, true, "42"},
	{"last line wins wrong", "Answer: 42\nAnswer: 41", "42", ModeAnswer, false, "41"},
	{"final answer prefix", "Final Answer: 42", "42", ModeAnswer, true, "42"},
	{"two on one line", "Answer: 42 Answer: 43", "43", ModeAnswer, false, "42Answer:43"},
	{"newline after colon", "Answer:\n42", "42", ModeAnswer, true, "42"},
	{"prose after colon", "Answer:\nThe final value is 42", "42", ModeAnswer, false, "Thefinalvalueis42"},
	{"trailing text lines", "Answer: 7\n\nHope this helps.", "7", ModeAnswer, true, "7"},
	{"crlf", "Answer: 42\r\n", "42", ModeAnswer, true, "42"},
	{"nbsp after colon", "Answer:\u00a042", "42", ModeAnswer, true, "42"},
	{"nbsp trailing", "Answer: 42\u00a0", "42", ModeAnswer, true, "42"},
	{"empty output", "", "42", ModeAnswer, false, ""},
	{"invalid placeholder quirk", "no answer here", "[INVALID]", ModeAnswer, true, ""},
	// the 300-character window
	{"outside window", "Answer: 42\n" + pad300, "42", ModeAnswer, false, ""},
	{"inside window", "Answer: 42\n" + pad280, "42", ModeAnswer, true, "42"},
	{"window cuts number", "Answer: 123\n" + strings.Repeat("y", 296), "123", ModeAnswer, false, ""},
	{"window counts characters 300", "Answer: 42\n" + strings.Repeat("é", 289), "42", ModeAnswer, true, "42"},
	{"window counts characters 301", "Answer: 42\n" + strings.Repeat("é", 290), "42", ModeAnswer, false, ""},
	// numbers
	{"thousands", "Answer: 1,000", "1000", ModeAnswer, true, "1000"},
	{"millions", "Answer: 1,000,000", "1000000", ModeAnswer, true, "1000000"},
	{"thousands decimal kept", "Answer: 1,000.5", "1000.5", ModeAnswer, false, "1,000.5"},
	{"list collapses quirk", "Answer: 1,2", "12", ModeAnswer, true, "12"},
	{"spaced list collapses quirk", "Answer: 1, 2, 3", "123", ModeAnswer, true, "123"},
	{"negative", "Answer: -3", "-3", ModeAnswer, true, "-3"},
	{"sign matters", "Answer: 3", "-3", ModeAnswer, false, "3"},
	{"trailing period", "Answer: 42.", "42", ModeAnswer, false, "42."},
	{"period inside math", "Answer: $42.$", "42", ModeAnswer, true, "42"},
	{"inner space removed", "Answer: 4 2", "42", ModeAnswer, true, "42"},
	{"decimal vs fraction", "Answer: 0.5", "\\frac{1}{2}", ModeAnswer, false, "0.5"},
	{"thin space not removed", "Answer: 2\\,000", "2000", ModeAnswer, false, "2\\,000"},
	{"braced comma removed", "Answer: 2{,}000", "2000", ModeAnswer, true, "2000"},
	{"negative thin space removed", "Answer: 2,\\!000", "2000", ModeAnswer, true, "2000"},
	{"superscript digits isdigit", "Answer: 1,²", "1²", ModeAnswer, true, "1²"},
	// equations
	{"after equals", "Answer: x = 5", "5", ModeAnswer, true, "5"},
	{"last equals only", "Answer: x=5, y=6", "6", ModeAnswer, true, "6"},
	{"truth with equals", "Answer: 3", "x=3", ModeAnswer, true, "3"},
	{"inequality kept", "Answer: x<5", "x<5", ModeAnswer, true, "x<5"},
	// LaTeX wrappers
	{"dollars", "Answer: $42$", "42", ModeAnswer, true, "42"},
	{"boxed", "Answer: \\boxed{42}", "42", ModeAnswer, true, "42"},
	{"boxed in dollars", "Answer: $\\boxed{42}$", "42", ModeAnswer, true, "42"},
	{"boxed then prose greedy", "Answer: \\boxed{42} is the answer", "42", ModeAnswer, false, "42istheanswer"},
	{"text", "Answer: \\text{(A)}", "(A)", ModeAnswer, true, "(A)"},
	{"textbf", "Answer: \\textbf{7}", "7", ModeAnswer, true, "7"},
	{"overline", "Answer: \\overline{AB}", "AB", ModeAnswer, true, "AB"},
	{"mbox", "Answer: \\mbox{Monday}", "Monday", ModeAnswer, true, "Monday"},
	{"text monday", "Answer: \\text{Monday}", "Monday", ModeAnswer, true, "Monday"},
	{"first math only", "Answer: $x$ and $y$", "x", ModeAnswer, true, "x"},
	{"escaped dollar", "Answer: \\$5", "5", ModeAnswer, true, "5"},
	{"percent kept", "Answer: 5\\%", "5\\%", ModeAnswer, true, "5\\%"},
	{"percent mismatch", "Answer: 5%", "5\\%", ModeAnswer, false, "5%"},
	{"tuple spacing", "Answer: (1, 2)", "(1,2)", ModeAnswer, true, "(1,2)"},
	{"text and", "Answer: 1\\text{ and }2", "1,2", ModeAnswer, true, "12"},
	// \frac and \sqrt shorthands
	{"frac shorthand", "Answer: \\frac12", "\\frac{1}{2}", ModeAnswer, true, "\\frac{1}{2}"},
	{"frac shorthand in truth", "Answer: \\frac{1}{2}", "\\frac12", ModeAnswer, true, "\\frac{1}{2}"},
	{"frac half shorthand quirk", "Answer: \\frac1{2}", "\\frac{1}{2}", ModeAnswer, false, "\\frac{1}{{}2}"},
	{"dfrac not normalised", "Answer: \\dfrac{3}{4}", "\\frac{3}{4}", ModeAnswer, false, "\\dfrac{3}{4}"},
	{"dfrac shorthand", "Answer: \\dfrac34", "\\dfrac{3}{4}", ModeAnswer, true, "\\dfrac{3}{4}"},
	{"boxed frac", "answer : \\boxed{\\frac{3}{4}}", "\\frac{3}{4}", ModeAnswer, true, "\\frac{3}{4}"},
	{"slash vs frac", "Answer: 1/2", "\\frac{1}{2}", ModeAnswer, false, "1/2"},
	{"sqrt shorthand", "Answer: \\sqrt2", "\\sqrt{2}", ModeAnswer, true, "\\sqrt{2}"},
	{"sqrt shorthand in truth", "Answer: \\sqrt{2}", "\\sqrt2", ModeAnswer, true, "\\sqrt{2}"},
	{"coefficient sqrt", "Answer: 2\\sqrt3", "2\\sqrt{3}", ModeAnswer, true, "2\\sqrt{3}"},
	{"spaced sqrt truth", "Answer: 3\\sqrt{2}", "3 \\sqrt 2", ModeAnswer, true, "3\\sqrt{2}"},
	{"sqrt two digits quirk", "Answer: \\sqrt12", "\\sqrt{12}", ModeAnswer, false, "\\sqrt{1}2"},
	// units and removals
	{"degrees circ", "Answer: 90^\\circ", "90", ModeAnswer, true, "90"},
	{"degrees braced circ", "Answer: 90^{\\circ}", "90", ModeAnswer, true, "90"},
	{"dollars word", "Answer: 5 dollars", "5", ModeAnswer, true, "5"},
	{"inches", "Answer: 12 inches", "12", ModeAnswer, true, "12"},
	{"ways", "Answer: 3 ways", "3", ModeAnswer, true, "3"},
	{"students", "Answer: 10 students", "10", ModeAnswer, true, "10"},
	{"meters", "Answer: 5 meters", "5", ModeAnswer, true, "5"},
	{"bare m unit kept", "Answer: 5 m", "5", ModeAnswer, false, "5m"},
	{"text cm", "Answer: 5\\text{ cm}", "5", ModeAnswer, true, "5"},
	{"text m", "Answer: 5\\text{m}", "5", ModeAnswer, true, "5"},
	{"kmph quirk", "Answer: 5 kmph", "5", ModeAnswer, false, "5k"},
	{"km", "Answer: 5 km", "5", ModeAnswer, true, "5"},
	{"sue removed inside words quirk", "Answer: issue", "is", ModeAnswer, true, "is"},
	{"capital Sue kept", "Answer: Sue", "Sue", ModeAnswer, true, "Sue"},
	{"article an removed", "Answer: an apple", "apple", ModeAnswer, true, "apple"},
	{"article a removed", "Answer: a banana", "banana", ModeAnswer, true, "banana"},
	{"a inside word quirk", "Answer: pizza pie", "pizzpie", ModeAnswer, true, "pizzpie"},
	{"ldots removed", "Answer: 1,2,\\ldots", "1,2,", ModeAnswer, true, "12"},
	{"quotes removed", "Answer: \"yes\"", "yes", ModeAnswer, true, "yes"},
	{"thick space removed", "Answer: 1\\;000", "1000", ModeAnswer, true, "1000"},
	{"th removed", "Answer: 5\\mathrm{th}", "5", ModeAnswer, true, "5"},
	// boxed mode
	{"boxed mode plain", "so \\boxed{42}", "42", ModeBoxed, true, "42"},
	{"boxed mode frac", "\\boxed{\\frac{1}{2}}", "\\frac12", ModeBoxed, true, "\\frac{1}{2}"},
	{"boxed mode last box", "\\boxed{1} then \\boxed{2}", "2", ModeBoxed, true, "2"},
	{"boxed mode unbalanced", "\\boxed{42", "42", ModeBoxed, false, ""},
	{"boxed mode ignores answer line", "Answer: 42", "42", ModeBoxed, false, ""},
	{"boxed mode thousands", "\\boxed{1,000}", "1000", ModeBoxed, true, "1000"},
	{"boxed mode far from end", "\\boxed{7}\n" + pad300, "7", ModeBoxed, true, "7"},
	{"boxed mode nested text", "\\boxed{\\text{yes}}", "yes", ModeBoxed, true, "yes"},
	{"boxed mode no braces", "\\boxed 42", "42", ModeBoxed, false, ""},
	{"boxed mode fbox", "\\fbox{42}", "42", ModeBoxed, false, ""},
	{"boxed mode wrong", "\\boxed{41}", "42", ModeBoxed, false, "41"},
	{"unknown mode", "Answer: 42", "42", "latex", false, ""},
}

func TestGrade(t *testing.T) {
	if len(gradeCases) < 80 {
		t.Fatalf("only %d cases", len(gradeCases))
	}
	seen := map[string]bool{}
	for _, tc := range gradeCases {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			v := Grade(tc.output, tc.truth, tc.mode)
			if v.Correct != tc.correct || v.Answer != tc.answer {
				t.Fatalf("Grade(%q, %q, %q) = %+v; want correct=%v answer=%q", tc.output, tc.truth, tc.mode, v, tc.correct, tc.answer)
			}
			if v.Reason == "" || (v.Correct != (v.Reason == "ok")) {
				t.Fatalf("reason %q inconsistent with correct=%v", v.Reason, v.Correct)
			}
		})
	}
}
