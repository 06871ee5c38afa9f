package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/study"
)

// The words of the late-training rules (analysis/claims_late.go): the gate,
// the table of late events, and claims c and d as a study with a late
// phase judges them.

// lateReasonWhy says what decided a late test.
func lateReasonWhy(t analysis.LateTest, alpha float64) string {
	switch t.Reason {
	case analysis.GateClosed:
		return "the gate is closed: no trained run had a late event, so the replica did not produce what the claim is about at these settings"
	case analysis.NoGroup:
		var empty []string
		for _, r := range t.Rates {
			if r.N == 0 {
				empty = append(empty, r.Group)
			}
		}
		return "no run is in the group of " + strings.Join(empty, " nor in that of ") + " (an arm not run)"
	case analysis.NoLateControl:
		return "a detector the test rests on has no shown positive control"
	case analysis.Significant:
		return fmt.Sprintf("every p-value is below %.3g", alpha)
	case analysis.OppositeSignificant:
		return fmt.Sprintf("a one-sided exact test rejects the claim's direction: p below %.3g against it", alpha)
	case analysis.NotSignificant:
		return fmt.Sprintf("no one-sided exact test rejects either direction at %.3g", alpha)
	case analysis.NoLateCliff:
		return "no IP run of the main recipe without an intervention has a late cliff"
	case analysis.OneCliffRun:
		return fmt.Sprintf("fewer than %d IP runs of the main recipe without an intervention have a late cliff, too few to judge", analysis.MinClaimSeeds)
	case analysis.NoQuietRun:
		return "every IP run has a late cliff, so the signature's rarity in runs without one cannot be measured"
	case analysis.MostLead:
		return fmt.Sprintf("the signature leads in a strict majority of the cliff runs and is in at most %g of the runs without a cliff", analysis.RareShare)
	case analysis.FewLead:
		return fmt.Sprintf("the signature begins %d or more steps before the fall in significantly fewer than half of the cliff runs (one-sided binomial)", analysis.SignatureLead)
	case analysis.CommonSignature:
		return fmt.Sprintf("the signature is in significantly more than %g of the IP runs without a cliff (one-sided binomial), so it does not tell the runs apart", analysis.RareShare)
	case analysis.NothingToPrevent:
		return "no IP run without the intervention beside it has a late cliff, so there is nothing for it to prevent"
	case analysis.NoSupervisorValue:
		return "its runs are all in cells whose supervisor adds no value at base (*Supervisor value*), so the multi-agent mechanism it is about is absent there"
	case analysis.OneCount:
		return "the SP voting runs of one task, base model and rate have one n_votes value only (the gradient-mass arm not run)"
	}
	return "neither rule's bound is met"
}

// driftNotCoherence is the sentence claim c's rule adds when I1 lowered the
// cliff rate and I6 did not (LateCliffClaim.DriftNotCoherence).
const driftNotCoherence = " I1 (per-role KL) lowered the cliff rate and I6 did not; that alone does not tell drift from gradient coherence: I1 anchors every departure from the base model whatever its cause, and an I6 whose realised scale stays near 1 acts on neither."

