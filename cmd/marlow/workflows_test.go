package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// marlow workflows lists the built-in workflows and a spec's declared
// ones with their stages and role kinds, and refuses a malformed file at
// its line.
func TestWorkflowsCommand(t *testing.T) {
	out, _, err := execCLI(t, "workflows", filepath.Join("..", "..", "seeds", "debate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"voting (built-in)\n",
		"  stage 2 aggregator: selector, role aggregator (tiny models' teacher: aggregator); reads generators\n",
		"  stage 2 workers: answerer, role worker (tiny models' teacher: worker); one agent per strategy of orchestrator\n",
		"  loop: stages generator..evaluator, until evaluator says Correct, at most max_iterations rounds\n",
		"debate (",
		"  stage 1 debaters: answerer, role generator (tiny models' teacher: generator); 2 agents; later rounds see the other agents' previous answers\n",
		"  loop: stages debaters..debaters, 2 rounds\n",
		"several agents of one role: yes",
		"role kinds:\n  answerer ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the listing lacks %q:\n%s", want, out)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nstages:\n  - {name: a, kind: voter, role: generator}\nfinal: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = execCLI(t, "workflows", "--file", bad)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:3: stage 1: kind: unknown kind \"voter\"") {
		t.Errorf("a malformed file: %v", err)
	}
}
