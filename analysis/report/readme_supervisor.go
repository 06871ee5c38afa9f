package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/study"
)

// The supervisor-value section (analysis/supervisor.go): the gate that
// leaves cells out of claims c and d, and what each supervisory role did
// at the first and the last validation.

// writeSupervisors writes the supervisor value at base per cell, the cells
// claims c and d leave out, and the supervisor metrics at the first and
// last validation per cell and condition.
func writeSupervisors(w md, st *analysis.Study, cl *analysis.Claims) {
	if len(cl.Supervisors) == 0 {
		return
	}
	w("\n## Supervisor value\n\n")
	w("What each workflow's supervisory role adds over its candidates, from the validation samples: rule: %s.\n\n", analysis.SupervisorRule(cl.CI))
	if ex := excludedCells(cl); ex != "" {
		w("Claims c and d leave out %s: their supervisor adds no value at base, so a claim about a multi-agent mechanism cannot be tested there.\n\n", ex)
	} else {
		w("Every cell's supervisor adds value at base, so claims c and d leave out no cell.\n\n")
	}
	w("**At base** (pooled first validations; accuracies of the supervisor's answer, of candidate 1, of a uniformly random candidate, of the most common candidate answer and of the oracle, any candidate right):\n\n")
	w("| task | workflow | scale | role | run views | episodes | supervisor | candidate 1 | random | majority | oracle | supervisor − candidate 1 | evaluator accept rate | true/false accepts | true/false rejects | Fisher p | adds value |\n")
	w("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---|\n")
	for _, v := range cl.Supervisors {
		acc, ta, tr, p, diff := "–", "–", "–", "–", "–"
		sup, first, rnd, maj, orc := "–", "–", "–", "–", "–"
		if v.Role == study.Evaluator {
			acc = f3(v.AcceptRate())
			ta = fmt.Sprintf("%d/%d", v.TrueAccepts, v.FalseAccepts)
			tr = fmt.Sprintf("%d/%d", v.TrueRejects, v.FalseRejects)
			p = pText(v.P)
		} else if v.Episodes > 0 {
			sup, first, rnd, maj, orc = f3(v.Sup), f3(v.First), f3(v.Random), f3(v.Majority), f3(v.Oracle)
			diff = est(v.Diff, true)
		}
		w("| %s | %s | %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", cellEsc(v.Cell.Task), cellEsc(v.Cell.Workflow), scaleCol(v.Cell), v.Role,
			v.Runs, v.Episodes, sup, first, rnd, maj, orc, diff, acc, ta, tr, p, addsText(v))
	}
	w("\n**First and last validation**, per condition (mean over its run views; a → b is the first validation's value, then the last's). Orchestrator: strategies per plan. At the cap: each role's share of outputs that stopped at the token cap.\n\n")
	w("| task | workflow | scale | condition | run views | supervisor | candidate 1 | majority | oracle | evaluator accept rate | strategies per plan | at the cap |\n")
	w("|---|---|---|---|---:|---|---|---|---|---|---|---|\n")
	for _, c := range st.Cells {
		if analysis.SupervisorOf(c.Key.Workflow) == "" {
			continue
		}
		for _, cs := range c.Conditions {
			var first, last []analysis.SupervisorAt
			for _, r := range runsOf(st, c.Key, cs.Condition) {
				if len(r.Workflow) < 2 {
					continue
				}
				first = append(first, analysis.SupervisorAtStep(r.Workflow[0]))
				last = append(last, analysis.SupervisorAtStep(r.Workflow[len(r.Workflow)-1]))
			}
			if len(first) == 0 {
				continue
			}
			move := func(f func(analysis.SupervisorAt) float64) string {
				a, b := meanOf(first, f), meanOf(last, f)
				if math.IsNaN(a) && math.IsNaN(b) {
					return "–"
				}
				return f3(a) + " → " + f3(b)
			}
			var roles []string
			for _, a := range first {
				for role := range a.Capped {
					if !slices.Contains(roles, role) {
						roles = append(roles, role)
					}
				}
			}
			slices.Sort(roles)
			var capped []string
			for _, role := range roles {
				if role == "final" {
					continue
				}
				capped = append(capped, role+" "+move(func(a analysis.SupervisorAt) float64 {
					if v, ok := a.Capped[role]; ok {
						return v
					}
					return math.NaN()
				}))
			}
			w("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", cellEsc(c.Key.Task), cellEsc(c.Key.Workflow), scaleCol(c.Key), cellEsc(cs.Condition), len(first),
				move(func(a analysis.SupervisorAt) float64 { return a.Sup }), move(func(a analysis.SupervisorAt) float64 { return a.First }),
				move(func(a analysis.SupervisorAt) float64 { return a.Majority }), move(func(a analysis.SupervisorAt) float64 { return a.Oracle }),
				move(func(a analysis.SupervisorAt) float64 { return a.AcceptRate }), move(func(a analysis.SupervisorAt) float64 { return a.StrategiesPerPlan }),
				cellEsc(strings.Join(capped, "; ")))
		}
	}
}

