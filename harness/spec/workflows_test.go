package spec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// specWithWorkflow writes a spec naming the workflow file decl.yaml
// (holding decl) in its matrix as workflow name, and returns its path.
func specWithWorkflow(t *testing.T, name, decl string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "decl.yaml"), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(baseSpec, "workflows: [voting, eval-opt]", "workflows: [voting, "+name+"]", 1) + "workflow_files: [decl.yaml]\n"
	p := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A malformed workflow declaration is refused at plan (spec.Load) with
// the spec's line, the declaration's file:line and what to do.
func TestWorkflowFileMalformed(t *testing.T) {
	for _, tc := range []struct {
		name, decl string
		want       string // the declaration's file:line and message
	}{
		{"unknown kind", "name: w1\nstages:\n  - {name: a, kind: voter, role: generator}\nfinal: a\n",
			`decl.yaml:3: stage 1: kind: unknown kind "voter": use one of answerer, selector, judge, planner, synthesizer`},
		{"a cycle", "name: w2\nstages:\n  - {name: a, kind: answerer, role: generator}\n  - {name: s, kind: synthesizer, role: synthesizer, reads: s}\nfinal: s\n",
			"decl.yaml:4: stage 2: reads: the stage reads itself (a cycle)"},
		{"a stage reading a later stage", "name: w3\nstages:\n  - {name: s, kind: selector, role: aggregator, reads: a}\n  - {name: a, kind: answerer, role: generator, agents: 2}\nfinal: s\n",
			`decl.yaml:3: stage 1: reads: stage "a" comes later (stage 2): a stage reads only earlier stages; move it before, or use a loop`},
		{"fan-out from a non-planner", "name: w4\nstages:\n  - {name: a, kind: answerer, role: generator}\n  - {name: w, kind: answerer, role: worker, per_strategy: a}\n  - {name: y, kind: synthesizer, role: synthesizer, reads: w}\nfinal: y\n",
			`decl.yaml:4: stage 2: per_strategy: stage "a" is of kind answerer, not a planner`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(specWithWorkflow(t, strings.Fields(tc.decl)[1], tc.decl))
			if err == nil {
				t.Fatal("a spec with a malformed workflow file loaded")
			}
			msg := err.Error()
			if !strings.Contains(msg, "spec.yaml:15: workflow_files[0]: ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "is not allowed") {
				t.Errorf("error %q, want the spec's line of workflow_files[0] and %q", msg, tc.want)
			}
		})
	}
}

// A well-formed declaration's workflow may be planned: its runs' configs
// carry its text (so their hashes change with it), and a spec without
// workflow files plans configs without it.
func TestWorkflowFilePlanned(t *testing.T) {
	decl := "name: duo\nstages:\n  - {name: pair, kind: answerer, role: generator, agents: 2}\n  - {name: pick, kind: selector, role: aggregator, reads: pair}\nfinal: pick\n"
	s, err := Load(specWithWorkflow(t, "duo", decl))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	var duo, voting int
	for _, r := range runs {
		uses := r.Workflow == "duo" || slices.Contains(r.EvalWorkflows, "duo")
		d := r.Config.Declarations
		if uses != (len(d) == 1) || (uses && (d[0].Workflow != "duo" || d[0].File != "decl.yaml" || d[0].Text != decl)) {
			t.Errorf("%s: declarations %+v", r.ID, d)
		}
		if r.Workflow == "duo" {
			duo++
		}
		if r.Workflow == "voting" {
			voting++
		}
	}
	if duo != 6 || voting != 6 {
		t.Errorf("%d duo runs and %d voting runs, want 6 each", duo, voting)
	}
	base, err := Load(writeSpec(t, baseSpec))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := Plan(base)
	for _, r := range plain {
		if r.Config.Declarations != nil {
			t.Errorf("%s: a spec without workflow files planned declarations %+v", r.ID, r.Config.Declarations)
		}
	}
}
