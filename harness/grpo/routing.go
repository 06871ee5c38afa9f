// Package grpo trains workflows with multi-agent GRPO: it routes each role's
// turns to a policy (adapter) according to the study's condition, computes
// group-normalised outcome advantages, runs the training loop with
// validation and checkpoints, and turns episodes into the run-log rows
// (steps, evals, samples, timing).
//
// Conditions: base (no training), sa-rl (one adapter "policy" trained on the
// single workflow and evaluated in any), sp (one adapter "shared" for every
// role), ip (one adapter per role type, named by the role; same-role agents
// such as generator0..2 share it).
package grpo

import (
	"fmt"
	"sort"

	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

// Adapter names of the single-adapter conditions.
const (
	SharedAdapter = "shared" // sp
	PolicyAdapter = "policy" // sa-rl
)

// Route returns the adapter a role's turns use under a condition: "" (the
// base policy) for base, "policy" for sa-rl, "shared" for sp and the role's
// own name for ip.
func Route(condition, role string) (string, error) {
	if !knownRole(role) {
		return "", fmt.Errorf("grpo: route: unknown role %q", role)
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

// Router returns Route for one condition as a function of the role, for
// workflow.Runner.Route.
func Router(condition string) (func(role string) string, error) {
	if _, err := Route(condition, study.Generator); err != nil {
		return nil, err
	}
	return func(role string) string {
		a, _ := Route(condition, role)
		return a
	}, nil
}

// Adapters returns the adapters a condition needs to run the given
// workflows, sorted and without duplicates (none for base).
func Adapters(condition string, workflows ...string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, w := range workflows {
		roles, err := workflow.Roles(w)
		if err != nil {
			return nil, err
		}
		for _, r := range roles {
			a, err := Route(condition, r)
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
