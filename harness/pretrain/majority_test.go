package pretrain

import (
	"reflect"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/synthmath"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

// majorityEpisode is a voting episode whose generators answered answers
// (graded by the synth-math verifier, as the workflow grades them) and
// whose aggregator wrote text; selected is its parsed selection (0: it did
// not parse, and the workflow fell back to candidate 1).
func majorityEpisode(text string, selected int, answers ...string) *workflow.Episode {
	p := datasets.Problem{ID: "m", Prompt: "Compute 7 + 4 + 4 + 5.", Truth: "20"}
	cands := make([]string, len(answers))
	for i, a := range answers {
		cands[i] = "7 + 4 = 11\nAnswer: " + a
	}
	ep := fidelityEpisode(p, study.Aggregator, text, cands...)
	for i := range cands {
		ep.Turns[i].Graded, ep.Turns[i].Verdict = true, synthmath.Verify(p, cands[i])
	}
	run := &ep.Flow.(*workflow.Interp).Runs[1]
	run.Selected, run.Reading.Parsed = selected, selected > 0
	if selected == 0 {
		run.Selected, run.Reading.Fallback = 1, workflow.FallbackFirstCandidate
	}
	return ep
}

func TestMajorityOf(t *testing.T) {
	adj := spec.SelectionMajorityAdjacent
	cases := []struct {
		name      string
		selection string
		ep        *workflow.Episode
		covered   bool
		want      Majority
	}{
		{"candidate 1 outvoted, the majority selected from the teacher's line", adj,
			majorityEpisode("Answers: 19 *; 20 -; 20 +; 19 -\nSelected: 2", 2, "19", "20", "20"), true,
			Majority{Turns: 1, Copied: 1, LinesRight: 1, Shared: 1, SharedPicked: 1, Outvoted: 1, OutvotedCopied: 1, OutvotedLinesRight: 1, OutvotedPicked: 1}},
		{"the last candidate of the majority answer counts as the majority", adj,
			majorityEpisode("Answers: 19 *; 20 -; 20 +; 19 -\nSelected: 3", 3, "19", "20", "20"), true,
			Majority{Turns: 1, Copied: 1, LinesRight: 1, Shared: 1, SharedPicked: 1, Outvoted: 1, OutvotedCopied: 1, OutvotedLinesRight: 1, OutvotedPicked: 1}},
		{"candidate 1 outvoted and selected: no majority skill", adj,
			majorityEpisode("Answers: 19 *; 20 -; 20 +; 19 -\nSelected: 1", 1, "19", "20", "20"), true,
			Majority{Turns: 1, Copied: 1, LinesRight: 1, Shared: 1, Outvoted: 1, OutvotedCopied: 1, OutvotedLinesRight: 1}},
		{"a selection that did not parse never counts", adj,
			majorityEpisode("Answers: 20 *; 20 +; 19 -; 20 -\nCandidate 1 looks best.", 0, "20", "20", "19"), true,
			Majority{Turns: 1, Copied: 1, LinesRight: 1, Shared: 1}},
		{"a miscopied answers line; candidate 1 in the majority", adj,
			majorityEpisode("Answers: 20 *; 20 +; 20 +; 20 +\nSelected: 1", 1, "20", "20", "19"), true,
			Majority{Turns: 1, Shared: 1, SharedPicked: 1}},
		{"answers copied, a mark wrong", adj,
			majorityEpisode("Answers: 20 *; 20 -; 19 -; 20 -\nSelected: 1", 1, "20", "20", "19"), true,
			Majority{Turns: 1, Copied: 1, Shared: 1, SharedPicked: 1}},
		{"no shared answer: only the line is read", adj,
			majorityEpisode("Answers: 18 *; 19 -; 20 -; 18 -\n1: ok\nSelected: 1", 1, "18", "19", "20"), true,
			Majority{Turns: 1, Copied: 1, LinesRight: 1}},
		{"majority-first's line", spec.SelectionMajorityFirst,
			majorityEpisode("Answers: 9; 20; 20\nSelected: 2", 2, "9", "20", "20"), true,
			Majority{Turns: 1, Copied: 1, LinesRight: 1, Shared: 1, SharedPicked: 1, Outvoted: 1, OutvotedCopied: 1, OutvotedLinesRight: 1, OutvotedPicked: 1}},
		{"majority-first's line is not majority-adjacent's", adj,
			majorityEpisode("Answers: 9; 20; 20\nSelected: 2", 2, "9", "20", "20"), true,
			Majority{Turns: 1, Shared: 1, SharedPicked: 1, Outvoted: 1, OutvotedPicked: 1}},
		{"majority-match's line, the majority named and selected", spec.SelectionMajorityMatch,
			majorityEpisode("Answers: 9; 20; 20 =2\nSelected: 2", 2, "9", "20", "20"), true,
			Majority{Turns: 1, Copied: 1, LinesRight: 1, Shared: 1, SharedPicked: 1, Outvoted: 1, OutvotedCopied: 1, OutvotedLinesRight: 1, OutvotedPicked: 1}},
		{"majority-match's line with the wrong name", spec.SelectionMajorityMatch,
			majorityEpisode("Answers: 9; 20; 20 =1\nSelected: 1", 1, "9", "20", "20"), true,
			Majority{Turns: 1, Copied: 1, Shared: 1, Outvoted: 1, OutvotedCopied: 1}},
		{"majority-match's line miscopied, the majority still selected", spec.SelectionMajorityMatch,
			majorityEpisode("Answers: 9; 21; 20\nSelected: 3", 3, "9", "20", "20"), true,
			Majority{Turns: 1, Shared: 1, SharedPicked: 1, Outvoted: 1, OutvotedPicked: 1}},
		{"majority-named's line with the wrong name", spec.SelectionMajorityNamed,
			majorityEpisode("Answers: 1: 9; 2: 20; 3: 20 =1\nSelected: 1", 1, "9", "20", "20"), true,
			Majority{Turns: 1, Copied: 1, Shared: 1, Outvoted: 1, OutvotedCopied: 1}},
		{"majority-tagged's line, the majority named and selected", spec.SelectionMajorityTagged,
			majorityEpisode("Answers: 9 =1; 20 =2; 20 =2\nSelected: 2", 2, "9", "20", "20"), true,
			Majority{Turns: 1, Copied: 1, LinesRight: 1, Shared: 1, SharedPicked: 1, Outvoted: 1, OutvotedCopied: 1, OutvotedLinesRight: 1, OutvotedPicked: 1}},
		{"majority-tagged's line with the wrong name", spec.SelectionMajorityTagged,
			majorityEpisode("Answers: 28 =1; 38 =2; 28 =2\nSelected: 2", 2, "28", "38", "28"), true,
			Majority{Turns: 1, Copied: 1, Shared: 1}},
		{"majority-repeat's line, the majority marked and selected", spec.SelectionMajorityRepeat,
			majorityEpisode("Answers: 9; 20; 20 =3\nSelected: 3", 3, "9", "20", "20"), true,
			Majority{Turns: 1, Copied: 1, LinesRight: 1, Shared: 1, SharedPicked: 1, Outvoted: 1, OutvotedCopied: 1, OutvotedLinesRight: 1, OutvotedPicked: 1}},
		{"majority-repeat's line with a mark missed", spec.SelectionMajorityRepeat,
			majorityEpisode("Answers: 28; 38; 28\n1: ok\nSelected: 1", 1, "28", "38", "28"), true,
			Majority{Turns: 1, Copied: 1, Shared: 1, SharedPicked: 1}},
		{"no selection setting: not measured", "",
			majorityEpisode("Selected: 2", 2, "9", "20", "20"), false, Majority{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, covered := MajorityOf(tc.selection, datasets.KindMath, []*workflow.Episode{tc.ep})
			got.Patterns = nil // TestMajorityPatterns checks them
			if covered != tc.covered || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("MajorityOf = %+v, %v; want %+v, %v", got, covered, tc.want, tc.covered)
			}
		})
	}
}

