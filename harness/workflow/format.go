package workflow

import (
	"fmt"
	"strconv"
	"strings"
)

// The output formats of the evaluator, aggregator and orchestrator. Each
// Format function writes the canonical form (what the teacher transcripts
// contain); each Parse function accepts it and tolerates small deviations
// (case, surrounding markdown, extra prose), but reports ok only for output
// that a strict reader would accept. The reason string says why an output is
// not compliant ("ok" when it is).

// Verdict is an evaluator's parsed judgement.
type Verdict struct {
	Correct  bool
	Feedback string
}

// FormatVerdict writes an evaluator output: a verdict line and a feedback
// line.
func FormatVerdict(correct bool, feedback string) string {
	v := "Incorrect"
	if correct {
		v = "Correct"
	}
	return "Verdict: " + v + "\nFeedback: " + oneLine(feedback)
}

// oneLine collapses whitespace so a field stays on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cleanLine lower-cases a line and strips markdown emphasis, quotes and list
// bullets around it.
func cleanLine(line string) string {
	s := strings.TrimSpace(line)
	s = strings.TrimLeft(s, "-*>#` \t")
	s = strings.ReplaceAll(s, "*", "")
	s = strings.ReplaceAll(s, "`", "")
	s = strings.ReplaceAll(s, "_", "")
	return strings.ToLower(strings.TrimSpace(s))
}

// field returns the value after "key:" when line (cleaned) starts with it.
func field(line, key string) (string, bool) {
	c := cleanLine(line)
	if !strings.HasPrefix(c, key) {
		return "", false
	}
	rest := strings.TrimSpace(c[len(key):])
	if !strings.HasPrefix(rest, ":") {
		return "", false
	}
	return strings.TrimSpace(rest[1:]), true
}

// rawField is field but keeps the original case of the value.
func rawField(line, key string) (string, bool) {
	if _, ok := field(line, key); !ok {
		return "", false
	}
	i := strings.Index(line, ":")
	v := strings.TrimSpace(line[i+1:])
	return strings.Trim(v, "*` "), true
}

// ParseVerdict reads an evaluator output. Compliant output has exactly one
// verdict line ("Verdict: Correct" or "Verdict: Incorrect", case and
// markdown tolerated; a trailing period is allowed) — several lines that
// agree are tolerated, lines that disagree are not. Feedback is the rest of
// the line after the first "Feedback:" and the lines after it up to the next
// verdict line, or "" when absent.
// When ok is false the returned Verdict is Incorrect, so an unparsable
// verdict makes eval-opt revise.
func ParseVerdict(text string) (v Verdict, ok bool, reason string) {
	lines := strings.Split(text, "\n")
	found := 0
	var first bool
	for i, line := range lines {
		if val, isVerdict := field(line, "verdict"); isVerdict {
			val = strings.TrimRight(val, ".! ")
			var c bool
			switch val {
			case "correct":
				c = true
			case "incorrect":
				c = false
			default:
				return Verdict{}, false, fmt.Sprintf("verdict line %d has unknown value %q", i+1, val)
			}
			if found > 0 && c != first {
				return Verdict{}, false, "conflicting verdict lines"
			}
			first = c
			found++
			continue
		}
		if fb, isFeedback := rawField(line, "feedback"); isFeedback && v.Feedback == "" {
			rest := []string{fb}
			for _, l := range lines[i+1:] {
				if _, isVerdict := field(l, "verdict"); isVerdict {
					break
				}
				rest = append(rest, l)
			}
			v.Feedback = strings.TrimSpace(strings.Join(rest, "\n"))
		}
	}
	if found == 0 {
		return Verdict{}, false, "no `Verdict:` line"
	}
	v.Correct = first
	return v, true, "ok"
}

// FormatSelection writes an aggregator output selecting candidate k
// (1-based).
func FormatSelection(k int) string { return "Selected: " + strconv.Itoa(k) }

// ParseSelection reads an aggregator output choosing among n candidates and
// returns the selected candidate, 1-based. Compliant output has a line
// "Selected: K" (case and markdown tolerated, "Selected: Candidate K" too)
// with 1 <= K <= n; when there are several such lines the last one counts.
// Otherwise the selection falls back to the first digit in the output when it
// names a candidate, else candidate 1, and ok is false.
func ParseSelection(text string, n int) (k int, ok bool, reason string) {
	k, fb, reason := readSelection(text, n)
	return k, k > 0 && fb == NoFallback, reason
}