// lateTestText is one late test as the claims section prints it.
func lateTestText(name, rule string, t analysis.LateTest, alpha float64) testText {
	tt := testText{name: name, rule: rule, outcome: outcomeWord(t.Outcome), why: lateReasonWhy(t, alpha) + "."}
	var line []string
	runs := 0
	for _, r := range t.Rates {
		runs += r.N
		line = append(line, fmt.Sprintf("%s %d/%d", r.Group, r.K, r.N))
		tt.evidence = append(tt.evidence, evidence{name: r.Group, count: fmt.Sprintf("%d/%d (exact interval %s)", r.K, r.N, rateInterval(r.Rate))})
	}
	tt.countsLine = strings.Join(line, ", ")
	if len(line) == 0 {
		tt.countsLine = "no runs to compare"
	}
	if runs == 0 {
		tt.short = "no runs to compare"
	}
	for i, p := range t.P {
		tt.evidence = append(tt.evidence, evidence{name: fmt.Sprintf("p-value %d, the claim's direction (one-sided exact)", i+1), count: pText(p)})
	}
	for i, p := range t.PAgainst {
		tt.evidence = append(tt.evidence, evidence{name: fmt.Sprintf("p-value %d, against the claim (one-sided exact)", i+1), count: pText(p)})
	}
	if t.Outcome == analysis.Undecided {
		for i, d := range t.Detectable {
			text := "none: no outcome at these numbers of runs reaches it"
			if !math.IsNaN(d) {
				text = fmt.Sprintf("%.3f", d)
			}
			tt.evidence = append(tt.evidence, evidence{name: fmt.Sprintf("comparison %d: the smallest difference of rates a one-sided exact test at %.3g could detect against the claim at these numbers of runs", i+1, alpha), count: text})
		}
	}
	if !math.IsNaN(t.Diff) {
		tt.evidence = append(tt.evidence, evidence{name: "mean ceiling with the intervention minus without", count: fmt.Sprintf("%+.3f", t.Diff)})
	}
	return tt
}

func pText(p float64) string {
	if math.IsNaN(p) {
		return "–"
	}
	return fmt.Sprintf("%.3g", p)
}

// lateCliffText is claim c under the late rules.
func lateCliffText(lc *analysis.LateClaims) claimText {
	c, a := lc.Cliffs, lc.Alpha
	where := lateTestText("where", fmt.Sprintf("The rate of late cliffs in IP %s runs of the main recipe (*Late events and the gate*) without an intervention must exceed that of IP %s runs and that of SP %s runs of the main recipe, each by a one-sided Fisher exact test below %.3g; by the power rule the test is against only when either of them exceeds it by the same test.", sameRoleAnd(), analysis.OneAgentPerRoleWorkflowsText("and"), sameRoleAnd(), a), c.Where, a)
	sig := lateTestText("signature", fmt.Sprintf("In each IP run of the main recipe without an intervention with a late cliff, the amplification signature (a role's sustained gradient amplification, as in the short-run rule) must begin %d or more steps before the fall; in IP runs without a cliff it must be rare. "+
		"Holds when a strict majority of cliff runs lead and at most %[2]g of the runs without a cliff carry it; by the power rule against only when a one-sided exact binomial test (p below %[3]g) finds significantly fewer than half leading or significantly more than %[2]g of the runs without a cliff carrying it; undecided between.", analysis.SignatureLead, analysis.RareShare, a), c.Signature, a)
	if len(c.QuietSignature) > 0 {
		var roles []string
		for _, r := range c.QuietSignature {
			how := "one agent: its gradient norm alone"
			if r.SameRole {
				how = "two or more agents: norm and same-role cosine"
			}
			roles = append(roles, fmt.Sprintf("%s %d (%s)", r.Role, r.Runs, how))
		}
		sig.evidence = append(sig.evidence, evidence{name: "IP runs without a cliff that carry the signature, by the role that carries it first", count: strings.Join(roles, ", ")})
	}
	for _, e := range lc.Gate.Runs {
		if e.Condition != study.IP || !e.Plain() || !e.Events.Cliff.Late {
			continue
		}
		first := "–"
		if e.Signature >= 0 {
			first = fmt.Sprintf("%s@%d", e.SignatureBy, e.Signature)
		}
		o := analysis.Against
		why := fmt.Sprintf("the signature does not begin %d or more steps before the fall", analysis.SignatureLead)
		if e.Leads {
			o, why = analysis.Holds, fmt.Sprintf("the signature begins %d or more steps before the fall", analysis.SignatureLead)
		}
		sig.units = append(sig.units, unitText{cell: e.Cell, run: e.Run, outcome: outcomeWord(o), why: why, evidence: []evidence{
			{name: "cliff fall step", count: fmt.Sprint(e.Events.Cliff.FallStep)},
			{name: "signature", count: first},
		}})
	}
	i6 := lateTestText("I6", fmt.Sprintf("IP runs with the coherence regularizer against IP runs without one in the same cells (workflow, task and scale) at the same rate, base model, supervisor anchor and n_votes: holds when the late-cliff rate is lower with I6 (one-sided Fisher exact below %.3g), the signature's rate is lower and the mean ceiling at most %g lower; by the power rule against only when the late-cliff rate is higher with I6 by the same test; not testable when no run without I6 beside them has a late cliff.", a, analysis.CeilingCost), c.I6, a)
	ct := claimText{id: "c", statement: "IP's late accuracy cliffs concentrate in " + sameRoleAnd() + ", are predicted by same-role gradient amplification, and the coherence regularizer (I6) prevents them (late-training rules).",
		rule:    "The verdict is refuted when the signature test or the I6 test is against; otherwise not testable when a test is not testable; reproduced when all three hold; inconclusive otherwise.",
		verdict: verdictWord(c.Verdict), tests: []testText{where, sig, i6}}
	var parts []string
	for _, x := range []struct {
		name string
		t    analysis.LateTest
	}{{"where", c.Where}, {"signature", c.Signature}, {"I6", c.I6}} {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", x.name, outcomeWord(x.t.Outcome), lateReasonWhy(x.t, a)))
	}
	ct.why = "Tests: " + strings.Join(parts, "; ") + "." + excludedSentence(lc.Excluded)
	if u := lc.UngatedCliffs; u != nil {
		ct.why += " With every cell (no supervisor-value gate) the rules would read: " + ungatedText("where", u.Where, a) + "; " + ungatedText("signature", u.Signature, a) + "; " + ungatedText("I6", u.I6, a) + "; verdict " + verdictWord(u.Verdict) + "."
	}
	if c.DriftNotCoherence {
		ct.why += driftNotCoherence
	}
	return ct
}

