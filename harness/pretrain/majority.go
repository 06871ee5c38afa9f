package pretrain

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthcode"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

// The majority aggregators (pretrain.selection) write one line of the
// candidates' answers before their selection; this file holds those lines,
// the teacher's pick among them, and what the calibration measures of them.

// AnswersLine is the majority-first aggregator's first line: each
// candidate's answer as the task's verifier reads it, in order, "-" for
// none ("Answers: 46; 46; 47").
func AnswersLine(answers []string) string {
	out := make([]string, len(answers))
	for i, a := range answers {
		out[i] = a
		if a == "" {
			out[i] = "-"
		}
	}
	return "Answers: " + strings.Join(out, "; ")
}

// answersLineOf is the majority aggregators' first line under a
// pretrain.selection value for a task kind.
func answersLineOf(sel, kind string, answers []string) string {
	switch sel {
	case spec.SelectionMajorityAdjacent:
		return AdjacentAnswersLine(kind, answers)
	case spec.SelectionMajorityMatch:
		return MatchAnswersLine(answers, false)
	case spec.SelectionMajorityNamed:
		return MatchAnswersLine(answers, true)
	case spec.SelectionMajorityTagged:
		return TaggedAnswersLine(answers)
	case spec.SelectionMajorityRepeat:
		return RepeatAnswersLine(answers)
	case spec.SelectionMajorityCompact:
		return CompactAnswersLine(kind, answers)
	}
	return AnswersLine(answers)
}

// majorityPickOf is the candidate (1-based) a majority aggregator under
// pretrain.selection sel selects where one answer leads, or 0 where none
// does: the first candidate of the leading answer (SharedPick), and under
// majority-repeat and majority-compact the first marked one
// (RepeatPick).
func majorityPickOf(sel string, answers []string) int {
	if sel == spec.SelectionMajorityRepeat || sel == spec.SelectionMajorityCompact {
		return RepeatPick(answers)
	}
	return SharedPick(answers)
}

// MatchAnswersLine is the majority-match aggregator's first line: each
// candidate's answer as the task's verifier reads it, in order, followed
// by " =k" where candidate k (1-based) is the first earlier candidate
// with the same answer ("Answers: 45; 42; 42 =2"). An empty answer is "?"
// and matches nothing. Finding an equal answer is then a lookup of the
// current one among the earlier ones, which the tiny models learn, and
// not a comparison of two numbers, which they did not (pilots 16 to 18).
// With numbered set (majority-named) each answer has its candidate's
// number before it ("Answers: 1: 45; 2: 42; 3: 42 =2"), so the name a
// lookup copies stands just before the answer it finds.
func MatchAnswersLine(answers []string, numbered bool) string {
	return namedAnswersLine(answers, numbered, func(i int, a string) int {
		return slices.Index(answers[:i], a) + 1
	})
}

// namedAnswersLine is the lines that name candidates (majority-match,
// majority-named, majority-tagged, majority-repeat): each candidate's
// answer in order, "?" for an empty one, followed by " =k" where name(i,
// a) gives candidate k (1-based) for the answer a of candidate i+1 (0
// for no name; an empty answer is never named), and with numbered set
// each entry preceded by its candidate's number ("3: 42 =2").
func namedAnswersLine(answers []string, numbered bool, name func(i int, a string) int) string {
	if len(answers) == 0 {
		return "Answers:"
	}
	out := make([]string, len(answers))
	for i, a := range answers {
		switch k := name(i, a); {
		case a == "":
			out[i] = "?"
		case k > 0:
			out[i] = a + " =" + strconv.Itoa(k)
		default:
			out[i] = a
		}
		if numbered {
			out[i] = strconv.Itoa(i+1) + ": " + out[i]
		}
	}
	return "Answers: " + strings.Join(out, "; ")
}

// TaggedAnswersLine is the majority-tagged aggregator's first line: each
// candidate's answer as the task's verifier reads it, in order, followed
// by " =k" where candidate k (1-based) is the first candidate with the
// same answer, itself included ("Answers: 28 =1; 38 =2; 28 =1"). An empty
// answer is "?" with no name. The name of an answer seen before is what
// followed it the first time, so writing it is a copy of the token after
// an earlier match; the name of a new answer is its own number.
func TaggedAnswersLine(answers []string) string {
	return namedAnswersLine(answers, false, func(_ int, a string) int { return slices.Index(answers, a) + 1 })
}

// RepeatAnswersLine is the majority-repeat aggregator's first line: each
// candidate's answer as the task's verifier reads it, in order, followed
// by " =k", k its own number (1-based), where an earlier candidate gave
// the same answer ("Answers: 28; 38; 28 =3"); an empty answer is "?" and
// never marked. Whether to mark is whether the answer was seen before on
// the line, and the mark names the entry itself, so no candidate has to
// be found by its answer.
func RepeatAnswersLine(answers []string) string {
	return namedAnswersLine(answers, false, func(i int, a string) int {
		if slices.Contains(answers[:i], a) {
			return i + 1
		}
		return 0
	})
}

