package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/analysis"
)

// The degeneration detector's evidence (analysis/degenerate.go): its own
// section beside role capture, and one finding.

// writeDegeneration writes, per cell and condition, the run views with a
// role that degenerated, then every such role.
func writeDegeneration(w md, st *analysis.Study) {
	w("\n### Degeneration\n\n")
	w("A role degenerates by the rule of *Definitions* (degeneration): its outputs break down into truncation at the token cap or repetition. It is judged on every trained run view, under SP and IP alike, and rules capture out (role capture's condition 4).\n\n")
	type row struct {
		run string
		d   analysis.Degeneration
	}
	var rows []row
	var judged int
	w("| task | workflow | scale | condition | runs with a role that degenerated | roles |\n|---|---|---|---|---:|---|\n")
	for _, c := range st.Cells {
		for _, cs := range c.Conditions {
			var k, n int
			roles := map[string]int{}
			for _, r := range runsOf(st, c.Key, cs.Condition) {
				if !r.Trained() || len(r.Degeneration) == 0 {
					continue
				}
				n++
				if r.Degenerated() {
					k++
				}
				for _, d := range r.Degeneration {
					if d.Degenerated {
						roles[d.Role]++
						rows = append(rows, row{r.RunID, d})
					}
				}
			}
			if n == 0 {
				continue
			}
			judged += n
			var parts []string
			for _, role := range slices.Sorted(maps.Keys(roles)) {
				parts = append(parts, fmt.Sprintf("%s %d", role, roles[role]))
			}
			w("| %s | %s | %s | %s | %d/%d | %s |\n", cellEsc(c.Key.Task), cellEsc(c.Key.Workflow), scaleCol(c.Key), cellEsc(cs.Condition), k, n, cellEsc(dashIfEmpty(strings.Join(parts, ", "))))
		}
	}
	if judged == 0 {
		w("\nNo trained run view had two validations with samples, so none was judged.\n")
		return
	}
	if len(rows) == 0 {
		w("\nNo role degenerated.\n")
		return
	}
	w("\n| run | role | share at the token cap base → end | distinct word %d-gram ratio base → end | output at the last validation |\n|---|---|---|---|---|\n", analysis.DegenerateNGram)
	for _, x := range rows {
		d := x.d
		w("| %s | %s | %s → %s | %s → %s | %s |\n", x.run, d.Role, f3(d.CapBase), f3(d.CapEnd), f3(d.DistinctBase), f3(d.DistinctEnd), cellEsc(clip(d.ExampleEnd, 80)))
	}
}

// clip shortens s to at most n runes, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// degenerationFindings count the trained run views with a role that
// degenerated, by condition.
func degenerationFindings(st *analysis.Study) []string {
	counts := map[string][2]int{}
	var conds []string
	for _, r := range st.Runs {
		if !r.Trained() || len(r.Degeneration) == 0 {
			continue
		}
		c, ok := counts[r.Condition]
		if !ok {
			conds = append(conds, r.Condition)
		}
		c[1]++
		if r.Degenerated() {
			c[0]++
		}
		counts[r.Condition] = c
	}
	if len(conds) == 0 {
		return nil
	}
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%d of %d %s run views", counts[c][0], counts[c][1], c))
	}
	return []string{"Degeneration (a role's outputs at the token cap or repeating themselves at the last validation, not at the first): " + strings.Join(parts, ", ") + "."}
}
