package workflow_test

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/marlowlab/marlow/harness/study"
	wf "github.com/marlowlab/marlow/harness/workflow"
	"github.com/marlowlab/marlow/harness/workflow/workflowtest"
)

// truthPlus is train problem 0's answer plus d, as text.
func truthPlus(t *testing.T, d int) string {
	t.Helper()
	n, err := strconv.Atoi(truth(t))
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(n + d)
}

func TestSingleFlow(t *testing.T) {
	cases := []struct {
		name      string
		gen       func(user string) string
		parsed    string
		compliant bool
		correct   bool
	}{
		{"right answer", right, truthPlus(t, 0), true, true},
		{"wrong answer", wrong, truthPlus(t, 1), true, false},
		{"no answer", func(string) string { return "dunno" }, "", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ep, stages := drive(t, cfg(study.Single), byRole(map[string]func(string) string{study.Generator: c.gen}))
			checkEpisode(t, ep, stages, [][]string{{"generator"}}, []string{c.parsed}, nil, 0)
			if f := ep.Flow.(*wf.Interp); len(f.Runs) != 1 || !reflect.DeepEqual(f.Runs[0].Turns, []int{0}) {
				t.Errorf("state %+v, want one run of generator turn 0", f.Runs)
			}
			want := wf.Call{Agent: study.Generator, Role: study.Generator,
				Messages: wf.GeneratorPrompt(workflowtest.Task{}.Instructions(), ep.Problem)}
			if !reflect.DeepEqual(stages[0][0], want) {
				t.Errorf("call %+v, want %+v", stages[0][0], want)
			}
			tr := ep.Turns[0]
			if tr.Compliant != c.compliant || !tr.Graded || tr.Verdict.Correct != c.correct {
				t.Errorf("turn compliant=%v graded=%v correct=%v, want compliant=%v graded correct=%v", tr.Compliant, tr.Graded, tr.Verdict.Correct, c.compliant, c.correct)
			}
		})
	}
}
