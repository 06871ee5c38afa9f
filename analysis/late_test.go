package analysis

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

func curveOf(every int64, acc ...float64) []Point {
	pts := make([]Point, len(acc))
	for i, a := range acc {
		pts[i] = Point{Step: int64(i) * every, Acc: a}
	}
	return pts
}

func formatRows(role string, every int64, format ...float64) []runlog.EvalRow {
	rows := make([]runlog.EvalRow, len(format))
	for i, f := range format {
		rows[i] = runlog.EvalRow{Step: int64(i) * every, Role: role, FormatRate: f, MeanLen: 10 + float64(i)}
	}
	return rows
}

func TestDetectLateEvents(t *testing.T) {
	p := DefaultParams()
	p.CliffAbs = 0.08
	cases := []struct {
		name        string
		curve       []Point
		evals       []runlog.EvalRow
		found       bool
		fall        int64
		late, early bool
		collapses   int
	}{
		{name: "stable", curve: curveOf(20, .2, .25, .3, .3, .31, .29, .3, .3, .3), found: false},
		// peak .4 at step 60; from step 100 on at or below .4 - max(.08, .1) = .3 for three validations
		{name: "late cliff", curve: curveOf(20, .2, .3, .35, .4, .38, .3, .1, .05, .0), found: true, fall: 100, late: true},
		{name: "early cliff", curve: curveOf(20, .2, .3, .1, .05, .05, .04, .03, .02, .0), found: true, fall: 40, early: true},
		// a dip of two validations that recovers is not a cliff
		{name: "dip", curve: curveOf(20, .2, .3, .35, .1, .1, .35, .36, .35, .34), found: false},
		// the fall in the last two validations cannot last three yet
		{name: "censored", curve: curveOf(20, .2, .3, .35, .36, .37, .38, .39, .1, .05), found: false},
		{name: "late collapse only", curve: curveOf(20, .2, .25, .3, .3, .31, .29, .3, .3, .3),
			evals: formatRows(study.Aggregator, 20, .99, .98, .97, .99, .98, .5, .4, .3, .1), late: true, collapses: 1},
		{name: "collapse that recovers", curve: curveOf(20, .2, .25, .3, .3, .31, .29, .3, .3, .3),
			evals: formatRows(study.Aggregator, 20, .99, .5, .5, .99, .98, .97, .99, .98, .97)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := DetectLateEvents(tc.curve, tc.evals, nil, p)
			if ev.Cliff.Found != tc.found || (tc.found && ev.Cliff.FallStep != tc.fall) {
				t.Errorf("cliff found %v at %d, want %v at %d (%+v)", ev.Cliff.Found, ev.Cliff.FallStep, tc.found, tc.fall, ev.Cliff)
			}
			if ev.Late != tc.late || ev.Early != tc.early {
				t.Errorf("late %v early %v, want %v %v", ev.Late, ev.Early, tc.late, tc.early)
			}
			if len(ev.Collapses) != tc.collapses {
				t.Errorf("%d collapses, want %d: %+v", len(ev.Collapses), tc.collapses, ev.Collapses)
			}
			if ev.MidStep != 80 {
				t.Errorf("mid step %v, want 80", ev.MidStep)
			}
		})
	}
}

// ev is a trained run's events for the rule tests.
type ev struct {
	wf, cond, iv string
	cliff        bool  // a late cliff at step 300
	sig          int64 // signature step, -1 none
	captured     *bool
	nVotes       int
	arm, lr      string // the spec arm ("" the main matrix) and the stored rate
	rung         bool   // the arm is a rate rung (rungs.go)
	collapse     int    // the aggregator's format collapse: 0 none, 1 early, 2 late
	ceiling      float64
}

func gateFrom(evs []ev) Gate {
	var g Gate
	g.CliffControlled = true
	for i, e := range evs {
		re := RunEvents{Run: fmt.Sprint("r", i), Cell: CellKey{Workflow: e.wf, Task: "synth-code", Scale: "s", Arm: e.arm}, Condition: e.cond,
			Settings: RunSettings{Intervention: e.iv, NVotes: e.nVotes, Model: "m", LR: e.lr}, Signature: e.sig, Ceiling: .3,
			MainRecipe: e.arm == "" || e.rung}
		re.Events.Cliff = LateCliff{Found: e.cliff, Late: e.cliff, FallStep: 300}
		re.Events.Late = e.cliff
		if e.collapse > 0 {
			re.Events.Collapses = []RoleCollapse{{Role: "aggregator", Late: e.collapse == 2}}
		}
		if e.ceiling > 0 {
			re.Ceiling = e.ceiling
		}
		re.Leads = e.cliff && e.sig >= 0 && e.sig <= 300-SignatureLead
		if e.captured != nil {
			re.CaptureJudge, re.Captured = true, *e.captured
		}
		if e.cliff {
			g.Late++
		}
		g.Runs = append(g.Runs, re)
	}
	g.Open = g.Late > 0
	return g
}