// CompactAnswersLine is the majority-compact aggregator's first line:
// RepeatAnswersLine over the answers of a task of kind, a synth-code
// answer that parses written as its program's short code
// (synthcode.Program.Code: "Answers: +3rd1; *3rd1; +3rd1 =3") and any
// other answer as it is. The marks follow the codes on the line, which
// are equal exactly when the programs are; the teacher's candidates are
// written canonically, so there also exactly when the answers are.
func CompactAnswersLine(kind string, answers []string) string {
	if kind != datasets.KindCode {
		return RepeatAnswersLine(answers)
	}
	codes := make([]string, len(answers))
	for i, a := range answers {
		codes[i] = a
		if prog, err := synthcode.Parse(a, synthcode.DefaultLimits()); err == nil {
			codes[i] = prog.Code()
		}
	}
	return RepeatAnswersLine(codes)
}

// RepeatPick is the majority-repeat aggregator's selection: the second
// candidate (1-based) with the answer SharedPick finds leading, the first
// of its candidates that RepeatAnswersLine marks, or 0 where no answer
// leads. With three candidates it is the first marked candidate.
func RepeatPick(answers []string) int {
	first := SharedPick(answers)
	if first == 0 {
		return 0
	}
	// a leading answer is shared, so it occurs again after its first candidate
	return first + 1 + slices.Index(answers[first:], answers[first-1])
}

// AdjacentAnswersLine is the majority-adjacent aggregator's first line:
// each candidate's answer as the task's verifier reads it, then candidate
// 1's again, each followed by "+" where it equals the answer before it,
// "-" where it does not and "*" for the first ("Answers: 45 *; 42 -; 42 +;
// 45 -"). An empty answer is "?" and never equal. On synth-math a shorter
// answer is padded to two digits with zeros ("09"), so that equal answers
// stand at one distance from each other and the tiny models compare
// neighbouring digits instead of numbers across the line (pilot 16's
// aggregator copied the answers and then could not tell which were equal).
func AdjacentAnswersLine(kind string, answers []string) string {
	if len(answers) == 0 {
		return "Answers:"
	}
	cycle := append(slices.Clone(answers), answers[0])
	out := make([]string, len(cycle))
	for i, a := range cycle {
		mark := "*"
		if i > 0 {
			mark = "-"
			if a != "" && a == cycle[i-1] {
				mark = "+"
			}
		}
		switch {
		case a == "":
			a = "?"
		case kind == datasets.KindMath && len(a) < 2:
			a = strings.Repeat("0", 2-len(a)) + a
		}
		out[i] = a + " " + mark
	}
	return "Answers: " + strings.Join(out, "; ")
}

// SharedPick is the first candidate (1-based) of the answer that more
// candidates share than any other answer, or 0 where there is none (no
// answer shared, or two answers shared equally often). An empty answer is
// never picked.
func SharedPick(answers []string) int {
	count, top := tally(answers)
	leaders := 0
	for _, c := range count {
		if c == top {
			leaders++
		}
	}
	if top < 2 || leaders > 1 {
		return 0
	}
	return MajorityPick(answers)
}

// orderOutvoted orders a majority aggregator's candidates as
// pretrain.outvoted asks: where one answer leads (SharedPick) and some
// candidate lacks it, candidate 1 is outvoted with probability Outvoted;
// where the drawn order is the other one, candidate 1 swaps places with a
// random candidate of the kind the draw asks for. Unset, it draws nothing.
func (r *rendering) orderOutvoted() {
	if r.t.cfg.Outvoted <= 0 || r.t.cfg.Selection == "" || r.problemChecker() == nil {
		return
	}
	answers := r.shownAnswers()
	pick := SharedPick(answers)
	if pick == 0 {
		return
	}
	var with, without []int
	for i, a := range answers {
		if a == answers[pick-1] {
			with = append(with, i)
		} else {
			without = append(without, i)
		}
	}
	if len(without) == 0 {
		return
	}
	outvoted := r.rng.Bernoulli(r.t.cfg.Outvoted)
	var pool []int
	switch leads := answers[0] == answers[pick-1]; {
	case outvoted && leads:
		pool = without
	case !outvoted && !leads:
		pool = with
	default:
		return
	}
	j := pool[r.rng.Intn(len(pool))]
	r.tr.Shown[0], r.tr.Shown[j] = r.tr.Shown[j], r.tr.Shown[0]
	r.tr.ShownCorrect[0], r.tr.ShownCorrect[j] = r.tr.ShownCorrect[j], r.tr.ShownCorrect[0]
}

