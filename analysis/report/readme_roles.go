package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/study"
)

// The strict and lenient accuracy, the role-level workflow metrics and the
// IP-vs-SP format-collapse comparison (analysis/roles.go, collapse.go).

// signatureWord names a format signature.
func signatureWord(s analysis.Signature) string {
	switch s {
	case analysis.SigAnswerLine:
		return "Answer: line"
	case analysis.SigCodeFence:
		return "code fence"
	case analysis.SigWorkedSteps:
		return "worked steps"
	}
	return "none"
}

// writeStrict writes strict and lenient final accuracy per cell and
// condition, the role-level metrics at the last validation, and the
// format-collapse comparison.
func writeStrict(w md, st *analysis.Study, cl *analysis.Claims) {
	ciPct := fmt.Sprintf("%g%%", cl.CI*100)
	w("\n## Strict and lenient accuracy\n\n")
	w("The workflows read a supervisory role's output leniently, as the paper's code does: an aggregator without a valid `Selected:` line picks the candidate of its first digit or candidate 1, an evaluator verdict that does not parse counts as Incorrect, an orchestrator without strategy lines has its list items used or gets one free-choice worker. "+
		"*Lenient* accuracy grades the final answer as it stands (the matrix's accuracy, here recomputed from the validation samples); *strict* accuracy also counts an episode wrong when any supervisory output (aggregator, evaluator, orchestrator, synthesizer) did not parse, by the workflow's own parse (the samples' `compliant`). "+
		"Both are final accuracies like the matrix's (the mean of each run's last 3 validations), mean over seeds with a t interval over seeds (%s; none with one seed). *Unparsed* is the share of the supervisory turns of the last validation that did not parse, with the fallbacks taken.\n\n", ciPct)
	w("| task | workflow | scale | condition | seeds | lenient final | strict final | lenient − strict | unparsed supervisory turns | fallbacks taken |\n|---|---|---|---|---:|---:|---:|---:|---:|---|\n")
	for _, c := range st.Cells {
		for _, cs := range c.Conditions {
			runs := runsOf(st, c.Key, cs.Condition)
			turns, unparsed, fbs := fallbackTotals(runs)
			gap := math.NaN()
			if !math.IsNaN(cs.StrictFinal.Value) {
				gap = cs.LenientFinal.Value - cs.StrictFinal.Value
			}
			un := "–"
			if turns > 0 {
				un = fmt.Sprintf("%s (%d/%d)", f3(float64(unparsed)/float64(turns)), unparsed, turns)
			}
			w("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", cellEsc(c.Key.Task), cellEsc(c.Key.Workflow), scaleCol(c.Key), cellEsc(cs.Condition), cs.Seeds,
				est(cs.LenientFinal, false), est(cs.StrictFinal, false), f3(gap), un, cellEsc(dashIfEmpty(fbs)))
		}
	}
	writeRoleMetrics(w, st)
	writeCollapse(w, cl, ciPct, len(st.Arms()) > 0)
}

// runsOf are the run views of a condition in a cell.
func runsOf(st *analysis.Study, key analysis.CellKey, cond string) []*analysis.RunResult {
	var out []*analysis.RunResult
	for _, r := range st.Runs {
		if r.Cell == key && r.Condition == cond {
			out = append(out, r)
		}
	}
	return out
}

// fallbackTotals sums the supervisory turns at the runs' last validation:
// all, unparsed, and the fallbacks as "role fallback n, ...".
func fallbackTotals(runs []*analysis.RunResult) (turns, unparsed int, fallbacks string) {
	counts := map[string]map[string]int{}
	for _, r := range runs {
		ws, ok := r.FinalWorkflowStep()
		if !ok {
			continue
		}
		for _, rs := range ws.Roles {
			turns += rs.Turns
			unparsed += rs.Unparsed
			if counts[rs.Role] == nil {
				counts[rs.Role] = map[string]int{}
			}
			for f, n := range rs.Fallbacks {
				counts[rs.Role][f] += n
			}
		}
	}
	var parts []string
	for _, role := range analysis.SupervisoryRoles {
		for _, f := range analysis.Fallbacks(role) {
			if n := counts[role][f]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %s %d", role, f, n))
			}
		}
	}
	return turns, unparsed, strings.Join(parts, ", ")
}