// lateCaptureText is claim d under the late rules.
func lateCaptureText(lc *analysis.LateClaims) claimText {
	d, a := lc.Capture, lc.Alpha
	over := lateTestText("SP over IP", fmt.Sprintf("Runs of the main recipe (*Late events and the gate*) without an intervention count as captured when a role is captured (*Definitions*: role capture; for IP, whose roles train their own adapters, against the dominant role of the cell's SP runs, so that IP's rate measures how often the detector fires without shared gradients). SP's rate must exceed IP's by a one-sided Fisher exact test below %.3g; by the power rule the test is against only when IP's rate exceeds SP's by the same test, and undecided otherwise.", a), d.SPOverIP, a)
	nv := lateTestText("n_votes", fmt.Sprintf("The capture rate of SP voting runs of one task, one base model and one rate must be higher at the largest n_votes than at the smallest (one-sided Fisher exact below %.3g); against only when it is higher at the smallest by the same test.", a), d.NVotes, a)
	ct := claimText{id: "d", statement: "Under SP a role is captured by the role with the most gradient mass, more often than under IP, and more often with more voters (late-training rules).",
		rule:    "The verdict is refuted when SP over IP is against; otherwise not testable when a test is not testable; reproduced when both hold; inconclusive otherwise.",
		verdict: verdictWord(d.Verdict), tests: []testText{over, nv}}
	ct.why = fmt.Sprintf("Tests: SP over IP %s (%s); n_votes %s (%s).", outcomeWord(d.SPOverIP.Outcome), lateReasonWhy(d.SPOverIP, a), outcomeWord(d.NVotes.Outcome), lateReasonWhy(d.NVotes, a))
	if d.NVotesFor != "" {
		ct.why += fmt.Sprintf(" The n_votes comparison is %d against %d on %s.", d.NVotesHi, d.NVotesLo, d.NVotesFor)
	}
	ct.why += excludedSentence(lc.Excluded)
	if u := lc.UngatedCapture; u != nil {
		ct.why += " With every cell (no supervisor-value gate) the rules would read: " + ungatedText("SP over IP", u.SPOverIP, a) + "; " + ungatedText("n_votes", u.NVotes, a) + "; verdict " + verdictWord(u.Verdict) + "."
	}
	return ct
}

