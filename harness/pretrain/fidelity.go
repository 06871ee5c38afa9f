package pretrain

import (
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

// FidelityRule states what check fidelity measures; Fidelity computes it.
// Its wording lives here, beside the code, and the calibration report
// reads it from here.
func FidelityRule(recipe string, ci float64) string {
	problemItem, candidateItem := "left", "right"
	if recipe == spec.SupervisorsCandidateFirst {
		problemItem, candidateItem = "right", "left"
	}
	return fmt.Sprintf("Under the %s recipe the evaluator writes one check line (\"Check: ...\") before its verdict and the aggregator one line "+
		"per candidate (\"k: ...\") before its selection. Each line the model wrote is compared with the line the teacher writes for the "+
		"same candidate (%s). lines: check lines read (an aggregator line names a candidate it was shown); exact: lines equal to the "+
		"teacher's; problem side right: on synth-math, lines whose reading of the problem's operands is the teacher's (before \" / \", "+
		"or the "+problemItem+" of each pair); candidate side right: on synth-math, lines whose reading of the candidate is the teacher's (the "+
		"operands after \" / \" or "+candidateItem+" of each pair, or the left-hand sides of the re-done steps); – where the recipe's line has no such "+
		"part; ok on passing / ok on failing: how often the line ends \"ok\" when the teacher's check "+
		"of that candidate passes and when it fails, with %g%% Wilson intervals. A check that carries the skill ends \"ok\" more often "+
		"on passing candidates than on failing ones", recipe, checkLineOf(recipe), ci*100)
}

func checkLineOf(recipe string) string {
	switch recipe {
	case spec.SupervisorsSkilled:
		return "StepCheck on synth-math; synth-code has no check under this recipe"
	case spec.SupervisorsProblemCheck:
		return "ProblemCheck on both tasks"
	case spec.SupervisorsPairCheck:
		return "PairCheck on both tasks"
	case spec.SupervisorsFirstSlip:
		return "FirstSlipCheck on both tasks"
	case spec.SupervisorsCandidateFirst:
		return "CandidateFirstCheck on both tasks"
	}
	return "no check"
}

// Fidelity is how closely one supervisory role's check lines at base
// follow the teacher's on the candidates the role was shown
// (FidelityRule).
type Fidelity struct {
	Role  string
	Turns int // the role's turns
	Lines int // check lines read
	Exact int // lines equal to the teacher's
	// ProblemSide counts lines whose problem-side part is the teacher's;
	// HasProblemSide is false where the recipe's line has none.
	ProblemSide    int
	HasProblemSide bool
	// CandidateSide counts lines whose reading of the candidate is the
	// teacher's (candidateSide); HasCandidateSide is false where the
	// recipe's line has none.
	CandidateSide    int
	HasCandidateSide bool
	// OKPass of Pass lines end "ok" where the teacher's check passes;
	// OKFail of Fail where it fails.
	OKPass, Pass int
	OKFail, Fail int
	// candidateFirst: the recipe's pairs put the candidate's item first.
	candidateFirst bool
}

// FidelityOf measures the check fidelity of role (the evaluator or the
// aggregator) over episodes eps of a task of kind, run with base models
// pretrained under recipe. ok is false where the recipe writes no check
// for that role on that kind.
func FidelityOf(recipe, kind, role string, eps []*workflow.Episode) (Fidelity, bool) {
	f := Fidelity{Role: role, HasProblemSide: problemCheckOf(recipe) != nil && kind == datasets.KindMath,
		HasCandidateSide: kind == datasets.KindMath, candidateFirst: recipe == spec.SupervisorsCandidateFirst}
	check := checkOf(recipe, kind)
	if check == nil || (role != study.Evaluator && role != study.Aggregator) {
		return f, false
	}
	for ep, run := range supervisorRuns(eps, role) {
		var shown []int
		switch run.Kind {
		case study.Judge:
			shown = []int{run.Judged}
		case study.Selector:
			shown = run.Candidates
		default:
			continue
		}
		f.Turns++
		for k, line := range checkLines(run.Kind, ep.Turns[run.Reading.Turn].Completion.Text, len(shown)) {
			cand := strings.TrimSpace(ep.Turns[shown[k-1]].Completion.Text)
			want, pass := check(kind, ep.Problem, cand)
			f.add(line, want, pass)
		}
	}
	return f, true
}

// supervisorRuns yields each stage run of eps whose one reading turn is
// role's, with its episode.
func supervisorRuns(eps []*workflow.Episode, role string) iter.Seq2[*workflow.Episode, workflow.StageRun] {
	return func(yield func(*workflow.Episode, workflow.StageRun) bool) {
		for _, ep := range eps {
			ip, isInterp := ep.Flow.(*workflow.Interp)
			if !isInterp {
				continue
			}
			for _, run := range ip.Runs {
				if run.Reading.Turn < 0 || ep.Turns[run.Reading.Turn].Role != role {
					continue
				}
				if !yield(ep, run) {
					return
				}
			}
		}
	}
}

func (f *Fidelity) add(got, want string, pass bool) {
	f.Lines++
	if got == want {
		f.Exact++
	}
	gp, gc, gOK := sides(got, f.candidateFirst)
	wp, wc, _ := sides(want, f.candidateFirst)
	if f.HasProblemSide && gOK && gp == wp {
		f.ProblemSide++
	}
	if f.HasCandidateSide && gOK && gc == wc {
		f.CandidateSide++
	}
	said := strings.HasSuffix(got, " ok") || got == "ok"
	if pass {
		f.Pass++
		if said {
			f.OKPass++
		}
	} else {
		f.Fail++
		if said {
			f.OKFail++
		}
	}
}

// sides reads a synth-math check line's two readings: of the problem
// (its operands) and of the candidate. A problem-check line lists them
// around " / " ("7 4 / 6 4 differ; ..."); a pair-check line pairs them
// before its first "; " ("7/6! 4/4.; ..."), and a first-slip line that
// stops among them pairs them before its "wrong" ("7/7. 4/6! wrong"); a
// step check (skilled) has no problem side, and its candidate side is the
// left-hand sides of its re-done steps ("7 + 4, 11 + 4"). ok is false when
// the line has none of these shapes. A candidate-first line
// (candidateFirst) pairs the candidate's item first.
func sides(line string, candidateFirst bool) (problem, candidate string, ok bool) {
	if p, rest, found := strings.Cut(line, " / "); found {
		for _, word := range []string{" same", " differ"} {
			if list, _, found := strings.Cut(rest, word); found {
				return p, list, true
			}
		}
		return "", "", false
	}
	head, _, found := strings.Cut(line, "; ")
	if !found {
		head, found = strings.CutSuffix(line, " wrong")
		found = found && strings.HasSuffix(head, "!") && !strings.Contains(head, " = ")
	}
	if found && strings.Contains(head, "/") {
		var ps, cs []string
		for _, item := range strings.Fields(head) {
			w, g, paired := strings.Cut(strings.TrimRight(item, ".!"), "/")
			if !paired {
				return "", "", false
			}
			if candidateFirst {
				w, g = g, w
			}
			ps, cs = append(ps, w), append(cs, g)
		}
		return strings.Join(ps, " "), strings.Join(cs, " "), true
	}
	var lhs []string
	for _, part := range strings.Split(line, ", ") {
		l, _, found := strings.Cut(part, " = ")
		if !found {
			break
		}
		lhs = append(lhs, l)
	}
	return "", strings.Join(lhs, ", "), len(lhs) > 0
}

// checkLines reads a supervisor's check lines from its completion, keyed
// by the 1-based candidate each is about: a judge's first line that
// starts "Check: " (its one candidate), a selector's lines "k: ..." for k
// in 1..n (the first line for each k).
func checkLines(kind study.Kind, text string, n int) map[int]string {
	out := map[int]string{}
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if kind == study.Judge {
			if rest, ok := strings.CutPrefix(line, "Check: "); ok {
				out[1] = strings.TrimSpace(rest)
				return out
			}
			continue
		}
		num, rest, ok := strings.Cut(line, ": ")
		k, err := strconv.Atoi(num)
		if !ok || err != nil || k < 1 || k > n {
			continue
		}
		if _, seen := out[k]; !seen {
			out[k] = strings.TrimSpace(rest)
		}
	}
	return out
}

// fidelityMarkdown writes the check-fidelity table of the calibration's
// rows that have one.
func (c Calibration) fidelityMarkdown(b *strings.Builder) {
	rows := c.rowsWith(func(r CalRow) bool { return r.Fidelity != nil })
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### Check fidelity at base\n\n%s.\n\n", FidelityRule(c.Recipe, c.CI))
	b.WriteString("| task | workflow | role | turns | lines | exact | problem side right | candidate side right | ok on passing | ok on failing |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---|---|\n")
	for _, r := range rows {
		f := *r.Fidelity
		side, cand := "–", "–"
		if f.HasProblemSide {
			side = strconv.Itoa(f.ProblemSide)
		}
		if f.HasCandidateSide {
			cand = strconv.Itoa(f.CandidateSide)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %d | %d | %d | %s | %s | %s | %s |\n", r.Task, r.Workflow, f.Role, f.Turns, f.Lines, f.Exact, side, cand,
			wilsonRate(f.OKPass, f.Pass, c.CI), wilsonRate(f.OKFail, f.Fail, c.CI))
	}
}
