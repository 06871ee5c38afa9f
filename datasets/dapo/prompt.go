package dapo

import (
	"fmt"
	"strings"
)

// The instruction wrapper DAPO-Math-17k puts around every problem. A
// published row's user message is exactly WrapperPrefix + problem +
// WrapperSuffix (the text is quoted from published rows, e.g. the DAPO row
// shown in the README of github.com/lasgroup/SDPO, and from public DAPO
// preprocessing code that builds AIME prompts with the same two strings).
// marlow's workflows add their own answer instructions (Task.Instructions),
// so the reader removes the wrapper and the agents see the problem alone.
const (
	WrapperPrefix = "Solve the following math problem step by step. The last line of your response should be of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
	WrapperSuffix = "\n\nRemember to put your answer on its own line after \"Answer:\"."
)

// Fragments of the wrapper that mark a prompt as a near miss when the exact
// wrapper is not there.
var wrapperMarks = []string{
	"Solve the following math problem step by step",
	"Remember to put your answer on its own line after",
}

// Wrapping says how StripWrapper treated a prompt.
type Wrapping int

// Wrapping outcomes.
const (
	// Stripped: the prompt was exactly WrapperPrefix + problem +
	// WrapperSuffix and the problem was returned.
	Stripped Wrapping = iota
	// Bare: the prompt holds no part of the wrapper; it passed through.
	Bare
	// NearMiss: the prompt holds a fragment of the wrapper but not the exact
	// wrapper (changed wording, spacing or punctuation, or only one half);
	// it passed through unchanged.
	NearMiss
)

func (w Wrapping) String() string {
	switch w {
	case Stripped:
		return "stripped"
	case Bare:
		return "bare"
	case NearMiss:
		return "near miss"
	}
	return fmt.Sprintf("Wrapping(%d)", int(w))
}

// StripWrapper returns the problem statement inside DAPO's instruction
// wrapper. Only the exact published wrapper is removed, byte for byte; any
// other prompt is returned unchanged, with Bare or NearMiss saying whether
// it resembles the wrapper.
func StripWrapper(prompt string) (string, Wrapping) {
	if len(prompt) >= len(WrapperPrefix)+len(WrapperSuffix) &&
		strings.HasPrefix(prompt, WrapperPrefix) && strings.HasSuffix(prompt, WrapperSuffix) {
		return prompt[len(WrapperPrefix) : len(prompt)-len(WrapperSuffix)], Stripped
	}
	for _, m := range wrapperMarks {
		if strings.Contains(prompt, m) {
			return prompt, NearMiss
		}
	}
	return prompt, Bare
}

// Languages of Config.Language.
const (
	LangAll = "all" // every problem (the default)
	LangEN  = "en"  // problems without CJK ideographs (open-r1's "en" config)
	LangCN  = "cn"  // problems with CJK ideographs (open-r1's "cn" config)
)

// HasCJK reports whether s holds a CJK ideograph: a code point in CJK
// Unified Ideographs (U+4E00-U+9FFF), Extension A (U+3400-U+4DBF) or CJK
// Compatibility Ideographs (U+F900-U+FAFF). These are the ranges of the
// contains_chinese function in open-r1's create_dataset.py for
// open-r1/DAPO-Math-17k-Processed, which splits the deduplicated file into
// its "en" (no such character) and "cn" configs. Punctuation, full-width
// forms, kana and the later extensions do not count.
func HasCJK(s string) bool {
	for _, r := range s {
		if (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) || (r >= 0xF900 && r <= 0xFAFF) {
			return true
		}
	}
	return false
}

// keepLanguage reports whether a problem statement passes the language
// filter lang.
func keepLanguage(lang, problem string) bool {
	switch lang {
	case LangEN:
		return !HasCJK(problem)
	case LangCN:
		return HasCJK(problem)
	}
	return true
}