func TestAnswerPattern(t *testing.T) {
	cases := []struct {
		answers []string
		want    string
	}{
		{[]string{"28", "28", "28"}, "aaa"},
		{[]string{"28", "28", "38"}, "aab"},
		{[]string{"28", "38", "28"}, "aba"},
		{[]string{"38", "28", "28"}, "abb"},
		{[]string{"1", "2", "3"}, "abc"},
		{[]string{"", "20", "20"}, "-aa"},
		{[]string{"sort | sum", "", "sort | len"}, "a-b"},
		{nil, ""},
	}
	for _, tc := range cases {
		if got := AnswerPattern(tc.answers); got != tc.want {
			t.Errorf("AnswerPattern(%q) = %q, want %q", tc.answers, got, tc.want)
		}
	}
}

// TestMajorityPatterns counts several turns by pattern: the selection's
// wins where candidate 1 is outvoted and losses where it leads, each
// pattern once, sorted, the one with a missing answer last.
func TestMajorityPatterns(t *testing.T) {
	rep := spec.SelectionMajorityRepeat
	eps := []*workflow.Episode{
		majorityEpisode("Answers: 9; 20; 20 =3\nSelected: 3", 3, "9", "20", "20"),     // abb, line right, won
		majorityEpisode("Answers: 7; 20; 20\n1: ok\nSelected: 1", 1, "7", "20", "20"), // abb, mark missed, candidate 1 kept
		majorityEpisode("Answers: 28; 28 =2; 38\nSelected: 2", 2, "28", "28", "38"),   // aab, line right, kept
		majorityEpisode("Answers: 28; 28; 38 =3\nSelected: 3", 3, "28", "28", "38"),   // aab, a false mark, lost
		majorityEpisode("Answers: ?; 20; 20 =3\nSelected: 3", 3, "", "20", "20"),      // -aa, no answer from candidate 1
		majorityEpisode("Answers: 1; 2; 3\n1: ok\nSelected: 1", 1, "1", "2", "3"),     // abc, no answer leads
	}
	m, ok := MajorityOf(rep, datasets.KindMath, eps)
	if !ok {
		t.Fatal("MajorityOf: not covered")
	}
	want := []PatternCount{
		{Pattern: "aab", Turns: 2, LinesRight: 1, MajorityPicked: 1, FirstLeads: 2},
		{Pattern: "abb", Turns: 2, LinesRight: 1, MajorityPicked: 1, FirstLeads: 0},
		{Pattern: "abc", Turns: 1, LinesRight: 1},
		{Pattern: "-aa", Turns: 1, LinesRight: 1, MajorityPicked: 1, FirstLeads: 0},
	}
	if !reflect.DeepEqual(m.Patterns, want) {
		t.Errorf("Patterns = %+v\nwant %+v", m.Patterns, want)
	}
	for _, pc := range m.Patterns {
		if led := pc.Pattern != "abc"; pc.Led() != led {
			t.Errorf("pattern %s: Led() = %v, want %v", pc.Pattern, pc.Led(), led)
		}
	}
}