// MajorityRule states what the majority table measures; MajorityOf
// computes it. Its wording lives here, beside the code, and the
// calibration report reads it from here.
func MajorityRule(selection string) string {
	line := answersLineOf(selection, datasets.KindMath, []string{"46", "46", "47"})
	return fmt.Sprintf("Under pretrain.selection %s the aggregator first writes the candidates' answers on one line (%q, AnswersLine, "+
		"AdjacentAnswersLine, MatchAnswersLine, TaggedAnswersLine, RepeatAnswersLine or CompactAnswersLine) and, where one answer is shared by more candidates than any other, selects a candidate with that answer. "+
		"turns: aggregator turns; answers copied: turns whose first line has the teacher's answers in the teacher's order, its marks or names "+
		"aside; answers lines right: turns whose first line is the teacher's line for the candidates shown, marks and names included (both "+
		"from the answers the task's verifier reads in them); shared: turns where one answer leads (SharedPick); majority selected: of "+
		"those, turns whose parsed selection has the leading answer; outvoted: shared turns where candidate 1's answer is not the leading "+
		"one, the only turns where selecting the majority can beat candidate 1, then of those the turns with the answers copied, with the "+
		"line right, and whose parsed selection has the leading answer", selection, line)
}

// answersOnly is an answers line without its marks (majority-adjacent,
// majority-repeat and majority-compact) or names (majority-match,
// majority-named and majority-tagged): what is left is the answers as
// copied.
func answersOnly(selection, line string) string {
	head, items, ok := strings.Cut(line, "Answers: ")
	if !ok || head != "" {
		return line
	}
	parts := strings.Split(items, "; ")
	for i, it := range parts {
		switch selection {
		case spec.SelectionMajorityAdjacent:
			if n := len(it); n >= 2 && it[n-2] == ' ' && strings.ContainsRune("*+-", rune(it[n-1])) {
				parts[i] = it[:n-2]
			}
		case spec.SelectionMajorityMatch, spec.SelectionMajorityNamed, spec.SelectionMajorityTagged, spec.SelectionMajorityRepeat,
			spec.SelectionMajorityCompact:
			parts[i], _, _ = strings.Cut(it, " =")
		}
	}
	return "Answers: " + strings.Join(parts, "; ")
}

// Majority is how a majority aggregator's answers lines and selections at
// base follow the teacher's rule (MajorityRule).
type Majority struct {
	Turns      int // aggregator turns
	Copied     int // turns whose answers line has the teacher's answers, marks or names aside
	LinesRight int // turns whose answers line is the teacher's
	// Shared counts turns where one answer leads (SharedPick > 0), and
	// SharedPicked those whose parsed selection has that answer.
	Shared, SharedPicked int
	// Outvoted counts shared turns where candidate 1's answer does not
	// lead; OutvotedCopied and OutvotedLinesRight those whose answers
	// line has the teacher's answers, and is the teacher's; and
	// OutvotedPicked those whose parsed selection has the leading answer.
	Outvoted, OutvotedCopied, OutvotedLinesRight, OutvotedPicked int
	// Patterns counts the turns by the pattern of their answers
	// (AnswerPattern), ordered by pattern, those with a candidate
	// without an answer last.
	Patterns []PatternCount
}

// PatternCount is a majority aggregator's turns of one answer pattern.
type PatternCount struct {
	Pattern    string // AnswerPattern of the turns' answers
	Turns      int    // turns of the pattern
	LinesRight int    // of those, turns whose answers line is the teacher's
	// MajorityPicked counts the turns whose parsed selection has the
	// leading answer, and FirstLeads those where candidate 1 has it: the
	// difference is what the aggregator's selection gains (or loses)
	// against taking candidate 1 in the pattern.
	MajorityPicked, FirstLeads int
}

// Led says whether one answer leads in the pattern (SharedPick > 0);
// only then are MajorityPicked and FirstLeads counted.
func (p PatternCount) Led() bool {
	answers := strings.Split(p.Pattern, "")
	for i, a := range answers {
		if a == "-" {
			answers[i] = ""
		}
	}
	return SharedPick(answers) > 0
}

// AnswerPattern names the pattern of one turn's answers: each candidate's
// answer as a letter, in the order the answers first appear ("aab":
// candidates 1 and 2 agree and 3 differs; "abb": candidate 1 is
// outvoted), "-" for a candidate without an answer. Answers beyond the
// 26th distinct one all read "z".
func AnswerPattern(answers []string) string {
	b := make([]byte, len(answers))
	var seen []string
	for i, a := range answers {
		if a == "" {
			b[i] = '-'
			continue
		}
		k := slices.Index(seen, a)
		if k < 0 {
			k = len(seen)
			seen = append(seen, a)
		}
		b[i] = 'a' + byte(min(k, 25))
	}
	return string(b)
}

