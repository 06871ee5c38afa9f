package spec

import (
	"bytes"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// editDistance is the Levenshtein distance between a and b (in bytes; spec
// keys and values are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// closest returns the option nearest to v when it is near enough to be a
// likely typo: the same ignoring case, '-' and '_', or within an edit
// distance of 1 (values of up to 5 characters, and for up to 4 with the same
// first letter) or 2 (longer ones), or an unambiguous prefix of at least 3
// characters. Ties go to the first option.
func closest(v string, options []string) (string, bool) {
	norm := func(s string) string { return strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(s)) }
	for _, o := range options {
		if o != v && norm(o) == norm(v) {
			return o, true
		}
	}
	if len(v) < 3 {
		return "", false // too short to tell a typo from another name
	}
	limit := 1
	if len(v) > 5 {
		limit = 2
	}
	best, bestD := "", limit+1
	for _, o := range options {
		// a short value that differs in its first letter is another name
		// rather than a typo ("tpu" is not "cpu")
		if len(v) <= 4 && !strings.EqualFold(v[:1], o[:min(1, len(o))]) {
			continue
		}
		if d := editDistance(strings.ToLower(v), strings.ToLower(o)); d < bestD {
			best, bestD = o, d
		}
	}
	if bestD <= limit && best != v {
		return best, true
	}
	var hits []string
	for _, o := range options {
		if o != v && strings.HasPrefix(o, v) {
			hits = append(hits, o)
		}
	}
	if len(hits) == 1 {
		return hits[0], true
	}
	return "", false
}

// didYouMean returns ` did you mean "x"?` for a near miss, or "".
func didYouMean(v string, options []string) string {
	if o, ok := closest(v, options); ok {
		return fmt.Sprintf(" did you mean %q?", o)
	}
	return ""
}

// syntaxError turns a yaml.v3 syntax error on data into a message and the
// line of the problem. yaml.v3 reports the line where the enclosing
// construct began (for parser errors 0-based, so one line too early), not
// the line of the problem; the problem's line is found as the first line
// whose prefix of the file fails with the same error (for an unexpected end
// of the file, the same message on any line: the line where the unclosed
// quote began). A tab in the indentation gets a plain-language message.
func syntaxError(data []byte, err error) (line int, msg string) {
	raw := strings.TrimPrefix(err.Error(), "yaml: ")
	reported := yamlLine(err)
	text := strings.TrimSpace(lineRe.ReplaceAllString(raw, ""))
	text = strings.TrimPrefix(text, ": ")
	lines := bytes.SplitAfter(data, []byte("\n"))
	line = reported
	eos := strings.Contains(raw, "unexpected end of stream")
	if eos {
		text += " (a quoted string is not closed)"
	}
	if len(lines) <= 1000 && len(data) <= 64<<10 { // a spec is small; skip the scan on a huge file
		end := 0
		for i, l := range lines {
			end += len(l)
			var n yaml.Node
			perr := yaml.NewDecoder(bytes.NewReader(data[:end])).Decode(&n)
			if perr != nil && (perr.Error() == err.Error() || eos && strings.Contains(perr.Error(), "unexpected end of stream")) {
				line = i + 1
				break
			}
		}
	}
	if t := tabIndented(lines, line, strings.Contains(raw, "tab") || strings.Contains(raw, "cannot start any token")); t > 0 {
		return t, "YAML syntax error: a tab character in the indentation; YAML indents with spaces only, so replace the tab with spaces"
	}
	return line, "YAML syntax error: " + text
}

// tabIndented returns the 1-based line of a tab in the indentation: line
// itself when its indentation holds a tab, otherwise (when the error is
// about a tab) the last such line at or before it; 0 when there is none.
func tabIndented(lines [][]byte, line int, tabError bool) int {
	hasTab := func(i int) bool {
		if i < 1 || i > len(lines) {
			return false
		}
		l := lines[i-1]
		ind := l[:len(l)-len(bytes.TrimLeft(l, " \t"))]
		return bytes.IndexByte(ind, '\t') >= 0
	}
	if hasTab(line) {
		return line
	}
	if !tabError {
		return 0
	}
	for i := min(line, len(lines)); i >= 1; i-- {
		if hasTab(i) {
			return i
		}
	}
	for i := line + 1; i <= len(lines); i++ {
		if hasTab(i) {
			return i
		}
	}
	return 0
}
