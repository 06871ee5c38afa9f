package study

import (
	"slices"
	"testing"
)

func TestRegistryEntries(t *testing.T) {
	roles := func(rs ...string) []string { return rs }
	for _, tc := range []struct {
		name        string
		roles       []string // calling order
		supervisory []string
		sameRole    bool
	}{
		{Single, roles(Generator), nil, false},
		{EvalOpt, roles(Generator, Evaluator), roles(Evaluator), false},
		{Voting, roles(Generator, Aggregator), roles(Aggregator), true},
		{OrchWorkers, roles(Orchestrator, Worker, Synthesizer), roles(Orchestrator, Synthesizer), true},
	} {
		w, ok := Lookup(tc.name)
		if !ok {
			t.Fatalf("%s: not in the registry", tc.name)
		}
		if got := w.Roles(); !slices.Equal(got, tc.roles) {
			t.Errorf("%s: roles %v, want %v", tc.name, got, tc.roles)
		}
		if got := w.Supervisory(); !slices.Equal(got, tc.supervisory) {
			t.Errorf("%s: supervisory roles %v, want %v", tc.name, got, tc.supervisory)
		}
		if w.SameRoleAgents() != tc.sameRole {
			t.Errorf("%s: same-role agents %v, want %v", tc.name, w.SameRoleAgents(), tc.sameRole)
		}
		if !slices.Contains(w.Roles(), w.Answerer()) {
			t.Errorf("%s: answerer %q is not one of its roles", tc.name, w.Answerer())
		}
		if errs := w.Check(); len(errs) > 0 {
			t.Errorf("%s: the built-in declaration has faults: %v", tc.name, errs)
		}
	}
	if _, ok := Lookup("debate"); ok {
		t.Error("an unregistered workflow was found")
	}
	if got := WorkflowOf("nope").Roles(); got != nil {
		t.Errorf("roles of an unknown workflow: %v", got)
	}
	if got, want := SameRoleWorkflows(), []string{Voting, OrchWorkers}; !slices.Equal(got, want) {
		t.Errorf("same-role workflows %v, want %v", got, want)
	}
	if got, want := OneAgentPerRoleWorkflows(), []string{EvalOpt}; !slices.Equal(got, want) {
		t.Errorf("one-agent-per-role workflows %v, want %v", got, want)
	}
}

// TestRegistryIsConsistent checks what every entry must satisfy: stages
// name known roles and settings the workflow reads, every role is called
// by some workflow, a role chooses among a known answering role, and a
// supervisory role has a fallback.
func TestRegistryIsConsistent(t *testing.T) {
	called := map[string]bool{}
	for _, name := range Workflows {
		w := WorkflowOf(name)
		if len(w.Stages) == 0 {
			t.Errorf("%s: no stages", name)
		}
		for _, s := range w.Stages {
			if !slices.Contains(Roles, s.Role) {
				t.Errorf("%s: stage of unknown role %q", name, s.Role)
			}
			called[s.Role] = true
			if RoleOf(s.Role).Kind != s.Kind {
				t.Errorf("%s: stage %s is a %s, its role a %s", name, s.Name, s.Kind, RoleOf(s.Role).Kind)
			}
		}
	}
	for _, r := range Roles {
		info := RoleOf(r)
		if !called[r] {
			t.Errorf("role %s is called by no workflow", r)
		}
		if info.Chooses != "" && !RoleOf(info.Chooses).Answers {
			t.Errorf("role %s chooses among %q, which does not answer", r, info.Chooses)
		}
		if info.Supervisory != (len(info.Fallbacks) > 0) {
			t.Errorf("role %s: supervisory %v with fallbacks %v", r, info.Supervisory, info.Fallbacks)
		}
		if info.Unlogged != NoFallback && !slices.Contains(info.Fallbacks, info.Unlogged) {
			t.Errorf("role %s: unlogged class %q is not one of its fallbacks %v", r, info.Unlogged, info.Fallbacks)
		}
	}
	if got := RoleOf("judge"); got.Answers || got.Supervisory || got.Fallbacks != nil {
		t.Errorf("unknown role: %+v", got)
	}
}

func TestSettingsValue(t *testing.T) {
	s := Settings{NVotes: 5, MaxIterations: 2, MaxSubtasks: 4}
	for _, tc := range []struct {
		key  string
		want int
		ok   bool
	}{{SettingNVotes, 5, true}, {SettingMaxIterations, 2, true}, {SettingMaxSubtasks, 4, true}, {"n_rounds", 0, false}} {
		if got, ok := s.Value(tc.key); got != tc.want || ok != tc.ok {
			t.Errorf("Value(%q) = %d %v, want %d %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFallbackClass(t *testing.T) {
	for f, want := range map[Fallback]Fallback{
		FallbackDropped: FallbackListItems, FallbackListItems: FallbackListItems,
		FallbackFirstDigit: FallbackFirstDigit, NoFallback: NoFallback,
	} {
		if got := f.Class(); got != want {
			t.Errorf("%q.Class() = %q, want %q", f, got, want)
		}
	}
}

func TestConditions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		trains   bool
		trainsIn string
	}{{Base, false, ""}, {SARL, true, Single}, {SP, true, ""}, {IP, true, ""}} {
		c, ok := ConditionOf(tc.name)
		if !ok || c.Trains != tc.trains || c.TrainsIn != tc.trainsIn {
			t.Errorf("%s: %+v %v", tc.name, c, ok)
		}
	}
	if _, ok := ConditionOf("rl"); ok {
		t.Error("an unknown condition was found")
	}
	if !slices.Equal(Conditions, []string{Base, SARL, SP, IP}) {
		t.Errorf("conditions %v", Conditions)
	}
}

func TestTeacherRoles(t *testing.T) {
	want := []string{Generator, Reviser, Evaluator, Aggregator, Orchestrator, Worker, Synthesizer}
	if !slices.Equal(TeacherRoles, want) {
		t.Errorf("teacher roles %v, want %v", TeacherRoles, want)
	}
}