// gateSentence says whether the gate is open, with its counts.
func gateSentence(g analysis.Gate) string {
	n := len(g.Runs)
	if n == 0 {
		return "The study has no trained run, so the gate cannot be judged."
	}
	s := fmt.Sprintf("Of %d trained runs, %d had a late event (%d a late cliff, %d a late format collapse), %d only early events and %d none.",
		n, g.Late, g.LateCliffs, g.LateCollapses, g.EarlyOnly, g.None)
	if g.Open {
		return s + " **The gate is open**: the replica produces late events at these settings, so the study goes on to its main arms."
	}
	return s + " **The gate is closed**: no run broke late, so claim c is not producible in this replica at these settings, and the study stops here."
}

// writeLate writes the late-events section: the gate and one row per
// trained run.
func writeLate(w md, lc *analysis.LateClaims) {
	w("\n## Late events and the gate\n\n")
	w("Most trained runs of this study hold their learning rate through the second half of training (at least %g of the summed rate, with %d or more validations after the midpoint), so claims c and d are judged by the late-training rules above, and this section shows what they rest on. ", analysis.LateStudyLRShare, analysis.LateStudyValidations)
	w("A *cliff* is the first validation at which accuracy is at or below the best accuracy so far (the peak) minus max(cliff_abs, cliff_rel × (peak − base)) and stays there for %d validations in a row; "+
		"a role's *format collapse* is the first validation at which its format compliance is at or below its first validation's minus capture_format_drop, for %d validations in a row; "+
		"an event is *late* when it lies after the midpoint of the run's validation span; "+
		"a *strict cliff* is the cliff rule on strict accuracy (episodes right with every supervisory turn in its format, *Strict and lenient accuracy*), shown beside the cliffs on accuracy, which the claims count. "+
		"The *signature* is the first step closing a sustained gradient-amplification window of any role (*leads*: %d or more steps before a late cliff's fall). Lengths are mean output tokens at the first validation and at the collapse; entropy and perplexity are the role's training-time means over the %d steps after the LoRA warm-up and the %d steps up to the collapse (degenerate text raises both; a role copying another's format need not).\n\n",
		analysis.LateLasting, analysis.LateLasting, analysis.SignatureLead, analysis.LateWindow, analysis.LateWindow)
	rungs := "this study has none"
	if len(lc.Gate.Rungs) > 0 {
		rungs = "this study's: " + strings.Join(lc.Gate.Rungs, ", ")
	}
	w("The tests of where cliffs fall, of the signature and of SP over IP take the runs of the *main recipe*: those of the main matrix (no arm) and of its rate rungs (%s), where %s. Interventions: I6 is the coherence regularizer; %s.\n\n",
		rungs, analysis.RungRule, analysis.AnchorRule)
	w("%s\n\n", gateSentence(lc.Gate))
	writeLateGroups(w, lc)
	w("| task | workflow | scale | run | intervention | lr | base | peak | cliff (fall step: accuracy, validations below) | strict cliff | format collapses (role@step: format, length, entropy, perplexity) | signature | leads | captured |\n")
	w("|---|---|---|---|---|---|---:|---:|---|---|---|---|---|---|\n")
	cliffCol := func(c analysis.LateCliff) string {
		if !c.Found {
			return "–"
		}
		s := fmt.Sprintf("%d: %s (%d)", c.FallStep, f3(c.FallAcc), c.Lasting)
		if c.Late {
			s += " late"
		}
		return s
	}
	for _, e := range lc.Gate.Runs {
		c := e.Events.Cliff
		cliff := cliffCol(c)
		strict := "no samples"
		if e.Events.StrictKnown {
			strict = cliffCol(e.Events.StrictCliff)
		}
		var cols []string
		for _, x := range e.Events.Collapses {
			s := fmt.Sprintf("%s@%d: %s→%s, %.0f→%.0f, %s→%s, %s→%s", x.Role, x.Step, f3(x.FormatBase), f3(x.FormatAt), x.LenBase, x.LenAt,
				f2(x.EntropyBase), f2(x.EntropyAt), f2(x.PerplexityBase), f2(x.PerplexityAt))
			if x.Late {
				s += " late"
			}
			cols = append(cols, s)
		}
		sig := "–"
		if e.Signature >= 0 {
			sig = fmt.Sprintf("%s@%d", e.SignatureBy, e.Signature)
		}
		iv := e.Settings.Intervention
		if iv == "" {
			iv = "none"
		}
		if e.Settings.Anchored != "" {
			iv += " (anchored: " + e.Settings.Anchored + ")"
		}
		captured := "–"
		if e.CaptureJudge {
			captured = yesNo(e.Captured)
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", cellEsc(e.Cell.Task), cellEsc(e.Cell.Workflow), scaleCol(e.Cell), cellEsc(e.Run), iv, dashIfEmpty(e.Settings.LR),
			f3(c.Base), f3(c.Peak), cliff, strict, cellEsc(dashIfEmpty(strings.Join(cols, "; "))), sig, yesNo(e.Leads), captured)
	}
	w("\n")
	writeByRate(w, lc)
	writeInterventions(w, lc)
}

