package dapo

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/marlowlab/marlow/datasets"
)

// Answer modes.
const (
	// ModeAnswer is the published rule: the last "Answer:" line in the last
	// 300 characters, normalised, compared exactly with the normalised
	// ground truth.
	ModeAnswer = "answer"
	// ModeBoxed takes the content of the last \boxed{...} of the output (the
	// whole output, since a boxed answer may be followed by a summary),
	// normalised the same way.
	ModeBoxed = "boxed"
)

// tailChars is how much of the output the published rule looks at.
const tailChars = 300

// invalid is what the published rule uses as the prediction when it finds
// no answer; it is normalised and compared like any answer.
const invalid = "[INVALID]"

// pySpace is Python's \s for str patterns (str.isspace), which is wider
// than Go's ASCII \s.
const pySpace = `[\t\n\v\f\r\x{1c}-\x{1f}\x{85}\p{Z}]`

var (
	answerRE = regexp.MustCompile(`(?i)Answer` + pySpace + `*:` + pySpace + `*([^\n]+)`)
	dollarRE = regexp.MustCompile(`(.*?)(\$)(.*?)(\$)(.*)`)
	textRE   = regexp.MustCompile(`(\\text\{)(.*?)(\})`)
	textbfRE = regexp.MustCompile(`(\\textbf\{)(.*?)(\})`)
	overRE   = regexp.MustCompile(`(\\overline\{)(.*?)(\})`)
	boxedRE  = regexp.MustCompile(`(\\boxed\{)(.*)(\})`)
	fracRE   = regexp.MustCompile(`(frac)([^{])(.)`)
	sqrtRE   = regexp.MustCompile(`(sqrt)([^{])`)
)

// substitutions are applied in order, then removals.
var substitutions = [][2]string{
	{"an ", ""},
	{"a ", ""},
	{".$", "$"},
	{`\$`, ""},
	{`\ `, ""},
	{" ", ""},
	{"mbox", "text"},
	{`,\text{and}`, ","},
	{`\text{and}`, ","},
	{`\text{m}`, `\text{}`},
}

var removals = []string{
	"square", "ways", "integers", "dollars", "mph", "inches", "hours", "km",
	"units", `\ldots`, "sue", "points", "feet", "minutes", "digits", "cents",
	"degrees", "cm", "gm", "pounds", "meters", "meals", "edges", "students",
	"childrentickets", "multiples", `\text{s}`, `\text{.}`, "\\text{\ns}",
	`\text{}^2`, `\text{}^3`, "\\text{\n}", `\text{}`, `\mathrm{th}`,
	`^\circ`, `^{\circ}`, `\;`, `,\!`, "{,}", `"`, `\dots`,
}

// Normalize applies the published rule's answer normalisation: keep the
// text after the last '=', apply the substitution and removal lists,
// unwrap $...$, \text{}, \textbf{}, \overline{} and \boxed{}, expand the
// \frac and \sqrt shorthands, drop '$', drop the commas of a number made
// only of digits and commas, and trim whitespace. Its quirks are kept on
// purpose (for example "a " and "an " are deleted anywhere, so "banana "
// loses letters, and "km" is deleted inside words).
func Normalize(s string) string {
	if i := strings.LastIndex(s, "="); i >= 0 {
		s = s[i+1:]
	}
	for _, sub := range substitutions {
		s = strings.ReplaceAll(s, sub[0], sub[1])
	}
	for _, r := range removals {
		s = strings.ReplaceAll(s, r, "")
	}
	s = dollarRE.ReplaceAllString(s, "$$${3}$$")
	s = textRE.ReplaceAllString(s, "${2}")
	s = textbfRE.ReplaceAllString(s, "${2}")
	s = overRE.ReplaceAllString(s, "${2}")
	s = boxedRE.ReplaceAllString(s, "${2}")
	s = fracRE.ReplaceAllString(s, "frac{${2}}{${3}}")
	s = sqrtRE.ReplaceAllString(s, "sqrt{${2}}")
	s = strings.ReplaceAll(s, "$", "")
	if isPyDigits(strings.ReplaceAll(s, ",", "")) {
		s = strings.ReplaceAll(s, ",", "")
	}
	return strings.TrimFunc(s, isPySpace)
}