func repeatEv(n int, e ev) []ev {
	out := make([]ev, n)
	for i := range out {
		out[i] = e
	}
	return out
}

func TestLateClaimC(t *testing.T) {
	st := &Study{Params: DefaultParams(), Controls: defaultControls()}
	const v, e = study.Voting, study.EvalOpt
	ipCliffLead := ev{wf: v, cond: study.IP, cliff: true, sig: 200}
	ipCliffLate := ev{wf: v, cond: study.IP, cliff: true, sig: 295}
	ipQuiet := ev{wf: v, cond: study.IP, sig: -1}
	ipQuietSig := ev{wf: v, cond: study.IP, sig: 100}
	eoQuiet := ev{wf: e, cond: study.IP, sig: -1}
	spQuiet := ev{wf: v, cond: study.SP, sig: -1}
	i6Quiet := ev{wf: v, cond: study.IP, iv: I6, sig: -1}
	i6Cliff := ev{wf: v, cond: study.IP, iv: I6, cliff: true, sig: -1}
	main := slices.Concat(repeatEv(8, ipCliffLead), repeatEv(4, ipQuiet), repeatEv(12, eoQuiet), repeatEv(12, spQuiet))
	i6Arm := ev{wf: v, cond: study.IP, iv: I6, sig: -1, arm: "i6"}
	i6ArmLow := ev{wf: v, cond: study.IP, iv: I6, sig: -1, arm: "i6", lr: "1e-3"}
	spLowCliff := ev{wf: v, cond: study.SP, cliff: true, sig: -1, arm: "lowlr", lr: "1e-3"}
	ipLowQuietSig := ev{wf: v, cond: study.IP, sig: 100, arm: "lowlr", lr: "1e-3"}
	cases := []struct {
		name                 string
		evs                  []ev
		verdict              Verdict
		where, sig, i6       Outcome
		whereWhy, sigWhy, iw LateReason
	}{
		{name: "gate closed", evs: slices.Concat(repeatEv(4, ipQuiet), repeatEv(4, spQuiet)), verdict: NotTestable,
			where: Untestable, sig: Untestable, i6: Untestable, whereWhy: GateClosed, sigWhy: GateClosed, iw: GateClosed},
		{name: "gate arm only: no eval-opt, no I6", evs: slices.Concat(repeatEv(2, ipCliffLead), repeatEv(2, ipQuiet), repeatEv(4, spQuiet)), verdict: NotTestable,
			where: Untestable, sig: Holds, i6: Untestable, whereWhy: NoGroup, sigWhy: MostLead, iw: NoGroup},
		{name: "cliffs without a leading signature refute", evs: slices.Concat(repeatEv(6, ipCliffLate), repeatEv(4, ipQuiet), repeatEv(4, spQuiet)), verdict: Refuted,
			where: Untestable, sig: Against, i6: Untestable, whereWhy: NoGroup, sigWhy: FewLead, iw: NoGroup},
		// the power rule: 0 of 4 leading has a one-sided binomial p of 0.0625
		{name: "too few cliff runs to refute", evs: slices.Concat(repeatEv(4, ipCliffLate), repeatEv(4, ipQuiet), repeatEv(4, spQuiet)), verdict: NotTestable,
			where: Untestable, sig: Undecided, i6: Untestable, whereWhy: NoGroup, sigWhy: Between, iw: NoGroup},
		{name: "reproduced", evs: slices.Concat(main, repeatEv(12, i6Quiet)), verdict: Reproduced,
			where: Holds, sig: Holds, i6: Holds, whereWhy: Significant, sigWhy: MostLead, iw: Significant},
		// the power rule: as many cliffs with I6 as without (8/12) is not a
		// test that rejects prevention; 12/12 against 8/12 is (p 0.047)
		{name: "I6 removes the signature, not the cliffs: no test rejects prevention", evs: slices.Concat(main, repeatEv(8, i6Cliff), repeatEv(4, i6Quiet)), verdict: Inconclusive,
			where: Holds, sig: Holds, i6: Undecided, whereWhy: Significant, sigWhy: MostLead, iw: Between},
		{name: "more cliffs with I6 refute", evs: slices.Concat(main, repeatEv(12, i6Cliff)), verdict: Refuted,
			where: Holds, sig: Holds, i6: Against, whereWhy: Significant, sigWhy: MostLead, iw: OppositeSignificant},
		// arms: the intervention in an arm of its own is compared with the
		// main matrix's runs of its rate; a lower-rate arm's SP cliffs and an
		// arm's IP runs without a signature stay out of where and signature
		{name: "arms: I6 arm against the main matrix, lowlr arm left out", evs: slices.Concat(main, repeatEv(12, i6Arm), repeatEv(12, spLowCliff), repeatEv(12, ipLowQuietSig)),
			verdict: Reproduced, where: Holds, sig: Holds, i6: Holds, whereWhy: Significant, sigWhy: MostLead, iw: Significant},
		{name: "no cliff to prevent: I6 without a signature is not testable", evs: slices.Concat(repeatEv(4, ipQuiet), repeatEv(2, ipCliffLead), repeatEv(4, spQuiet), repeatEv(12, eoQuiet), repeatEv(4, inArm(ipQuietSig, "", "1e-3")), repeatEv(4, inArm(i6Quiet, "", "1e-3"))),
			verdict: NotTestable, where: Undecided, sig: Holds, i6: Untestable, whereWhy: NotSignificant, sigWhy: MostLead, iw: NothingToPrevent},
		// rungs: a rate rung's runs join the main matrix's in where and
		// signature (6 IP voting cliffs of 12 against none of 12 eval-opt
		// and SP runs), and I6 at the rung's rate is compared with the rung
		{name: "rungs: the main recipe at two rates", evs: slices.Concat(repeatEv(6, ipQuiet), repeatEv(6, eoQuiet), repeatEv(6, spQuiet),
			repeatEv(6, ev{wf: v, cond: study.IP, cliff: true, sig: 200, arm: "r3", lr: "3e-3", rung: true}),
			repeatEv(6, ev{wf: e, cond: study.IP, sig: -1, arm: "r3", lr: "3e-3", rung: true}), repeatEv(6, ev{wf: v, cond: study.SP, sig: -1, arm: "r3", lr: "3e-3", rung: true}),
			repeatEv(6, ev{wf: v, cond: study.IP, iv: I6, sig: -1, arm: "i6", lr: "3e-3"})),
			verdict: Reproduced, where: Holds, sig: Holds, i6: Holds, whereWhy: Significant, sigWhy: MostLead, iw: Significant},
		// the same runs, the arm not a rung: where has no cliff to count
		{name: "rungs: an arm that is no rung stays out", evs: slices.Concat(repeatEv(6, ipQuiet), repeatEv(6, eoQuiet), repeatEv(6, spQuiet),
			repeatEv(6, ev{wf: v, cond: study.IP, cliff: true, sig: 200, arm: "r3", lr: "3e-3"}),
			repeatEv(6, ev{wf: e, cond: study.IP, sig: -1, arm: "r3", lr: "3e-3"}), repeatEv(6, ev{wf: v, cond: study.SP, sig: -1, arm: "r3", lr: "3e-3"})),
			verdict: NotTestable, where: Undecided, sig: Untestable, i6: Untestable, whereWhy: NotSignificant, sigWhy: NoLateCliff, iw: NoGroup},
		{name: "arms: I6 at another rate than every plain run is no comparison", evs: slices.Concat(main, repeatEv(12, i6ArmLow)), verdict: NotTestable,
			where: Holds, sig: Holds, i6: Untestable, whereWhy: Significant, sigWhy: MostLead, iw: NoGroup},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := lateClaimC(st, gateFrom(tc.evs), 0.05)
			if c.Verdict != tc.verdict {
				t.Errorf("verdict %v, want %v", c.Verdict, tc.verdict)
			}
			for _, x := range []struct {
				name string
				got  LateTest
				o    Outcome
				r    LateReason
			}{{"where", c.Where, tc.where, tc.whereWhy}, {"signature", c.Signature, tc.sig, tc.sigWhy}, {"I6", c.I6, tc.i6, tc.iw}} {
				if x.got.Outcome != x.o || x.got.Reason != x.r {
					t.Errorf("%s: %v (%v), want %v (%v); rates %+v p %v", x.name, x.got.Outcome, x.got.Reason, x.o, x.r, x.got.Rates, x.got.P)
				}
			}
		})
	}
	// without the late-event detector's control nothing rests on it
	noCtl := &Study{Params: DefaultParams(), Controls: map[Detector]string{}}
	g := gateFrom(slices.Concat(main, repeatEv(12, i6Quiet)))
	g.CliffControlled = false
	if c := lateClaimC(noCtl, g, 0.05); c.Verdict != NotTestable || c.Where.Reason != NoLateControl {
		t.Errorf("without controls: verdict %v, where %v", c.Verdict, c.Where.Reason)
	}
}