// interventionFinding is the summary's line on what each intervention did
// to format collapses ("" without an intervention arm).
func interventionFinding(lc *analysis.LateClaims) string {
	type sums struct{ kw, nw, ko, no int }
	by := map[string]*sums{}
	var order []string
	for _, x := range lc.Interventions {
		s := by[x.Intervention]
		if s == nil {
			s = &sums{}
			by[x.Intervention] = s
			order = append(order, x.Intervention)
		}
		s.kw, s.nw, s.ko, s.no = s.kw+x.With.K, s.nw+x.With.N, s.ko+x.Without.K, s.no+x.Without.N
	}
	if len(order) == 0 {
		return ""
	}
	var parts []string
	for _, iv := range order {
		s := by[iv]
		parts = append(parts, fmt.Sprintf("with %s, %d of %d runs had a role's format collapse, against %d of %d without it in the same cells", iv, s.kw, s.nw, s.ko, s.no))
	}
	return "Interventions: " + strings.Join(parts, "; ") + " (*What the interventions did*, under *Late events and the gate*)." + collapseDriftSentence(lc, "the collapse rate")
}

// collapseDriftSentence reads the conditions of LateClaims.CollapseDrift,
// naming what I1 lowered as what says (" Under IP and SP, I1 lowered
// <what> and I6 did not: ..."; "" when there are none).
func collapseDriftSentence(lc *analysis.LateClaims, what string) string {
	d := lc.CollapseDrift()
	if len(d) == 0 {
		return ""
	}
	up := make([]string, len(d))
	for i, c := range d {
		up[i] = strings.ToUpper(c)
	}
	return fmt.Sprintf(" Under %s, I1 lowered %s and I6 did not. That does not tell drift from gradient coherence: I1 anchors every departure from the base model whatever its cause, and the I6 arm's realised scale stayed near 1 (see the I6 finding).", strings.Join(up, " and "), what)
}