// ExtractAnswer returns the text after the last "Answer:" (any case) in the
// last 300 characters of output, and whether one was found.
func ExtractAnswer(output string) (string, bool) {
	m := answerRE.FindAllStringSubmatch(lastChars(output, tailChars), -1)
	if len(m) == 0 {
		return "", false
	}
	return m[len(m)-1][1], true
}

// LastBoxed returns the content of the last \boxed{...} of s with balanced
// braces, and whether one was found.
func LastBoxed(s string) (string, bool) {
	const left = `\boxed{`
	idx := strings.LastIndex(s, left)
	if idx < 0 {
		return "", false
	}
	depth := 0
	for i := idx; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[idx+len(left) : i], true
			}
		}
	}
	return "", false
}

// Grade grades output against truth in the given mode (ModeAnswer or
// ModeBoxed). Verdict.Answer is the normalised prediction, or "" when the
// output holds no answer.
func Grade(output, truth, mode string) datasets.Verdict {
	var raw string
	var found bool
	switch mode {
	case ModeAnswer, "":
		raw, found = ExtractAnswer(output)
	case ModeBoxed:
		raw, found = LastBoxed(output)
	default:
		return datasets.Verdict{Reason: fmt.Sprintf("unknown answer mode %q (want %q or %q)", mode, ModeAnswer, ModeBoxed)}
	}
	gt := Normalize(truth)
	if !found {
		// The published rule grades the placeholder like an answer.
		if Normalize(invalid) == gt {
			return datasets.Verdict{Correct: true, Reason: "ok"}
		}
		if mode == ModeBoxed {
			return datasets.Verdict{Reason: `no \boxed{} answer`}
		}
		return datasets.Verdict{Reason: "no Answer: line in the last 300 characters"}
	}
	pred := Normalize(raw)
	if pred != gt {
		return datasets.Verdict{Answer: pred, Reason: fmt.Sprintf("answer %q != %q", pred, gt)}
	}
	return datasets.Verdict{Correct: true, Answer: pred, Reason: "ok"}
}

// lastChars returns the last n characters (code points) of s, like
// Python's s[-n:].
func lastChars(s string, n int) string {
	skip := utf8.RuneCountInString(s) - n
	if skip <= 0 {
		return s
	}
	for i := range s {
		if skip == 0 {
			return s[i:]
		}
		skip--
	}
	return ""
}

// isPySpace is Python's str.isspace for one character.
func isPySpace(r rune) bool {
	switch {
	case r >= '\t' && r <= '\r', r >= 0x1c && r <= 0x1f, r == 0x85:
		return true
	}
	return unicode.In(r, unicode.Z)
}

// pyDigitRanges are the characters Python's str.isdigit accepts beyond the
// decimal digits (category Nd): superscripts, circled digits and the like.
var pyDigitRanges = [][2]rune{
	{0xB2, 0xB3}, {0xB9, 0xB9}, {0x1369, 0x1371}, {0x19DA, 0x19DA},
	{0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2460, 0x2468},
	{0x2474, 0x247C}, {0x2488, 0x2490}, {0x24EA, 0x24EA}, {0x24F5, 0x24FD},
	{0x24FF, 0x24FF}, {0x2776, 0x277E}, {0x2780, 0x2788}, {0x278A, 0x2792},
	{0x10A40, 0x10A43}, {0x10E60, 0x10E68}, {0x11052, 0x1105A}, {0x1F100, 0x1F10A},
}

// isPyDigits is Python's str.isdigit: non-empty and every character a digit.
func isPyDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if unicode.IsDigit(r) {
			continue
		}
		ok := false
		for _, rg := range pyDigitRanges {
			if r >= rg[0] && r <= rg[1] {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