// inArm puts a run's events in a spec arm at a rate.
func inArm(e ev, arm, lr string) ev {
	e.arm, e.lr = arm, lr
	return e
}

func TestLateClaimD(t *testing.T) {
	st := &Study{Params: DefaultParams(), Controls: defaultControls()}
	sp := func(c bool, n int) ev {
		return ev{wf: study.Voting, cond: study.SP, sig: -1, captured: &[]bool{c}[0], nVotes: n}
	}
	ip := func(c bool) ev {
		return ev{wf: study.Voting, cond: study.IP, sig: -1, captured: &[]bool{c}[0], nVotes: 3}
	}
	cases := []struct {
		name     string
		evs      []ev
		verdict  Verdict
		over, nv Outcome
	}{
		{name: "IP significantly above SP refutes", evs: slices.Concat(repeatEv(12, sp(false, 3)), repeatEv(8, ip(true)), repeatEv(4, ip(false))),
			verdict: Refuted, over: Against, nv: Untestable},
		// the power rule: 2/8 against 4/8 rejects nothing (one-sided p 0.30)
		{name: "IP above SP, not significantly", evs: slices.Concat(repeatEv(2, sp(true, 3)), repeatEv(6, sp(false, 3)), repeatEv(4, ip(true)), repeatEv(4, ip(false))),
			verdict: NotTestable, over: Undecided, nv: Untestable},
		{name: "SP above IP, one n_votes", evs: slices.Concat(repeatEv(10, sp(true, 3)), repeatEv(2, sp(false, 3)), repeatEv(12, ip(false))),
			verdict: NotTestable, over: Holds, nv: Untestable},
		{name: "reproduced", evs: slices.Concat(repeatEv(10, sp(true, 5)), repeatEv(2, sp(false, 2)), repeatEv(8, sp(false, 2)), repeatEv(12, ip(false))),
			verdict: Reproduced, over: Holds, nv: Holds},
		{name: "no rise with n_votes", evs: slices.Concat(repeatEv(6, sp(true, 5)), repeatEv(6, sp(true, 2)), repeatEv(12, ip(false))),
			verdict: Inconclusive, over: Holds, nv: Undecided},
		// arms: the n_votes arms' SP runs (SP only, another base model) stay
		// out of SP over IP, which the main matrix decides
		{name: "arms: gradient-mass arms out of SP over IP", evs: slices.Concat(repeatEv(12, sp(false, 3)), repeatEv(8, ip(true)), repeatEv(4, ip(false)),
			repeatEv(12, inArm(sp(true, 5), "nv5", "")), repeatEv(12, inArm(sp(false, 2), "nv2", ""))),
			verdict: Refuted, over: Against, nv: Holds},
		{name: "arms: n_votes at two rates is no comparison", evs: slices.Concat(repeatEv(10, sp(true, 3)), repeatEv(2, sp(false, 3)), repeatEv(12, ip(false)),
			repeatEv(12, inArm(sp(true, 5), "nv5", "1e-3")), repeatEv(12, inArm(sp(false, 2), "nv2", "2e-3"))),
			verdict: NotTestable, over: Holds, nv: Untestable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := lateClaimD(st, gateFrom(tc.evs), 0.05)
			if d.Verdict != tc.verdict || d.SPOverIP.Outcome != tc.over || d.NVotes.Outcome != tc.nv {
				t.Errorf("verdict %v (SP over IP %v, n_votes %v), want %v (%v, %v); %+v %+v", d.Verdict, d.SPOverIP.Outcome, d.NVotes.Outcome,
					tc.verdict, tc.over, tc.nv, d.SPOverIP.Rates, d.NVotes.Rates)
			}
		})
	}
}