// meanOf is the mean of f over the values where it is not NaN.
func meanOf(xs []analysis.SupervisorAt, f func(analysis.SupervisorAt) float64) float64 {
	var s float64
	n := 0
	for _, x := range xs {
		if v := f(x); !math.IsNaN(v) {
			s += v
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return s / float64(n)
}

// excludedCells names the cells claims c and d leave out for want of
// supervisor value, "" when none.
func excludedCells(cl *analysis.Claims) string {
	var out []string
	for _, v := range cl.Supervisors {
		if v.Measured && !v.Adds {
			out = append(out, v.Cell.String())
		}
	}
	return strings.Join(out, ", ")
}

// premiseFindings say, when claim c is not testable, why its premise is
// absent (the same-role gradient cosine and the supervisors' value at
// base); when its late signature test is against because the signature is
// common without a cliff, which roles carry it and what the same-role
// cosine was; and, for a study with I6 runs, the regularizer's realised
// scales.
func premiseFindings(st *analysis.Study, cl *analysis.Claims) []string {
	var out []string
	verdict := cl.Cliffs.Verdict
	if cl.Late != nil {
		verdict = cl.Late.Cliffs.Verdict
	}
	// cosines reads every run's steps, so only the findings that print it
	// call it.
	cosines := func() string {
		c := analysis.SameRoleCosines(st)
		if c.Steps == 0 {
			return ""
		}
		return fmt.Sprintf("same-role agents' gradients do not point together (mean cosine %.3f over %d role-steps, above amp_cos %g in %.1f%% of them; the loss averages an adapter's turns, so same-role agents average rather than add)",
			c.Mean, c.Steps, st.Params.AmpCos, 100*float64(c.Above)/float64(c.Steps))
	}
	if lc := cl.Late; lc != nil && lc.Cliffs.Signature.Outcome == analysis.Against && lc.Cliffs.Signature.Reason == analysis.CommonSignature && len(lc.Cliffs.QuietSignature) > 0 {
		var roles []string
		sole, all := 0, 0
		for _, r := range lc.Cliffs.QuietSignature {
			roles = append(roles, fmt.Sprintf("%s in %d", r.Role, r.Runs))
			all += r.Runs
			if !r.SameRole {
				sole += r.Runs
			}
		}
		s := fmt.Sprintf("What claim c's against on the signature rests on: in the IP runs without a cliff the signature sits first on %s; in %d of these %d runs on a role with one agent, which the rule tests on its gradient norm alone, so there it is not amplification between same-role agents", strings.Join(roles, ", "), sole, all)
		if c := cosines(); c != "" {
			s += "; and " + c
		}
		out = append(out, s+".")
	}
	if verdict == analysis.NotTestable {
		var parts []string
		if c := cosines(); c != "" {
			parts = append(parts, c)
		}
		var none int
		var example string
		for _, v := range cl.Supervisors {
			if !v.Measured || v.Adds {
				continue
			}
			none++
			if example == "" && v.Role == study.Aggregator && v.Cell.Arm == "" {
				example = fmt.Sprintf("in %s the aggregator is right in %.3f of episodes against %.3f for candidate 1, %.3f for a random candidate and %.3f for the oracle", v.Cell, v.Sup, v.First, v.Random, v.Oracle)
			}
		}
		if none > 0 {
			s := fmt.Sprintf("the supervisors add no value at base in %d of %d cells with one (*Supervisor value*)", none, len(cl.Supervisors))
			if example != "" {
				s += ": " + example
			}
			parts = append(parts, s)
		}
		if len(parts) > 0 {
			out = append(out, "Why claim c is not testable here: beyond its tests' own reasons, its premise is absent: "+strings.Join(parts, "; and ")+".")
		}
	}
	for _, c := range analysis.CoherenceScalesOf(st) {
		switch {
		case c.Steps == 0:
		case c.Form == "":
			out = append(out, fmt.Sprintf("The I6 arm is the paper's form of the coherence regularizer (each role's gradient scaled by 1 − λ·max(0, cos(g, g_ema)) before the optimizer) and was close to inert here: over %d role-steps of %d I6 runs the realised scale averaged %.3f (smallest %.3f; %d steps below 0.9), the cosine to the gradient EMA averaging %.3f; a factor near 1 applied before AdamW, whose per-parameter normalisation largely cancels a scale shared by a step's gradient.",
				c.Steps, c.Runs, c.MeanScale, c.MinScale, c.ScaledBelow09, c.MeanCos))
		default:
			out = append(out, fmt.Sprintf("The I6 arm is the coherence regularizer's step form (each adapter's optimizer step multiplied by its roles' factors 1 − λ·max(0, cos(g, g_ema)), weighted by their shares of the squared gradient norm, after AdamW, which therefore cannot undo it): over %d adapter-steps of %d I6 runs the step factor averaged %.3f (smallest %.3f; %d steps below 0.9), the roles' cosine to their gradient EMA averaging %.3f.",
				c.Steps, c.Runs, c.MeanScale, c.MinScale, c.ScaledBelow09, c.MeanCos))
		}
	}
	return out
}

// addsText is a supervisor's value at base as the table shows it.
func addsText(v analysis.SupervisorValue) string {
	if !v.Measured {
		return "not measured (nothing to choose)"
	}
	return yesNo(v.Adds)
}