func TestMajorityMarkdown(t *testing.T) {
	c := Calibration{Scale: "s", CI: 0.95, Selection: spec.SelectionMajorityAdjacent, Rows: []CalRow{
		{Task: "synth-math", Workflow: "voting", Majority: &Majority{Turns: 512, Copied: 505, LinesRight: 500, Shared: 490, SharedPicked: 480, Outvoted: 30, OutvotedCopied: 28, OutvotedLinesRight: 25, OutvotedPicked: 21,
			Patterns: []PatternCount{{Pattern: "aab", Turns: 25, LinesRight: 20, MajorityPicked: 21, FirstLeads: 25}, {Pattern: "abc", Turns: 4, LinesRight: 3}}}},
		{Task: "synth-math", Workflow: "single"},
	}}
	md := c.Markdown()
	for _, want := range []string{"### Majority selection at base", "majority-adjacent", "| synth-math | voting | 512 | 505 | 500 | 490 | 480 | 30 | 28 | 25 | 21 |",
		"By answer pattern: " + PatternRule, "| synth-math | voting | aab | 25 | 20 | 21 | 25 | -4 |", "| synth-math | voting | abc | 4 | 3 | – | – | – |"} {
		if !strings.Contains(md, want) {
			t.Errorf("calibration markdown lacks %q:\n%s", want, md)
		}
	}
	if md2 := (Calibration{Scale: "s", CI: 0.95, Rows: c.Rows[1:]}).Markdown(); strings.Contains(md2, "Majority selection") {
		t.Errorf("a calibration without majority rows has the table:\n%s", md2)
	}
}

// TestMajorityCompact measures majority-compact's lines on synth-code:
// the teacher's line is the programs' short codes, so a line of codes is
// copied and right, and a line of the programs as written is neither.
func TestMajorityCompact(t *testing.T) {
	sel := spec.SelectionMajorityCompact
	progs := []string{"map *4 | take 1", "map *3 | take 1", "map *3 | take 1"}
	cases := []struct {
		name string
		ep   *workflow.Episode
		want Majority
	}{
		{"codes, the repeat marked and selected", majorityEpisode("Answers: *4t1; *3t1; *3t1 =3\nSelected: 3", 3, progs...),
			Majority{Turns: 1, Copied: 1, LinesRight: 1, Shared: 1, SharedPicked: 1, Outvoted: 1, OutvotedCopied: 1, OutvotedLinesRight: 1, OutvotedPicked: 1}},
		{"codes, the mark on the wrong one", majorityEpisode("Answers: *4t1; *3t1 =2; *3t1\nSelected: 2", 2, progs...),
			Majority{Turns: 1, Copied: 1, Shared: 1, SharedPicked: 1, Outvoted: 1, OutvotedCopied: 1, OutvotedPicked: 1}},
		{"the programs as written are not the line", majorityEpisode("Answers: map *4 | take 1; map *3 | take 1; map *3 | take 1 =3\nSelected: 3", 3, progs...),
			Majority{Turns: 1, Shared: 1, SharedPicked: 1, Outvoted: 1, OutvotedPicked: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := MajorityOf(sel, datasets.KindCode, []*workflow.Episode{tc.ep})
			got.Patterns = nil
			if !ok || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("MajorityOf = %+v, %v; want %+v, true", got, ok, tc.want)
			}
		})
	}
}