func TestInterventionCollapses(t *testing.T) {
	const v = study.Voting
	plainIP := ev{wf: v, cond: study.IP, sig: -1, collapse: 2, ceiling: .3}
	plainIPEarly := ev{wf: v, cond: study.IP, sig: -1, collapse: 1, ceiling: .3}
	plainSP := ev{wf: v, cond: study.SP, sig: -1, collapse: 2, ceiling: .3}
	i1IP := ev{wf: v, cond: study.IP, iv: I1, sig: -1, arm: "i1", ceiling: .25}
	i1SP := ev{wf: v, cond: study.SP, iv: I1, sig: -1, arm: "i1", collapse: 2, ceiling: .3}
	i6IP := ev{wf: v, cond: study.IP, iv: I6, sig: -1, arm: "i6", collapse: 2, ceiling: .35}
	type row struct {
		iv, cond               string
		recipes                int
		with, without, lw, lwo [2]int // k, n
		significant            bool
		ceilingDiff            float64
	}
	cases := []struct {
		name  string
		evs   []ev
		want  []row
		drift []string // CollapseDrift
	}{
		{name: "no intervention arm: nothing to compare", evs: slices.Concat(repeatEv(6, plainIP), repeatEv(6, plainSP))},
		{name: "I1 prevents IP's collapses, not SP's; I6 prevents none",
			evs: slices.Concat(repeatEv(4, plainIP), repeatEv(2, plainIPEarly), repeatEv(6, plainSP), repeatEv(6, i1IP), repeatEv(6, i1SP), repeatEv(6, i6IP)),
			want: []row{
				{iv: I1, cond: study.IP, recipes: 1, with: [2]int{0, 6}, without: [2]int{6, 6}, lw: [2]int{0, 6}, lwo: [2]int{4, 6}, significant: true, ceilingDiff: -.05},
				{iv: I1, cond: study.SP, recipes: 1, with: [2]int{6, 6}, without: [2]int{6, 6}, lw: [2]int{6, 6}, lwo: [2]int{6, 6}},
				{iv: I6, cond: study.IP, recipes: 1, with: [2]int{6, 6}, without: [2]int{6, 6}, lw: [2]int{6, 6}, lwo: [2]int{4, 6}, ceilingDiff: .05},
			},
			drift: []string{study.IP}},
		// I1 lowers IP's collapses but without an I6 arm beside it the
		// reading against I6 is not made
		{name: "I1 without an I6 arm",
			evs: slices.Concat(repeatEv(6, plainIP), repeatEv(6, i1IP)),
			want: []row{
				{iv: I1, cond: study.IP, recipes: 1, with: [2]int{0, 6}, without: [2]int{6, 6}, lw: [2]int{0, 6}, lwo: [2]int{6, 6}, significant: true, ceilingDiff: -.05},
			}},
		{name: "an arm at another rate is no comparison",
			evs:  slices.Concat(repeatEv(6, plainIP), repeatEv(6, inArm(i1IP, "i1", "1e-3"))),
			want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := interventionCollapses(gateFrom(tc.evs), 0.95)
			lc := &LateClaims{Interventions: got, Alpha: 0.05, Gate: Gate{CliffControlled: true}}
			if d := lc.CollapseDrift(); !slices.Equal(d, tc.drift) {
				t.Errorf("collapse drift under %v, want %v", d, tc.drift)
			}
			// without the detectors' positive control nothing is read
			lc.Gate.CliffControlled = false
			if d := lc.CollapseDrift(); d != nil {
				t.Errorf("collapse drift without a control: %v, want none", d)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d comparisons, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Intervention != w.iv || g.Condition != w.cond || g.Recipes != w.recipes {
					t.Errorf("%d: %s %s over %d recipes, want %s %s over %d", i, g.Intervention, g.Condition, g.Recipes, w.iv, w.cond, w.recipes)
				}
				for _, x := range []struct {
					name string
					r    Rate
					want [2]int
				}{{"with", g.With, w.with}, {"without", g.Without, w.without}, {"late with", g.LateWith, w.lw}, {"late without", g.LateWithout, w.lwo}} {
					if x.r.K != x.want[0] || x.r.N != x.want[1] {
						t.Errorf("%d %s: %d/%d, want %d/%d", i, x.name, x.r.K, x.r.N, x.want[0], x.want[1])
					}
				}
				if (g.P < 0.05) != w.significant {
					t.Errorf("%d: p %v, want significant %v", i, g.P, w.significant)
				}
				if math.Abs(g.CeilingDiff-w.ceilingDiff) > 1e-9 {
					t.Errorf("%d: ceiling change %v, want %v", i, g.CeilingDiff, w.ceilingDiff)
				}
			}
		})
	}
}

