package report

import (
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis"
)

// TestFewSeedsWarning: the warning names the cell conditions with one or
// two seeds, says "every" instead of listing them all when all have one,
// and is empty with three seeds everywhere.
func TestFewSeedsWarning(t *testing.T) {
	cell := func(wf string, seeds ...int) *analysis.CellResult {
		c := &analysis.CellResult{Key: analysis.CellKey{Workflow: wf, Task: "synth-math", Scale: "s"}}
		for i, n := range seeds {
			c.Conditions = append(c.Conditions, analysis.CondSummary{Condition: []string{"base", "sp", "ip"}[i], Seeds: n})
		}
		return c
	}
	cases := []struct {
		name      string
		cells     []*analysis.CellResult
		want, not []string
	}{
		{"all three", []*analysis.CellResult{cell("voting", 3, 3, 3)}, nil, []string{"Warning"}},
		{"all one", []*analysis.CellResult{cell("voting", 1, 1), cell("eval-opt", 1)}, []string{"Every cell condition (3) rests on one seed"}, []string{"voting/"}},
		{"all two", []*analysis.CellResult{cell("voting", 2, 2), cell("eval-opt", 2)}, []string{"Every cell condition (3) rests on two seeds"}, []string{"voting/", "one seed"}},
		{"mixed", []*analysis.CellResult{cell("voting", 1, 2, 3)}, []string{"1 cell conditions rest on one seed (", " base)", "1 cell conditions rest on two seeds (", " sp)"}, []string{"Every"}},
	}
	for _, c := range cases {
		got := fewSeedsWarning(&analysis.Study{Cells: c.cells})
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: warning %q lacks %q", c.name, got, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: warning %q has %q", c.name, got, n)
			}
		}
	}
}
