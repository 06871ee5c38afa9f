package study

import (
	"strings"
	"testing"
)

// TestRegister: a declared workflow joins the registry with its new roles
// (of its stages' kinds), the same text again is a no-op, and a built-in's
// name, another text under a registered name or a faulty declaration are
// refused.
func TestRegister(t *testing.T) {
	n, m := len(registry), len(roleInfos)
	t.Cleanup(func() {
		regMu.Lock()
		registry, roleInfos = registry[:n], roleInfos[:m]
		regMu.Unlock()
	})
	w := Workflow{Name: "panel-test", Text: "a", Source: "panel.yaml", Stages: []Stage{
		{Name: "solvers", Kind: Answerer, Role: Generator, Agents: Count{Fixed: 3}},
		{Name: "chair", Kind: Selector, Role: "chair-test", Reads: "solvers"},
	}, Final: "chair"}
	if err := Register(w); err != nil {
		t.Fatal(err)
	}
	if err := Register(w); err != nil {
		t.Errorf("registering the same text again: %v", err)
	}
	got, ok := Lookup("panel-test")
	if !ok || got.Answerer() != Generator || !got.SameRoleAgents() {
		t.Errorf("lookup %+v %v", got, ok)
	}
	if r := RoleOf("chair-test"); r.Kind != Selector || !r.Supervisory || r.Chooses != Generator || len(r.Fallbacks) != 2 {
		t.Errorf("the declared role: %+v", r)
	}
	other := w
	other.Text = "b"
	for _, tc := range []struct {
		name string
		w    Workflow
		want string
	}{
		{"another text", other, "declared twice with different texts"},
		{"a built-in's name", Workflow{Name: Voting, Stages: w.Stages, Final: "chair"}, "a built-in workflow has that name"},
		{"a fault", Workflow{Name: "bad-test", Stages: []Stage{{Name: "a", Kind: "voter", Role: Generator}}, Final: "a"}, `unknown kind "voter"`},
	} {
		if err := Register(tc.w); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
