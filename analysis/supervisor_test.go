package analysis

import (
	"fmt"
	"math"
	"testing"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// votingEpisode is one validation episode of voting: three candidates with
// their answers and grades, then the aggregator's pick.
func votingEpisode(problem string, answers []string, correct []bool, pick int, capped bool) []runlog.SampleRow {
	var rows []runlog.SampleRow
	for i, a := range answers {
		rows = append(rows, runlog.SampleRow{Step: 0, Workflow: study.Voting, Split: "val", ProblemID: problem, Agent: fmt.Sprintf("generator%d", i),
			Role: study.Generator, Parsed: a, Correct: correct[i], Compliant: true, Finish: "stop"})
	}
	fin := "stop"
	if capped {
		fin = "length"
	}
	rows = append(rows, runlog.SampleRow{Step: 0, Workflow: study.Voting, Split: "val", ProblemID: problem, Agent: study.Aggregator,
		Role: study.Aggregator, Parsed: fmt.Sprint(pick), Correct: correct[pick-1], Compliant: true, Finish: fin},
		runlog.SampleRow{Step: 0, Workflow: study.Voting, Split: "val", ProblemID: problem, Agent: "final", Role: "final", Correct: correct[pick-1]})
	return rows
}

func TestSupervisorValue(t *testing.T) {
	tt, ff := true, false
	run := func(pickRight bool) *runlog.Run {
		r := &runlog.Run{}
		for p := 0; p < 8; p++ {
			// candidate 1 wrong, candidates 2 and 3 agree and are right in
			// even problems; all wrong in odd ones
			ans, cor := []string{"1", "2", "2"}, []bool{ff, tt, tt}
			if p%2 == 1 {
				cor = []bool{ff, ff, ff}
			}
			pick := 1
			if pickRight {
				pick = 2
			}
			r.Samples = append(r.Samples, votingEpisode(fmt.Sprintf("p%d", p), ans, cor, pick, p == 0)...)
		}
		return r
	}
	w := WorkflowSteps(run(true), study.Voting)
	if len(w) != 1 {
		t.Fatalf("%d validations, want 1", len(w))
	}
	a := SupervisorAtStep(w[0])
	// 4 of 8 problems have right candidates 2 and 3: supervisor (picks 2)
	// 0.5, candidate 1 0, random 2/3 of 0.5, majority ("2") 0.5, oracle 0.5
	for _, x := range []struct {
		name      string
		got, want float64
	}{{"supervisor", a.Sup, 0.5}, {"candidate 1", a.First, 0}, {"random", a.Random, 1.0 / 3}, {"majority", a.Majority, 0.5}, {"oracle", a.Oracle, 0.5},
		{"aggregator at the cap", a.Capped[study.Aggregator], 1.0 / 8}, {"generators at the cap", a.Capped[study.Generator], 0}} {
		if math.Abs(x.got-x.want) > 1e-12 {
			t.Errorf("%s %v, want %v", x.name, x.got, x.want)
		}
	}
	cell := CellKey{Workflow: study.Voting, Task: "t", Scale: "s"}
	for _, tc := range []struct {
		pickRight, adds bool
	}{{true, true}, {false, false}} {
		st := &Study{Params: DefaultParams(), Cells: []*CellResult{{Key: cell}}}
		for i := 0; i < 3; i++ {
			st.Runs = append(st.Runs, &RunResult{Cell: cell, Workflow: WorkflowSteps(run(tc.pickRight), study.Voting)})
		}
		vs := SupervisorValues(st)
		if len(vs) != 1 || vs[0].Runs != 3 || vs[0].Episodes != 24 || !vs[0].Measured || vs[0].Adds != tc.adds || vs[0].Problems != 8 {
			t.Errorf("pick right %v: %+v, want one measured cell of 3 runs, 24 episodes, 8 problems, adds %v", tc.pickRight, vs, tc.adds)
		}
	}
	// nothing to choose: no candidate right, the value is not measured
	r := &runlog.Run{}
	for p := 0; p < 4; p++ {
		r.Samples = append(r.Samples, votingEpisode(fmt.Sprintf("p%d", p), []string{"1", "2", "3"}, []bool{ff, ff, ff}, 1, false)...)
	}
	st := &Study{Params: DefaultParams(), Cells: []*CellResult{{Key: cell}}, Runs: []*RunResult{{Cell: cell, Workflow: WorkflowSteps(r, study.Voting)}}}
	if vs := SupervisorValues(st); len(vs) != 1 || vs[0].Measured || len(valuedCells(vs)) != 0 {
		t.Errorf("no candidate right: %+v, want not measured and no cell gated", vs)
	}
}

// TestSupervisorValueOf checks that one validation's value is the value
// SupervisorValues gives a cell of that one run, and the evaluator's rates.
func TestSupervisorValueOf(t *testing.T) {
	r := &runlog.Run{}
	for p := 0; p < 8; p++ {
		r.Samples = append(r.Samples, votingEpisode(fmt.Sprintf("p%d", p), []string{"1", "2", "2"}, []bool{false, p%2 == 0, p%2 == 0}, 2, false)...)
	}
	w := WorkflowSteps(r, study.Voting)
	cell := CellKey{Workflow: study.Voting, Task: "t", Scale: "s"}
	st := &Study{Params: DefaultParams(), Cells: []*CellResult{{Key: cell}}, Runs: []*RunResult{{Cell: cell, Workflow: w}}}
	want := SupervisorValues(st)[0]
	want.Cell = CellKey{}
	got := SupervisorValueOf(study.Aggregator, w[0], st.Params.CI)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("SupervisorValueOf = %+v, want %+v", got, want)
	}
	ev := SupervisorValue{Role: study.Evaluator, TrueAccepts: 30, FalseRejects: 10, FalseAccepts: 5, TrueRejects: 15}
	if ev.TrueAcceptRate() != 0.75 || ev.FalseAcceptRate() != 0.25 {
		t.Fatalf("true/false-accept rates %v, %v; want 0.75, 0.25", ev.TrueAcceptRate(), ev.FalseAcceptRate())
	}
	if !math.IsNaN((SupervisorValue{}).TrueAcceptRate()) {
		t.Fatal("true-accept rate without verdicts is not NaN")
	}
}

func TestWilson(t *testing.T) {
	for _, tc := range []struct {
		k, n   int
		lo, hi float64
	}{
		{40, 50, 0.669629, 0.887562},
		{5, 50, 0.043476, 0.213602},
		{0, 10, 0, 0.277533},
		{10, 10, 0.722467, 1},
		{0, 0, 0, 1},
	} {
		lo, hi := Wilson(tc.k, tc.n, 0.95)
		if math.Abs(lo-tc.lo) > 1e-6 || math.Abs(hi-tc.hi) > 1e-6 {
			t.Errorf("Wilson(%d, %d) = [%.6f, %.6f], want [%.6f, %.6f]", tc.k, tc.n, lo, hi, tc.lo, tc.hi)
		}
	}
}
