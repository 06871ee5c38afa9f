package spec

import (
	"fmt"
	"slices"

	"github.com/marlowlab/marlow/harness/study"
)

// The routings section declares routings of roles to adapters
// (study.Routing) by name. A matrix's or an arm's conditions may name one
// beside base, sa-rl, sp and ip: its runs are runs of the routing's from
// condition (sp or ip) whose IDs carry the routing's name in place of the
// condition, and whose configs hold the routing (a run of sp or ip holds
// none, so its ID and hash are what they were before routings existed).

// routing returns the declared routing a condition names, with its name
// set, or nil for a built-in condition.
func (s *Spec) routing(cond string) *study.Routing {
	r, ok := s.Routings[cond]
	if !ok {
		return nil
	}
	r.Name = cond
	return &r
}

// conditionNames lists what a grid's conditions may name: the built-in
// conditions, then the declared routings in name order.
func (s *Spec) conditionNames() []string {
	return append(slices.Clone(Conditions), sortedKeys(s.Routings)...)
}

// validateRoutings checks each declared routing, and that no grid (the
// main matrix or an arm) runs two routings of one condition: the analysis
// judges a routing's runs as runs of its from condition, keyed by cell and
// arm, so two of them in one grid would be taken for seeds of one
// condition (put the second in an arm of its own).
func validateRoutings(s *Spec, c checker) {
	for _, name := range sortedKeys(s.Routings) {
		p := "routings." + name
		s.Routings[name].Validate(name, func(key, format string, a ...any) {
			c.errf(join(p, key), format, a...)
		})
	}
	for _, arm := range s.ArmNames() {
		rel := "matrix.conditions"
		if arm != "" {
			rel = "arms." + arm + ".matrix.conditions"
		}
		by := map[string]string{} // condition -> the first entry judged as it
		for i, cond := range s.ArmMatrix(arm).Conditions {
			as := cond
			if r := s.routing(cond); r != nil {
				as = r.From
			}
			if first, dup := by[as]; dup && first != cond {
				c.errf(fmt.Sprintf("%s[%d]", rel, i), "%q and %q are both %s runs of this grid, which the analysis cannot tell apart; "+
					"run one of them in an arm of its own", first, cond, as)
				continue
			}
			by[as] = cond
		}
	}
}