func TestStrictCliffOf(t *testing.T) {
	p := DefaultParams()
	curve := make([]Point, 9)
	ws := make([]WorkflowStep, 9)
	for i := range curve {
		step := int64(20 * i)
		curve[i] = Point{Step: step, Acc: 0.9}
		strict := 9
		if i >= 6 {
			strict = 3 // supervisors out of format from step 120: answers still right
		}
		ws[i] = WorkflowStep{Step: step, Episodes: 10, Lenient: 9, Strict: strict}
	}
	cases := []struct {
		name         string
		ws           []WorkflowStep
		known, found bool
		fall         int64
	}{
		{"strict falls, accuracy does not", ws, true, true, 120},
		{"no samples", nil, false, false, -1},
		{"a validation without samples", ws[:8], false, false, -1},
		{"steps that do not match the curve", append(slices.Clone(ws[:8]), WorkflowStep{Step: 999, Episodes: 10}), false, false, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := DetectLateEvents(curve, nil, nil, p)
			ev.StrictCliffOf(curve, tc.ws, p)
			if ev.Cliff.Found {
				t.Fatalf("a cliff on a flat accuracy curve: %+v", ev.Cliff)
			}
			if ev.StrictKnown != tc.known || ev.StrictCliff.Found != tc.found || ev.StrictCliff.FallStep != tc.fall {
				t.Errorf("strict known %v found %v fall %d, want %v %v %d", ev.StrictKnown, ev.StrictCliff.Found, ev.StrictCliff.FallStep, tc.known, tc.found, tc.fall)
			}
		})
	}
}

