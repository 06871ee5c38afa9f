package analysis

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/harness/study"
)

// Claim d: role capture under SP.

// claimD: role capture under SP, cell by cell.
func claimD(st *Study) ClaimTest {
	p := st.Params
	t := ClaimTest{Name: "role capture under SP",
		Rule: "In each cell whose SP runs share one policy among two or more roles, an SP run counts as captured when a role's format compliance fell by at least capture_format_drop from the first to the last validation " +
			"while its outputs converged on those of the role with the largest mean gradient share (see *Role capture*). " +
			"The cell holds when a strict majority of its SP runs were captured, is against when a strict majority were not, and is undecided on a tie; it has not enough data with fewer than two SP runs with capture comparisons. " +
			"Beside it: the capture rate (fraction of SP runs captured, with a t interval over seeds, the seed part of the interval rule, since capture is not recomputed on resampled problems) " +
			"and, as the paper's diagnostic, the aggregator's output length at the last validation over that at the first (mean over seeds, same interval) for SP and for IP. " + majorityRule("cells")}
	byWF := map[string][2]int{}
	for _, c := range st.Cells {
		sp := c.Cond(study.SP)
		if sp == nil {
			continue
		}
		runs := condRuns(st, c.Key, study.SP)
		var ind, lenSP, lenIP []float64
		roleSet := map[string]bool{}
		shared := false
		for _, r := range runs {
			if len(r.Dominance) > 0 {
				shared = true
			}
			if judged, yes, roles := captured(r); judged {
				ind = append(ind, b01(yes))
				for _, x := range roles {
					roleSet[x] = true
				}
			}
			if v, ok := aggregatorLength(r); ok {
				lenSP = append(lenSP, v)
			}
		}
		if !shared {
			continue // no policy of two or more roles: the claim does not apply
		}
		for _, r := range condRuns(st, c.Key, study.IP) {
			if v, ok := aggregatorLength(r); ok {
				lenIP = append(lenIP, v)
			}
		}
		k := int(math.Round(sum(ind)))
		roles := slices.Sorted(maps.Keys(roleSet))
		u := ClaimUnit{Cell: c.Key, Evidence: []Evidence{
			{Name: "SP runs captured", Count: fmt.Sprintf("%d/%d", k, len(ind))},
			{Name: "capture rate", Value: seedEstimate(ind, p.CI, 0, 1)},
			{Name: "captured → dominant", Count: dashIfEmpty(strings.Join(roles, ", "))},
			{Name: "aggregator length last/first, SP", Value: seedEstimate(lenSP, p.CI, 0, math.Inf(1))},
			{Name: "aggregator length last/first, IP", Value: seedEstimate(lenIP, p.CI, 0, math.Inf(1))},
		}}
		switch {
		case len(ind) < MinClaimSeeds:
			u.Outcome = NoData
			u.Why = fmt.Sprintf("%s with capture comparisons; a cell is judged only with %d or more", plural(len(ind), "SP run"), MinClaimSeeds)
		case 2*k > len(ind):
			u.Outcome, u.Why = Holds, "a strict majority of SP runs captured"
		case 2*k < len(ind):
			u.Outcome, u.Why = Against, "a strict majority of SP runs not captured"
		default:
			u.Outcome, u.Why = Undecided, "as many SP runs captured as not"
		}
		w := byWF[c.Key.Workflow]
		w[1]++
		if u.Outcome == Holds {
			w[0]++
		}
		byWF[c.Key.Workflow] = w
		t.Units = append(t.Units, u)
	}
	majority(&t, "cells")
	if len(t.Units) == 0 {
		t.Why = "No cell has SP runs whose policy is shared by two or more roles, so the claim cannot be judged."
	} else {
		var parts []string
		for _, wf := range slices.Sorted(maps.Keys(byWF)) {
			parts = append(parts, fmt.Sprintf("%s %d of %d", wf, byWF[wf][0], byWF[wf][1]))
		}
		t.Why += " Cells that hold, by workflow: " + strings.Join(parts, ", ") + "."
	}
	return t
}

// captured reports whether a run has role-capture comparisons and whether
// any role was captured, and which roles were.
func captured(r *RunResult) (judged, yes bool, roles []string) {
	for _, c := range r.Capture {
		judged = true
		if c.Captured {
			yes = true
			roles = append(roles, c.Role+"→"+c.Dominant)
		}
	}
	return judged, yes, roles
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
