package workflow_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/marlowlab/marlow/harness/study"
	wf "github.com/marlowlab/marlow/harness/workflow"
	"github.com/marlowlab/marlow/harness/workflow/declfile"
	"github.com/marlowlab/marlow/harness/workflow/workflowtest"
)

// TestDeclaredDebate runs the committed debate declaration through the
// interpreter: two generators answer, then answer again seeing their own
// and the other's previous answer, and the aggregator's pick is final.
func TestDeclaredDebate(t *testing.T) {
	w, err := declfile.Load("../../seeds/workflows/debate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := study.Register(w); err != nil {
		t.Fatal(err)
	}
	ans, off := truthPlus(t, 0), truthPlus(t, 1)
	wc := cfg("debate")
	ep, stages := drive(t, wc, func(c wf.Call, user string) string {
		switch {
		case c.Role == study.Aggregator:
			return wf.FormatSelection(2)
		case c.Agent == "generator1" && c.Iteration == 1:
			return right(user)
		}
		return wrong(user)
	})
	agg := wf.Reading{Turn: 4, Role: study.Aggregator, Parsed: true}
	checkEpisode(t, ep, stages, [][]string{{"generator0", "generator1"}, {"generator0", "generator1"}, {"aggregator"}},
		[]string{off, off, off, ans, "2"}, []wf.Reading{agg}, 3)
	instr := workflowtest.Task{}.Instructions()
	for i, c := range stages[1] {
		own, other := ep.Turns[i].Completion.Text, ep.Turns[1-i].Completion.Text
		if want := wf.DebatePrompt(instr, ep.Problem, own, []string{other}); c.Iteration != 1 || !reflect.DeepEqual(c.Messages, want) {
			t.Errorf("round 2 call %d: iteration %d messages %q, want %q", i, c.Iteration, c.Messages, want)
		}
	}
	if got := stages[2][0].Messages; !reflect.DeepEqual(got, wf.AggregatorPrompt(ep.Problem, []string{ep.Turns[2].Completion.Text, ep.Turns[3].Completion.Text})) {
		t.Errorf("aggregator prompt %q does not show the last round's answers", got)
	}
	turns, _ := wf.MaxTurns("debate", wc)
	if want := []wf.RoleTurns{{Role: study.Generator, N: 2}, {Role: study.Generator, Revision: true, N: 2}, {Role: study.Aggregator, N: 1}}; !reflect.DeepEqual(turns, want) {
		t.Errorf("turns %+v, want %+v", turns, want)
	}
	if !slices.Contains(study.SameRoleWorkflows(), "debate") {
		t.Errorf("same-role workflows %v lack debate", study.SameRoleWorkflows())
	}
}