// rungRun is a run view whose stored config holds the keys RateRungs and
// Settings read.
func rungRun(wf, cond, arm string, seed int, lr string, kl map[string]any, extra map[string]any) *RunResult {
	grpo := map[string]any{"lr": lr, "steps": 400}
	if kl != nil {
		grpo["kl_coef"] = kl
	}
	cfg := map[string]any{"id": fmt.Sprintf("%s-%s-%s-seed%d", wf, cond, arm, seed), "seed": seed * 7, "grpo": grpo,
		"model": map[string]any{"scale": "s"}}
	if arm != "" {
		cfg["arm"] = arm
	}
	for k, v := range extra {
		cfg[k] = v
	}
	return &RunResult{RunID: cfg["id"].(string), Cell: CellKey{Workflow: wf, Task: "synth-math", Scale: "s", Arm: arm},
		TrainWorkflow: wf, Condition: cond, SeedIndex: seed,
		run: &runlog.Run{Manifest: runlog.Manifest{Config: cfg}}}
}

// grid is the runs of one arm over voting and eval-opt x SP and IP x 2
// seeds, at rate lr, each changed by change (nil: none).
func grid(arm, lr string, change func(r *RunResult)) []*RunResult {
	var out []*RunResult
	for _, wf := range []string{study.Voting, study.EvalOpt} {
		for _, cond := range []string{study.SP, study.IP} {
			for seed := 1; seed <= 2; seed++ {
				r := rungRun(wf, cond, arm, seed, lr, nil, nil)
				if change != nil {
					change(r)
				}
				out = append(out, r)
			}
		}
	}
	return out
}

func TestRateRungs(t *testing.T) {
	main := grid("", "0.0015", nil)
	setKey := func(k string, v any) func(r *RunResult) {
		return func(r *RunResult) { r.run.Manifest.Config.(map[string]any)[k] = v }
	}
	cases := []struct {
		name string
		arms []*RunResult
		want []string
	}{
		{"a rate arm over the whole grid is a rung", grid("r25", "0.0025", nil), []string{"r25"}},
		{"two rungs", slices.Concat(grid("r25", "0.0025", nil), grid("r35", "0.0035", nil)), []string{"r25", "r35"}},
		{"the main matrix's rate is no rung", grid("same", "0.0015", nil), nil},
		{"another setting beside the rate", grid("i6", "0.0025", setKey("coherence", 0.5)), nil},
		{"a setting changed in one run", grid("odd", "0.0025", func(r *RunResult) {
			if r.Condition == study.IP && r.SeedIndex == 2 && r.Cell.Workflow == study.Voting {
				r.run.Manifest.Config.(map[string]any)["grpo"].(map[string]any)["steps"] = 200
			}
		}), nil},
		{"part of the grid (voting only)", slices.DeleteFunc(grid("lowlr", "0.001", nil), func(r *RunResult) bool { return r.Cell.Workflow != study.Voting }), nil},
		{"a grid point the main matrix lacks", append(grid("more", "0.0025", nil), rungRun(study.Voting, study.SP, "more", 3, "0.0025", nil, nil)), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &Study{Runs: slices.Concat(main, tc.arms)}
			if got := RateRungs(st); !slices.Equal(got, tc.want) {
				t.Errorf("rungs %v, want %v", got, tc.want)
			}
		})
	}
	if got := RateRungs(&Study{Runs: grid("r25", "0.0025", nil)}); got != nil {
		t.Errorf("without a main matrix: rungs %v, want none", got)
	}
}

