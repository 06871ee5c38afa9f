package pretrain

import (
	"slices"
	"testing"

	"github.com/marlowlab/marlow/harness/study"
)

// TestKindTeachers: every role kind has a teacher the pretraining renders,
// of a built-in role of that kind; a built-in role is its own teacher and
// a role of no known kind has none.
func TestKindTeachers(t *testing.T) {
	for _, k := range study.Kinds() {
		tr, ok := KindTeacher[k.Kind]
		if !ok || !slices.Contains(TeacherRoles, tr) || study.RoleOf(tr).Kind != k.Kind {
			t.Errorf("kind %s: teacher %q (known %v), want a teacher role of that kind", k.Kind, tr, ok)
		}
	}
	for _, r := range study.Roles {
		if got := TeacherOf(r); got != r {
			t.Errorf("TeacherOf(%s) = %q, want itself", r, got)
		}
	}
	if got := TeacherOf("critic"); got != "" {
		t.Errorf("TeacherOf of an unregistered role = %q, want none", got)
	}
}
