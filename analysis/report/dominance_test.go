package report

import (
	"strings"
	"testing"
)

// TestDominanceFindingNoBlankRole: run views whose gradient shares were all
// undefined (no dominant role) must not print a blank role name.
func TestDominanceFindingNoBlankRole(t *testing.T) {
	st := fixtureStudy(t)
	blanked := 0
	for _, r := range st.Runs {
		for i := range r.Dominance {
			r.Dominance[i].DominantRole = ""
			blanked++
		}
	}
	if blanked == 0 {
		t.Fatal("the fixture has no dominance results to blank")
	}
	for _, f := range findings(st) {
		if strings.Contains(f, "gradient share") && (strings.Contains(f, "was  in") || strings.Contains(f, "was in")) {
			t.Errorf("finding with a blank role: %q", f)
		}
	}
}
