package workflow_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/study"
	wf "github.com/marlowlab/marlow/harness/workflow"
	"github.com/marlowlab/marlow/harness/workflow/workflowtest"
)

func TestVotingFlow(t *testing.T) {
	ans, off := truthPlus(t, 0), truthPlus(t, 1)
	// Generator 1 (the second) is right, the others wrong.
	gen := func(c wf.Call, user string) string {
		if c.Role == study.Aggregator {
			return ""
		}
		if c.Agent == "generator1" {
			return right(user)
		}
		return wrong(user)
	}
	cases := []struct {
		name     string
		nVotes   int
		agg      string
		selected int
		fallback wf.Fallback
		reason   string // substring of the aggregator turn's reason
	}{
		{"a Selected line", 3, wf.FormatSelection(2), 2, wf.NoFallback, "ok"},
		{"the last valid Selected line counts", 3, "Selected: 1\nSelected: 3\nSelected: 9", 3, wf.NoFallback, "ok"},
		{"first digit fallback", 3, "the third: 3", 3, wf.FallbackFirstDigit, "first digit"},
		{"candidate 1 fallback", 3, "no idea", 1, wf.FallbackFirstCandidate, "candidate 1"},
		{"a first digit naming no candidate falls back to candidate 1", 3, "Selected: 7\nor else 2", 1, wf.FallbackFirstCandidate, "out of range"},
		{"one vote", 1, "Selected: 1", 1, wf.NoFallback, "ok"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wc := cfg(study.Voting)
			wc.NVotes = c.nVotes
			ep, stages := drive(t, wc, func(call wf.Call, user string) string {
				if call.Role == study.Aggregator {
					return c.agg
				}
				return gen(call, user)
			})
			var gens, parsed []string
			var cands []int
			for i := 0; i < c.nVotes; i++ {
				gens = append(gens, study.Generator+string(rune('0'+i)))
				cands = append(cands, i)
				if i == 1 {
					parsed = append(parsed, ans)
				} else {
					parsed = append(parsed, off)
				}
			}
			parsed = append(parsed, string(rune('0'+c.selected)))
			agg := wf.Reading{Turn: c.nVotes, Role: study.Aggregator, Parsed: c.fallback == wf.NoFallback, Fallback: c.fallback}
			checkEpisode(t, ep, stages, [][]string{gens, {"aggregator"}}, parsed, []wf.Reading{agg}, c.selected-1)
			f := ep.Flow.(*wf.Interp)
			want := []wf.StageRun{
				{Stage: "generators", Kind: study.Answerer, Turns: cands, Reading: wf.Reading{Turn: -1, Role: study.Generator}, Judged: -1},
				{Stage: "aggregator", Kind: study.Selector, Turns: []int{c.nVotes}, Reading: agg, Judged: -1, Selected: c.selected, Candidates: cands},
			}
			if !reflect.DeepEqual(f.Runs, want) {
				t.Errorf("state %+v, want %+v", f.Runs, want)
			}
			at := ep.Turns[c.nVotes]
			if !at.Graded || at.Verdict != ep.Turns[c.selected-1].Verdict || !strings.Contains(at.Reason, c.reason) {
				t.Errorf("aggregator turn graded=%v verdict %+v reason %q; want the selected candidate's verdict, reason with %q", at.Graded, at.Verdict, at.Reason, c.reason)
			}
			instr := workflowtest.Task{}.Instructions()
			for _, call := range stages[0] {
				if call.Role != study.Generator || !reflect.DeepEqual(call.Messages, wf.GeneratorPrompt(instr, ep.Problem)) {
					t.Errorf("generator call %+v", call)
				}
			}
			var texts []string
			for _, k := range cands {
				texts = append(texts, ep.Turns[k].Completion.Text)
			}
			if got := stages[1][0].Messages; !reflect.DeepEqual(got, wf.AggregatorPrompt(ep.Problem, texts)) {
				t.Errorf("aggregator prompt %q does not show the candidates in order", got)
			}
		})
	}
}