// MajorityOf measures the aggregator of episodes eps of a task of kind
// under pretrain.selection selection; ok is false where the selection is
// unset or the episodes have no aggregator.
func MajorityOf(selection, kind string, eps []*workflow.Episode) (m Majority, ok bool) {
	if selection == "" {
		return m, false
	}
	byPattern := map[string]*PatternCount{}
	for ep, run := range supervisorRuns(eps, study.Aggregator) {
		if run.Kind != study.Selector {
			continue
		}
		ok = true
		m.Turns++
		answers := make([]string, len(run.Candidates))
		for i, t := range run.Candidates {
			answers[i] = answerText(ep.Turns[t].Verdict) // the workflow graded each candidate with the task's verifier
		}
		text := ep.Turns[run.Reading.Turn].Completion.Text
		first, _, _ := strings.Cut(text, "\n")
		first = strings.TrimSpace(first)
		want := answersLineOf(selection, kind, answers)
		copied, right := answersOnly(selection, first) == answersOnly(selection, want), first == want
		if copied {
			m.Copied++
		}
		if right {
			m.LinesRight++
		}
		pick := SharedPick(answers)
		pat := AnswerPattern(answers)
		pc := byPattern[pat]
		if pc == nil {
			pc = &PatternCount{Pattern: pat}
			byPattern[pat] = pc
		}
		pc.Turns++
		if right {
			pc.LinesRight++
		}
		if pick == 0 {
			continue
		}
		lead := answers[pick-1]
		picked := run.Reading.Parsed && run.Reading.Fallback == workflow.NoFallback &&
			run.Selected >= 1 && run.Selected <= len(answers) && answers[run.Selected-1] == lead
		if picked {
			pc.MajorityPicked++
		}
		if answers[0] == lead {
			pc.FirstLeads++
		}
		m.Shared++
		if picked {
			m.SharedPicked++
		}
		if answers[0] != lead {
			m.Outvoted++
			if copied {
				m.OutvotedCopied++
			}
			if right {
				m.OutvotedLinesRight++
			}
			if picked {
				m.OutvotedPicked++
			}
		}
	}
	for _, pc := range byPattern {
		m.Patterns = append(m.Patterns, *pc)
	}
	slices.SortFunc(m.Patterns, func(a, b PatternCount) int {
		if ca, cb := strings.Contains(a.Pattern, "-"), strings.Contains(b.Pattern, "-"); ca != cb {
			if ca {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Pattern, b.Pattern)
	})
	return m, ok
}

// majorityMarkdown writes the majority table of the calibration's rows
// that have one.
func (c Calibration) majorityMarkdown(b *strings.Builder) {
	rows := c.rowsWith(func(r CalRow) bool { return r.Majority != nil })
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### Majority selection at base\n\n%s.\n\n", MajorityRule(c.Selection))
	b.WriteString("| task | workflow | turns | answers copied | answers lines right | shared | majority selected | outvoted | outvoted: answers copied | outvoted: lines right | majority selected when outvoted |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		m := *r.Majority
		fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", r.Task, r.Workflow, m.Turns, m.Copied, m.LinesRight,
			m.Shared, m.SharedPicked, m.Outvoted, m.OutvotedCopied, m.OutvotedLinesRight, m.OutvotedPicked)
	}
	fmt.Fprintf(b, "\nBy answer pattern: %s.\n\n", PatternRule)
	b.WriteString("| task | workflow | pattern | turns | answers lines right | majority selected | candidate 1 in the majority | gain |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		for _, pc := range r.Majority.Patterns {
			picked, first, gain := "–", "–", "–"
			if pc.Led() {
				picked, first, gain = strconv.Itoa(pc.MajorityPicked), strconv.Itoa(pc.FirstLeads), fmt.Sprintf("%+d", pc.MajorityPicked-pc.FirstLeads)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %d | %d | %s | %s | %s |\n", r.Task, r.Workflow, pc.Pattern, pc.Turns, pc.LinesRight, picked, first, gain)
		}
	}
}

// PatternRule states what the majority table's rows by answer pattern
// count (MajorityOf's Patterns); the calibration report reads it from here.
const PatternRule = "each aggregator turn's answers written as letters in the order they first appear (AnswerPattern: aab, candidates 1 " +
	"and 2 agree and candidate 3 differs; abb, candidate 1 outvoted; - a candidate without an answer); turns and answers lines right as " +
	"above; where one answer leads in the pattern, majority selected counts the turns whose parsed selection has it and candidate 1 in " +
	"the majority those where candidate 1 has it, and gain is the first less the second: the turns the aggregator's selection wins (or " +
	"loses) against taking candidate 1 in choosing the leading answer; – where no answer leads"
