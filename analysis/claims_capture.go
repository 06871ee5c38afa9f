package analysis

import (
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/harness/study"
)

// Claim d: role capture under SP.

// claimD: role capture under SP, cell by cell, in the cells whose
// supervisor adds value at base (valued; a cell absent from it is kept).
func claimD(st *Study, valued map[CellKey]bool) CaptureClaim {
	p := st.Params
	cl := CaptureClaim{Alpha: 1 - p.CI}
	var outcomes []Outcome
	byWF := map[string][2]int{}
	var capK, capN int
	for _, c := range st.Cells {
		sp := c.Cond(study.SP)
		if sp == nil {
			continue
		}
		runs := condRuns(st, c.Key, study.SP)
		var ind, lenSP, lenIP []float64
		pairSet := map[RolePair]bool{}
		shared := false
		for _, r := range runs {
			if len(r.Dominance) > 0 {
				shared = true
			}
			if judged, yes, pairs := captured(r); judged {
				ind = append(ind, b01(yes))
				for _, x := range pairs {
					pairSet[x] = true
				}
			}
			if v, ok := aggregatorLength(r); ok {
				lenSP = append(lenSP, v)
			}
		}
		if !shared {
			continue // no policy of two or more roles: the claim does not apply
		}
		if adds, ok := valued[c.Key]; ok && !adds {
			cl.Excluded = append(cl.Excluded, c.Key)
			continue
		}
		for _, r := range condRuns(st, c.Key, study.IP) {
			if v, ok := aggregatorLength(r); ok {
				lenIP = append(lenIP, v)
			}
		}
		k := int(math.Round(sum(ind)))
		capK += k
		capN += len(ind)
		u := CaptureCell{Cell: c.Key, Captured: k, Judged: len(ind), Exact: ClopperPearson(k, len(ind), p.CI), P: math.NaN(), Detectable: math.NaN(),
			Rate:  seedEstimate(ind, p.CI, 0, 1),
			Pairs: sortedPairs(pairSet),
			LenSP: seedEstimate(lenSP, p.CI, 0, math.Inf(1)),
			LenIP: seedEstimate(lenIP, p.CI, 0, math.Inf(1))}
		switch {
		case len(ind) < MinClaimSeeds:
			u.Outcome, u.Reason = NoData, FewCaptureRuns
		case 2*k > len(ind):
			u.Outcome, u.Reason = Holds, MostCaptured
		case Rejects(BinomLE(k, len(ind), 0.5), 1-p.CI):
			u.Outcome, u.Reason = Against, MostNotCaptured
		default:
			u.Outcome, u.Reason = Undecided, EvenCaptured
		}
		if len(ind) > 0 {
			u.P = BinomLE(k, len(ind), 0.5)
			u.Detectable = BinomDetectable(len(ind), 0.5, 1-p.CI)
		}
		w := byWF[c.Key.Workflow]
		w[1]++
		if u.Outcome == Holds {
			w[0]++
		}
		byWF[c.Key.Workflow] = w
		cl.Cells = append(cl.Cells, u)
		outcomes = append(outcomes, u.Outcome)
	}
	cl.Test = majority(outcomes, 1-st.Params.CI)
	switch {
	case len(cl.Cells) == 0 && len(cl.Excluded) > 0:
		cl.Test.Reason = NoValueCell
	case len(cl.Cells) == 0:
		cl.Test.Reason = NoSharedCell
	case cl.Test.Outcome != Untestable && !st.controlled(CaptureDetector):
		cl.Test.Outcome, cl.Test.Reason = Untestable, NoControl
	}
	cl.Verdict = verdictOf(cl.Test.Outcome)
	cl.Pooled = ClopperPearson(capK, capN, p.CI)
	for _, wf := range slices.Sorted(maps.Keys(byWF)) {
		cl.ByWorkflow = append(cl.ByWorkflow, WorkflowTally{Workflow: wf, Holds: byWF[wf][0], Cells: byWF[wf][1]})
	}
	return cl
}

// sortedPairs lists a set of role pairs in the order of their names
// joined role→dominant.
func sortedPairs(set map[RolePair]bool) []RolePair {
	key := func(x RolePair) string { return x.Role + "→" + x.Dominant }
	out := slices.Collect(maps.Keys(set))
	slices.SortFunc(out, func(a, b RolePair) int { return strings.Compare(key(a), key(b)) })
	return out
}

// captured reports whether a run has role-capture comparisons and whether
// any role was captured, and which roles were, with their dominant roles.
func captured(r *RunResult) (judged, yes bool, pairs []RolePair) {
	for _, c := range r.Capture {
		judged = true
		if c.Captured {
			yes = true
			pairs = append(pairs, RolePair{c.Role, c.Dominant})
		}
	}
	return judged, yes, pairs
}

// aggregatorLength returns the ratio of the aggregator's mean output
// length at the last validation to that at the first, from the run's
// evals rows; ok is false without two validations of the role.
func aggregatorLength(r *RunResult) (float64, bool) {
	var first, last float64
	n := 0
	for _, e := range r.Evals() {
		if e.Role != study.Aggregator || math.IsNaN(e.MeanLen) {
			continue
		}
		if n == 0 {
			first = e.MeanLen
		}
		last = e.MeanLen
		n++
	}
	if n < 2 || first <= 0 {
		return 0, false
	}
	return last / first, true
}