func TestSettingsAnchor(t *testing.T) {
	cases := []struct {
		name                   string
		wf                     string
		kl                     map[string]any
		intervention, anchored string
	}{
		{"no KL", study.Voting, nil, NoIntervention, ""},
		{"the aggregator anchored", study.Voting, map[string]any{"aggregator": 0.1}, NoIntervention, "aggregator"},
		{"the evaluator anchored", study.EvalOpt, map[string]any{"evaluator": 0.1, "aggregator": 0.1}, NoIntervention, "evaluator"},
		{"a zero coefficient anchors nothing", study.Voting, map[string]any{"aggregator": 0}, NoIntervention, ""},
		{"the generator's KL is I1", study.Voting, map[string]any{"generator": 0.1}, I1, ""},
		{"every role's KL is I1", study.Voting, map[string]any{"generator": 0.1, "aggregator": 0.1}, I1, ""},
		// a KL on a role the workflow does not call has no effect
		{"an evaluator's KL in voting is nothing", study.Voting, map[string]any{"evaluator": 0.1}, NoIntervention, ""},
		{"a worker's KL in eval-opt is nothing", study.EvalOpt, map[string]any{"worker": 0.1}, NoIntervention, ""},
		{"the worker's KL in orch-workers is I1", study.OrchWorkers, map[string]any{"worker": 0.1, "synthesizer": 0.1}, I1, ""},
		{"the synthesizer anchored", study.OrchWorkers, map[string]any{"synthesizer": 0.1}, NoIntervention, "synthesizer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := rungRun(tc.wf, study.IP, "", 1, "0.0015", tc.kl, nil).Settings()
			if s.Intervention != tc.intervention || s.Anchored != tc.anchored {
				t.Errorf("intervention %q anchored %q, want %q %q", s.Intervention, s.Anchored, tc.intervention, tc.anchored)
			}
		})
	}
}

// TestCoherenceScalesOf: the paper's form is read from the roles' factors,
// the step form from the adapter's step factor on the "*" rows, and each
// run is counted under its own form.
func TestCoherenceScalesOf(t *testing.T) {
	run := func(id, form string) *RunResult {
		coh := map[string]any{"lambda": 0.5}
		if form != "" {
			coh["form"] = form
		}
		r := rungRun(study.Voting, study.IP, "i6", 1, "0.0035", nil, nil)
		r.RunID = id
		r.run.Manifest.Config.(map[string]any)["grpo"].(map[string]any)["coherence"] = coh
		for step := int64(1); step <= 2; step++ {
			r.steps = append(r.steps,
				runlog.StepRow{Step: step, Policy: "generator", Role: "*", CoherenceScale: 0.5, CoherenceCos: math.NaN()},
				runlog.StepRow{Step: step, Policy: "generator", Role: "generator", CoherenceScale: 0.8, CoherenceCos: 0.4})
		}
		return r
	}
	plain := rungRun(study.Voting, study.IP, "", 1, "0.0035", nil, nil)
	cases := []struct {
		name  string
		runs  []*RunResult
		forms []string
		scale []float64
		steps []int
	}{
		{"no I6 run", []*RunResult{plain}, nil, nil, nil},
		{"the paper's form: the roles' factors", []*RunResult{plain, run("a", "")}, []string{""}, []float64{0.8}, []int{2}},
		{"the step form: the step factor", []*RunResult{run("b", "step")}, []string{"step"}, []float64{0.5}, []int{2}},
		{"both forms, each its own", []*RunResult{run("b", "step"), run("a", "")}, []string{"", "step"}, []float64{0.8, 0.5}, []int{2, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CoherenceScalesOf(&Study{Runs: tc.runs})
			if len(got) != len(tc.forms) {
				t.Fatalf("%d forms, want %d: %+v", len(got), len(tc.forms), got)
			}
			for i, c := range got {
				if c.Form != tc.forms[i] || c.Runs != 1 || c.Steps != tc.steps[i] || math.Abs(c.MeanScale-tc.scale[i]) > 1e-12 || math.Abs(c.MeanCos-0.4) > 1e-12 {
					t.Errorf("form %q: %+v, want scale %v over %d steps, cosine 0.4", tc.forms[i], c, tc.scale[i], tc.steps[i])
				}
			}
		})
	}
}