// writeInterventions writes what I1 and I6 did beside claim c: I1's cliff
// test by I6's rule, and each intervention's format-collapse rates against
// the runs without one of the same recipes.
func writeInterventions(w md, lc *analysis.LateClaims) {
	if len(lc.Interventions) == 0 {
		return
	}
	w("### What the interventions did\n\n")
	t := lc.Cliffs.I1
	if len(t.Rates) > 0 && t.Rates[0].N > 0 {
		w("I1 (per-role KL to the base model) by I6's rule, beside claim c: **%s**, %s (%s).", outcomeWord(t.Outcome), lateReasonWhy(t, lc.Alpha), lateTestText("I1", "", t, lc.Alpha).countsLine)
		if lc.Cliffs.DriftNotCoherence {
			w("%s", driftNotCoherence)
		}
		w("\n\n")
	}
	w("Claim c's rules count cliffs; the format collapses that are most of this study's events are counted here. " +
		"Each intervention's runs against the runs without one of the same recipes (cell, rate, base model and n_votes): the share with a role's format collapse (any, and late), with exact intervals, " +
		"a one-sided Fisher exact p-value that the share is lower with the intervention, and the change in mean ceiling. A finding beside claim c, not one of its tests.")
	if !lc.Gate.CliffControlled {
		w(" The late-event detectors have no shown positive control, so these counts are descriptive only.")
	}
	w("%s\n\n", collapseDriftSentence(lc, fmt.Sprintf("the format-collapse rate (p below %.3g)", lc.Alpha)))
	w("| intervention | condition | recipes | collapsed with | collapsed without | one-sided Fisher p (lower with) | late collapse with | late collapse without | mean ceiling with − without |\n")
	w("|---|---|---:|---|---|---:|---|---|---:|\n")
	for _, x := range lc.Interventions {
		w("| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", x.Intervention, cellEsc(x.Condition), x.Recipes, rateText(x.With), rateText(x.Without), pText(x.P),
			rateText(x.LateWith), rateText(x.LateWithout), sf3(x.CeilingDiff))
	}
	w("\n")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// f2 is a value with two decimals, "–" when undefined.
func f2(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

// writeLateGroups lists the groups of runs the late rules compare, with how
// many runs of each the study has, so that an arm not run is named.
func writeLateGroups(w md, lc *analysis.LateClaims) {
	w("The groups of runs the rules compare, and how many runs of each this study has (a group without runs makes its test not testable; where the group is a condition, workflow or intervention, that is an arm not run):\n\n")
	w("| claim | test | group | runs |\n|---|---|---|---:|\n")
	for _, x := range []struct {
		claim, test string
		t           analysis.LateTest
	}{
		{"c", "where", lc.Cliffs.Where}, {"c", "signature", lc.Cliffs.Signature}, {"c", "I6", lc.Cliffs.I6}, {"c", "I1 (beside I6)", lc.Cliffs.I1},
		{"d", "SP over IP", lc.Capture.SPOverIP}, {"d", "n_votes", lc.Capture.NVotes},
	} {
		if len(x.t.Rates) == 0 {
			w("| %s | %s | SP voting runs at two n_votes of one task, base model and rate | none |\n", x.claim, x.test)
			continue
		}
		for _, r := range x.t.Rates {
			n := fmt.Sprint(r.N)
			if r.N == 0 {
				n = "none"
			}
			w("| %s | %s | %s | %s |\n", x.claim, x.test, cellEsc(r.Group), n)
		}
	}
	w("\n")
}

// excludedSentence names the cells claims c and d leave out for want of
// supervisor value ("" when none).
func excludedSentence(cells []analysis.CellKey) string {
	if len(cells) == 0 {
		return ""
	}
	names := make([]string, len(cells))
	for i, c := range cells {
		names[i] = c.String()
	}
	return fmt.Sprintf(" Left out, their supervisor adding no value at base (*Supervisor value*): %s.", strings.Join(names, ", "))
}

// ungatedText is one late test as it would read without the supervisor-
// value gate: outcome, reason, counts, p-values and the smallest
// detectable difference.
func ungatedText(name string, t analysis.LateTest, alpha float64) string {
	var counts []string
	for _, r := range t.Rates {
		counts = append(counts, fmt.Sprintf("%s %d/%d", r.Group, r.K, r.N))
	}
	s := fmt.Sprintf("%s %s (%s", name, outcomeWord(t.Outcome), lateReasonWhy(t, alpha))
	if len(counts) > 0 {
		s += "; " + strings.Join(counts, ", ")
	}
	for i := range t.P {
		s += fmt.Sprintf("; p %s for the claim", pText(t.P[i]))
		if i < len(t.PAgainst) {
			s += fmt.Sprintf(", %s against it", pText(t.PAgainst[i]))
		}
	}
	if t.Outcome == analysis.Undecided {
		for _, d := range t.Detectable {
			if math.IsNaN(d) {
				s += "; no difference detectable at these numbers of runs"
			} else {
				s += fmt.Sprintf("; smallest difference detectable against it %.3f", d)
			}
		}
	}
	return s + ")"
}

// rateTrendText is the rate trend's p-value and what it says at alpha.
func rateTrendText(lc *analysis.LateClaims) string {
	t := lc.RateTrend
	s := fmt.Sprintf("late cliffs at %s over %s, one-sided Fisher exact p %s", t.Hi, t.Lo, pText(t.P))
	switch {
	case analysis.Rejects(t.P, lc.Alpha):
		s += fmt.Sprintf(", below %.3g: more common at the higher rate", lc.Alpha)
	case math.IsNaN(t.Detectable):
		s += ", and no difference is detectable at these numbers of runs"
	default:
		s += fmt.Sprintf(", not below %.3g (the smallest excess it could detect at these numbers of runs: %.3f)", lc.Alpha, t.Detectable)
	}
	return s
}

// rateFinding is the summary's line on late cliffs by learning rate ("" in
// a study without rate rungs): the pooled count at each rate, the groups at
// the highest, and the trend test.
func rateFinding(lc *analysis.LateClaims) string {
	if len(lc.ByRate) == 0 {
		return ""
	}
	var at []string
	for _, r := range lc.ByRate {
		at = append(at, fmt.Sprintf("%s %d/%d", r.LR, r.Late.K, r.Late.N))
	}
	top := lc.ByRate[len(lc.ByRate)-1]
	var groups []string
	for _, g := range top.Groups {
		groups = append(groups, fmt.Sprintf("%s %d/%d", g.Group, g.K, g.N))
	}
	return fmt.Sprintf("Late cliffs by learning rate (the main recipe's runs without an intervention): %s; at %s by condition and workflow %s; %s (*Cliffs by learning rate*, under *Late events and the gate*).",
		strings.Join(at, ", "), top.LR, strings.Join(groups, ", "), rateTrendText(lc))
}

// writeByRate writes the late and all cliffs of the main recipe per
// learning rate and group, with the trend test (nothing without rate
// rungs).
func writeByRate(w md, lc *analysis.LateClaims) {
	if len(lc.ByRate) == 0 {
		return
	}
	w("### Cliffs by learning rate\n\n")
	w("The main recipe's runs without an intervention at each of its rates, by condition and workflow: how many fell off a late cliff (the runs claim c's where test counts, pooling the rates) and off any cliff, early or late, with exact intervals. The test: %s; %s.\n\n", analysis.RateTrendRule, rateTrendText(lc))
	w("| lr | condition and workflow | runs | late cliff | any cliff |\n|---|---|---:|---|---|\n")
	for _, r := range lc.ByRate {
		for i, g := range r.Groups {
			w("| %s | %s | %d | %s | %s |\n", r.LR, cellEsc(g.Group), g.N, rateText(g.Rate), rateText(r.Any[i].Rate))
		}
		w("| %s | all | %d | %s | %s |\n", r.LR, r.Late.N, rateText(r.Late.Rate), rateText(r.AnyAll.Rate))
	}
	w("\n")
}