// writeRoleMetrics writes the role-level workflow metrics at the last
// validation, summed over the seeds of each trained condition.
func writeRoleMetrics(w md, st *analysis.Study) {
	w("\n### Role-level workflow metrics\n\n")
	w("At each run's last validation, summed over the seeds of a condition: turns per episode; for eval-opt the evaluator's acceptance rate among parsed verdicts and its false accepts (a wrong answer accepted, of the wrong answers judged) and false rejects (a right one rejected, of the right ones judged); " +
		"for voting how often the aggregator picked a correct candidate when one existed, and candidate 1; for orch-workers the strategies per orchestrator turn and the worker turns per episode.\n\n")
	w("| task | workflow | scale | condition | turns per episode | evaluator accepts | false accepts | false rejects | aggregator picked a correct candidate | picked candidate 1 | strategies per plan | workers per episode |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	ratio := func(k, n int) string {
		if n == 0 {
			return "–"
		}
		return fmt.Sprintf("%s (%d/%d)", f3(float64(k)/float64(n)), k, n)
	}
	mean := func(k, n int) string {
		if n == 0 {
			return "–"
		}
		return f3(float64(k) / float64(n))
	}
	for _, c := range st.Cells {
		if c.Key.Workflow == study.Single {
			continue
		}
		for _, cs := range c.Conditions {
			var t analysis.WorkflowStep
			for _, r := range runsOf(st, c.Key, cs.Condition) {
				ws, ok := r.FinalWorkflowStep()
				if !ok {
					continue
				}
				t.Episodes += ws.Episodes
				t.Turns += ws.Turns
				t.Verdicts += ws.Verdicts
				t.Accepts += ws.Accepts
				t.FalseAccepts += ws.FalseAccepts
				t.FalseRejects += ws.FalseRejects
				t.CorrectJudged += ws.CorrectJudged
				t.Choices += ws.Choices
				t.WithCorrect += ws.WithCorrect
				t.PickedCorrect += ws.PickedCorrect
				t.PickedFirst += ws.PickedFirst
				t.Plans += ws.Plans
				t.Strategies += ws.Strategies
				t.Workers += ws.Workers
			}
			w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", cellEsc(c.Key.Task), cellEsc(c.Key.Workflow), scaleCol(c.Key), cellEsc(cs.Condition),
				mean(t.Turns, t.Episodes), ratio(t.Accepts, t.Verdicts), ratio(t.FalseAccepts, t.Verdicts-t.CorrectJudged), ratio(t.FalseRejects, t.CorrectJudged),
				ratio(t.PickedCorrect, t.WithCorrect), ratio(t.PickedFirst, t.Choices), mean(t.Strategies, t.Plans), mean(t.Workers, t.Plans))
		}
	}
}

// writeCollapse writes the IP-vs-SP format-collapse comparison.
func writeCollapse(w md, cl *analysis.Claims, ciPct string, arms bool) {
	w("\n### Format collapse under IP and SP in " + sameRoleAnd() + "\n\n")
	if len(cl.Collapse) == 0 {
		w("No " + sameRoleOr() + " cell has IP or SP runs with two validations.\n")
		return
	}
	w("A run's roles collapse when some role's format compliance fell by capture_format_drop or more from its first validation to its last. "+
		"Per task (and over every task) the IP and SP runs of the %s cells with a collapsed role are counted, with exact (Clopper–Pearson) %s intervals, and compared by a one-sided Fisher exact test (IP's rate above SP's). "+
		"Lenient parsing hides such a collapse from accuracy (see the strict accuracy above).", sameRoleAnd(), ciPct)
	if arms {
		w(" Only the main matrix's runs are counted: an arm's runs may have one condition only, or another recipe.")
	}
	w("\n\n")
	w("| task | IP runs collapsed | SP runs collapsed | IP − SP | one-sided Fisher p |\n|---|---|---|---:|---:|\n")
	for _, g := range cl.Collapse {
		task := g.Task
		if task == "" {
			task = "all tasks"
		}
		w("| %s | %s | %s | %s | %.2g |\n", cellEsc(task), rateText(g.IP), rateText(g.SP), sf3(g.IP.Value()-g.SP.Value()), g.P)
	}
	w("\n")
}