// readSelection is ParseSelection saying which fallback chose the candidate
// (NoFallback when the output was compliant, or when there are no
// candidates and k is 0).
func readSelection(text string, n int) (k int, fb Fallback, reason string) {
	if n < 1 {
		return 0, NoFallback, "no candidates"
	}
	reason = "no `Selected:` line"
	for _, line := range strings.Split(text, "\n") {
		val, isSel := field(line, "selected")
		if !isSel {
			continue
		}
		val = strings.TrimSpace(strings.TrimPrefix(val, "candidate"))
		val = strings.TrimRight(val, ". ")
		v, err := strconv.Atoi(val)
		switch {
		case err != nil:
			reason = fmt.Sprintf("selection %q is not a number", val)
		case v < 1 || v > n:
			reason = fmt.Sprintf("selection %d out of range 1..%d", v, n)
		default:
			k = v
		}
	}
	if k > 0 {
		return k, NoFallback, "ok"
	}
	for _, r := range text {
		if r >= '0' && r <= '9' {
			if d := int(r - '0'); d >= 1 && d <= n {
				return d, FallbackFirstDigit, reason + "; fell back to first digit"
			}
			break
		}
	}
	return 1, FallbackFirstCandidate, reason + "; fell back to candidate 1"
}

// FormatStrategies writes an orchestrator output, one "Strategy K: ..." line
// per strategy.
func FormatStrategies(strategies []string) string {
	lines := make([]string, len(strategies))
	for i, s := range strategies {
		lines[i] = "Strategy " + strconv.Itoa(i+1) + ": " + oneLine(s)
	}
	return strings.Join(lines, "\n")
}

// Strategies is a parsed orchestrator output.
type Strategies struct {
	// List holds the distinct non-empty strategies in order of appearance.
	List []string
	// Proposed counts every strategy line, duplicates included.
	Proposed int
	// Over is true when more than the allowed number were proposed: the
	// episode ends after the orchestrator turn with reward 0.
	Over bool
	// Loose is true when there was no strategy line and the numbered or
	// bulleted lines were read instead (the non-compliant fallback).
	Loose bool
}

// ParseStrategies reads an orchestrator output allowed at most max
// strategies. Strategy lines are "Strategy K: text" (case and markdown
// tolerated); when there is none, numbered ("1. text", "2) text") or bulleted
// lines are accepted as a non-compliant fallback. Compliant output has
// between 1 and max strategy lines, all distinct and non-empty.
func ParseStrategies(text string, max int) (s Strategies, ok bool, reason string) {
	var strict, loose []string
	for _, line := range strings.Split(text, "\n") {
		if v, isStrat := strategyLine(line); isStrat {
			strict = append(strict, v)
		} else if v, isItem := listItem(line); isItem {
			loose = append(loose, v)
		}
	}
	lines := strict
	ok, reason = true, "ok"
	if len(strict) == 0 {
		lines = loose
		ok, reason = false, "no `Strategy K:` lines"
		s.Loose = len(loose) > 0
	}
	seen := map[string]bool{}
	for _, l := range lines {
		s.Proposed++
		key := strings.ToLower(oneLine(l))
		if key == "" {
			if ok {
				ok, reason = false, "empty strategy"
			}
			continue
		}
		if seen[key] {
			if ok {
				ok, reason = false, "duplicate strategy"
			}
			continue
		}
		seen[key] = true
		s.List = append(s.List, oneLine(l))
	}
	if s.Proposed > max {
		s.Over = true
		return s, false, fmt.Sprintf("%d strategies proposed, more than %d", s.Proposed, max)
	}
	if len(s.List) == 0 && ok {
		ok, reason = false, "no strategies"
	}
	return s, ok, reason
}

// strategyLine parses "Strategy K: text".
func strategyLine(line string) (string, bool) {
	c := cleanLine(line)
	if !strings.HasPrefix(c, "strategy") {
		return "", false
	}
	rest := strings.TrimSpace(c[len("strategy"):])
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	if j == 0 || j >= len(rest) || rest[j] != ':' {
		return "", false
	}
	// Take the value from the original line to keep its case.
	i := strings.Index(line, ":")
	return strings.Trim(strings.TrimSpace(line[i+1:]), "*` "), true
}

// listItem parses "1. text", "2) text" or "- text".
func listItem(line string) (string, bool) {
	s := strings.TrimSpace(line)
	if strings.HasPrefix(s, "- ") || strings.HasPrefix(s, "* ") {
		return strings.TrimSpace(s[2:]), true
	}
	j := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == 0 || j >= len(s) || (s[j] != '.' && s[j] != ')') {
		return "", false
	}
	return strings.TrimSpace(s[j+1:]), true
}
