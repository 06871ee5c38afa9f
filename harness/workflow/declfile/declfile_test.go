package declfile

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/study"
)

// TestDebateFile reads the committed debate declaration.
func TestDebateFile(t *testing.T) {
	w, err := Load("../../../seeds/workflows/debate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "debate" || !slices.Equal(w.Roles(), []string{study.Generator, study.Aggregator}) || w.Answerer() != study.Generator {
		t.Errorf("debate: name %s roles %v answerer %s", w.Name, w.Roles(), w.Answerer())
	}
	if !w.SameRoleAgents() {
		t.Error("debate runs two generators in one stage: same-role agents")
	}
	d := w.Stages[0]
	if d.Agents != (study.Count{Fixed: 2}) || !d.Others || d.Revises || w.Loop == nil || w.Loop.Max != (study.Count{Fixed: 2}) {
		t.Errorf("debaters %+v loop %+v", d, w.Loop)
	}
}

// TestMalformed: each malformed declaration is refused with its line and
// what to do.
func TestMalformed(t *testing.T) {
	const head = "name: x\n" // line 1
	for _, tc := range []struct {
		name, text string
		line       int
		want       string // substring of the message
	}{
		{"unknown kind", head + "stages:\n  - {name: a, kind: voter, role: generator}\nfinal: a\n", 3, `unknown kind "voter"`},
		{"a cycle", head + "stages:\n  - {name: a, kind: answerer, role: generator}\n  - name: j\n    kind: judge\n    role: evaluator\n    reads: j\nfinal: a\n", 7, "reads itself (a cycle)"},
		{"a stage reading a later stage", head + "stages:\n  - {name: s, kind: selector, role: aggregator, reads: a}\n  - {name: a, kind: answerer, role: generator, agents: 2}\nfinal: s\n", 3, `stage "a" comes later`},
		{"fan-out from a non-planner", head + "stages:\n  - {name: a, kind: answerer, role: generator}\n  - {name: w, kind: answerer, role: worker, per_strategy: a}\n  - {name: y, kind: synthesizer, role: synthesizer, reads: w}\nfinal: y\n", 4, "is of kind answerer, not a planner"},
		{"a role of another kind", head + "stages:\n  - {name: a, kind: judge, role: generator, reads: a}\nfinal: a\n", 3, "is of kind answerer, not judge"},
		{"a role in two stages", head + "stages:\n  - {name: a, kind: answerer, role: generator}\n  - {name: b, kind: answerer, role: generator}\nfinal: b\n", 4, "a role's agents belong to one stage"},
		{"an unknown field", head + "stages:\n  - {name: a, kind: answerer, role: generator, count: 2}\nfinal: a\n", 3, `unknown field "count"`},
		{"an unknown setting", head + "stages:\n  - {name: a, kind: answerer, role: generator, agents: n_debaters}\nfinal: a\n", 3, "not a workflow setting"},
		{"a final stage of several agents", head + "stages:\n  - {name: a, kind: answerer, role: generator, agents: 2}\nfinal: a\n", 4, "gives no single answer"},
		{"a loop's judge outside it", head + "stages:\n  - {name: a, kind: answerer, role: generator}\n  - {name: j, kind: judge, role: evaluator, reads: a}\nloop: {from: a, to: a, until: j, max: 2}\nfinal: a\n", 5, "outside the loop"},
		{"seeing others outside a loop", head + "stages:\n  - {name: a, kind: answerer, role: generator, agents: 2, sees: [others]}\n  - {name: s, kind: selector, role: aggregator, reads: a}\nfinal: s\n", 3, "only in a loop"},
		{"a judge of several answers", head + "stages:\n  - {name: a, kind: answerer, role: generator, agents: 2}\n  - {name: j, kind: judge, role: evaluator, reads: a}\n  - {name: s, kind: selector, role: aggregator, reads: a}\nfinal: s\n", 4, "a judge judges one answer"},
		{"a missing final", head + "stages:\n  - {name: a, kind: answerer, role: generator}\n", 1, `field "final" is missing`},
		{"not YAML", "name: [x\n", 1, "not YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("wf.yaml", []byte(tc.text))
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %v, want declaration errors", err)
			}
			e := es[0]
			if e.File != "wf.yaml" || e.Line != tc.line || !strings.Contains(e.Msg, tc.want) {
				t.Errorf("first error %q, want wf.yaml:%d with %q (all: %v)", e.Error(), tc.line, tc.want, err)
			}
		})
	}
}
