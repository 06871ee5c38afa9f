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
	used := map[string][]string{} // routing -> the workflows it runs in
	for _, arm := range s.ArmNames() {
		mx := s.ArmMatrix(arm)
		for _, cond := range mx.Conditions {
			if _, ok := s.Routings[cond]; ok {
				for _, wf := range mx.Workflows {
					if !slices.Contains(used[cond], wf) && trains(cond) && wf != study.Single {
						used[cond] = append(used[cond], wf)
					}
				}
			}
		}
	}
	for _, name := range sortedKeys(s.Routings) {
		checkRoutingUse(name, s.routing(name), used[name], c.section("routings."+name))
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

// checkRoutingUse refuses what a routing would leave without effect in the
// workflows it runs in (wfs): no workflow at all, a role none of them
// calls, settings of an adapter none of them routes a role to, and a
// workflow all of whose roles it freezes (nothing would train).
func checkRoutingUse(name string, r *study.Routing, wfs []string, c checker) {
	if len(wfs) == 0 {
		c.errf("", "routing %s is named by no grid's conditions with a workflow it could train (single is trained by sa-rl only); name it in matrix.conditions or an arm's, or remove it", name)
		return
	}
	var roles, adapters []string
	for _, wf := range wfs {
		trained := false
		for _, role := range study.WorkflowOf(wf).Roles() {
			if !slices.Contains(roles, role) {
				roles = append(roles, role)
			}
			if a := r.Route(role); a != "" {
				trained = true
				if !slices.Contains(adapters, a) {
					adapters = append(adapters, a)
				}
			}
		}
		if !trained {
			c.errf("roles", "routes every role of workflow %s to %s: its runs would train nothing (the condition base evaluates the untrained model)", wf, study.FrozenBase)
		}
	}
	for _, role := range sortedKeys(r.Roles) {
		if !slices.Contains(roles, role) {
			c.errf("roles."+role, "role %s is called by none of the workflows the routing runs in (%v); remove it", role, wfs)
		}
	}
	for _, a := range sortedKeys(r.Adapters) {
		if !slices.Contains(adapters, a) && slices.Contains(r.AdapterNames(), a) {
			c.errf("adapters."+a, "adapter %s trains no role of the workflows the routing runs in (%v); remove it", a, wfs)
		}
	}
}
