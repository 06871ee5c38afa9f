// Package grpo trains workflows with multi-agent GRPO: it routes each role's
// turns to a policy (adapter) according to the study's condition, computes
// group-normalised outcome advantages, runs the training loop with
// validation and checkpoints, and turns episodes into the run-log rows
// (steps, evals, samples, timing).
//
// Conditions: base (no training), sa-rl (one adapter "policy" trained on the
// single workflow and evaluated in any), sp (one adapter "shared" for every
// role), ip (one adapter per role type, named by the role; same-role agents
// such as generator0..2 share it). A run of a declared routing
// (study.Routing) is an sp or ip run whose roles go where the routing sends
// them: to another (possibly shared) adapter or to the frozen base model,
// each adapter trained at its own learning-rate multiplier and KL
// coefficient.
package grpo

import (
	"fmt"
	"sort"

	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

// Adapter names of the single-adapter conditions.
const (
	SharedAdapter = study.SharedAdapter // sp
	PolicyAdapter = "policy"            // sa-rl
)

// Route returns the adapter a role's turns use under a condition and its
// routing (nil: the condition's own): "" (the base policy) for base and
// for a role a routing freezes, "policy" for sa-rl, "shared" for sp and the
// role's own name for ip.
func Route(condition string, routing *study.Routing, role string) (string, error) {
	if !knownRole(role) {
		return "", fmt.Errorf("grpo: route: unknown role %q", role)
	}
	if routing != nil {
		if routing.From != condition {
			return "", fmt.Errorf("grpo: route: routing %q starts from %q, but the run's condition is %q", routing.Name, routing.From, condition)
		}
		return routing.Route(role), nil
	}
	switch condition {
	case study.Base:
		return "", nil
	case study.SARL:
		return PolicyAdapter, nil
	case study.SP:
		return SharedAdapter, nil
	case study.IP:
		return role, nil
	}
	return "", fmt.Errorf("grpo: route: unknown condition %q (want one of %v)", condition, study.Conditions)
}

func knownRole(role string) bool {
	for _, r := range workflow.AllRoles {
		if r == role {
			return true
		}
	}
	return false
}

// Router returns Route for one condition and routing as a function of the
// role, for workflow.Runner.Route.
func Router(condition string, routing *study.Routing) (func(role string) string, error) {
	if _, err := Route(condition, routing, study.Generator); err != nil {
		return nil, err
	}
	return func(role string) string {
		a, _ := Route(condition, routing, role)
		return a
	}, nil
}

// Adapters returns the adapters a condition and routing need to run the
// given workflows, sorted and without duplicates (none for base, and none
// for a role the routing freezes).
func Adapters(condition string, routing *study.Routing, workflows ...string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, w := range workflows {
		roles, err := workflow.Roles(w)
		if err != nil {
			return nil, err
		}
		for _, r := range roles {
			a, err := Route(condition, routing, r)
			if err != nil {
				return nil, err
			}
			if a != "" && !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