func TestQuietSignatureRoles(t *testing.T) {
	run := func(cond, role string, sameRole, cliff bool, sig int64, iv string) RunEvents {
		e := RunEvents{Cell: CellKey{Workflow: study.Voting}, Condition: cond, Signature: sig, SignatureBy: role,
			SignatureSameRole: sameRole, MainRecipe: true, Settings: RunSettings{Intervention: iv}}
		e.Events.Cliff.Late = cliff
		return e
	}
	cases := []struct {
		name string
		runs []RunEvents
		want []SignatureRole
	}{
		{name: "none", runs: []RunEvents{run(study.IP, "", false, false, -1, "")}},
		{name: "most runs first, ties by role, sole and same-role apart", runs: []RunEvents{
			run(study.IP, "generator", true, false, 120, ""),
			run(study.IP, "aggregator", false, false, 90, ""),
			run(study.IP, "aggregator", false, false, 200, ""),
			run(study.IP, "evaluator", false, false, 60, ""),
		}, want: []SignatureRole{{Role: "aggregator", Runs: 2}, {Role: "evaluator", Runs: 1}, {Role: "generator", SameRole: true, Runs: 1}}},
		{name: "cliff runs, SP runs and interventions stay out", runs: []RunEvents{
			run(study.IP, "aggregator", false, true, 90, ""),
			run(study.SP, "generator", true, false, 90, ""),
			run(study.IP, "aggregator", false, false, 90, I6),
			run(study.IP, "generator", true, false, 300, ""),
		}, want: []SignatureRole{{Role: "generator", SameRole: true, Runs: 1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := quietSignatureRoles(Gate{Runs: tc.runs})
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCliffsByRate(t *testing.T) {
	// ev is a run of the main recipe (unless off) at lr with a cliff at
	// fall (0: none; late after step 200).
	ev := func(cond, wf, lr string, fall int64, iv string, main bool) RunEvents {
		e := RunEvents{Cell: CellKey{Workflow: wf, Task: "synth-math", Scale: "s"}, Condition: cond, MainRecipe: main,
			Settings: RunSettings{LR: lr, Intervention: iv}}
		if fall > 0 {
			e.Events.Cliff = LateCliff{Found: true, FallStep: fall, Late: fall > 200}
		}
		return e
	}
	var ladder []RunEvents
	for _, lr := range []string{"0.004", "1e-3", "0.002"} { // stored order is not rate order
		for i := range 4 {
			var fall int64
			switch {
			case lr == "0.004" && i < 3:
				fall = 300 // three late cliffs at the top
			case lr == "0.004":
				fall = 100 // and one early
			case lr == "0.002" && i == 0:
				fall = 260
			}
			ladder = append(ladder, ev([]string{study.IP, study.SP}[i%2], study.Voting, lr, fall, NoIntervention, true))
		}
	}
	cases := []struct {
		name     string
		runs     []RunEvents
		lrs      []string
		late     []int // pooled late cliffs per rate
		anyTop   int   // any cliff at the highest rate, pooled
		p        float64
		noneWant bool
	}{
		{"three rates, sorted by value", ladder, []string{"1e-3", "0.002", "0.004"}, []int{0, 1, 3}, 4, FisherGreater(3, 4, 0, 4), false},
		{"an intervention's and an arm's runs are left out", append(slices.Clone(ladder),
			ev(study.IP, study.Voting, "0.004", 0, I6, true), ev(study.IP, study.Voting, "1e-3", 300, NoIntervention, false)),
			[]string{"1e-3", "0.002", "0.004"}, []int{0, 1, 3}, 4, FisherGreater(3, 4, 0, 4), false},
		{"one rate: nothing to compare", ladder[:4], nil, nil, 0, math.NaN(), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			by, trend := CliffsByRate(Gate{Runs: tc.runs}, 0.95)
			if tc.noneWant {
				if by != nil || !math.IsNaN(trend.P) {
					t.Fatalf("got %d rates and p %v, want none", len(by), trend.P)
				}
				return
			}
			var lrs []string
			var late []int
			for _, r := range by {
				lrs, late = append(lrs, r.LR), append(late, r.Late.K)
				if r.Late.N != 4 {
					t.Errorf("rate %s: %d runs, want 4", r.LR, r.Late.N)
				}
				if len(r.Groups) != 2 || r.Groups[0].Group != "ip voting" || r.Groups[1].Group != "sp voting" {
					t.Errorf("rate %s: groups %+v, want ip voting and sp voting", r.LR, r.Groups)
				}
			}
			if !slices.Equal(lrs, tc.lrs) || !slices.Equal(late, tc.late) {
				t.Errorf("rates %v late %v, want %v %v", lrs, late, tc.lrs, tc.late)
			}
			if top := by[len(by)-1]; top.AnyAll.K != tc.anyTop {
				t.Errorf("any cliff at the top %d, want %d", top.AnyAll.K, tc.anyTop)
			}
			if trend.Hi != "0.004" || trend.Lo != "1e-3" || math.Abs(trend.P-tc.p) > 1e-12 || math.IsNaN(trend.Detectable) {
				t.Errorf("trend %+v, want 0.004 over 1e-3 with p %v", trend, tc.p)
			}
		})
	}
}
