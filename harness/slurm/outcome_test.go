package slurm

import (
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/runner"
)

func TestProgress(t *testing.T) {
	jobs := []Job{
		{ArrayJob: "12", Task: "0", State: "RUNNING"}, {ArrayJob: "12", Task: "1", State: "PENDING"},
		{ArrayJob: "12", Task: "2", State: "PENDING"}, {ArrayJob: "12", Task: "3", State: "COMPLETING"},
		{ArrayJob: "12", Task: "4", State: "PENDING", Restarts: 1}, {ArrayJob: "13", State: "PENDING"},
		{ArrayJob: "9", Task: "0", State: "RUNNING"},
	}
	for _, tc := range []struct {
		array, want string
	}{
		{"12", "pending 2, running 1, requeued 1, completing 1"}, // a requeued task counts whatever its restarts
		{"13", "pending 1"},
		{"14", ""},
	} {
		if got := Progress(jobs, tc.array); got != tc.want {
			t.Errorf("Progress(array %s) = %q, want %q", tc.array, got, tc.want)
		}
	}
	if got := Progress([]Job{{ArrayJob: "5", Task: "0", State: "REQUEUED"}}, "5"); got != "requeued 1" {
		t.Errorf("requeued task: %q", got)
	}
}

func TestOutcome(t *testing.T) {
	b := &Batch{Tasks: []Task{{Index: 0, ID: "a"}, {Index: 1, ID: "b"}, {Index: 2, ID: "c"}},
		Report: ReportScript{Output: "/runs/x/slurm/submit-001-report.out"}}
	rec := &Record{ArrayJob: "12", ReportJob: "13"}
	done := func(ids ...string) []runner.RunStatus {
		var out []runner.RunStatus
		for _, id := range ids {
			out = append(out, runner.RunStatus{ID: id, State: runner.StateDone})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		sts     []runner.RunStatus
		report  string
		summary string
		err     string
	}{
		{"all done", append(done("a", "b", "c"), runner.RunStatus{ID: "other", State: "failed"}), "COMPLETED",
			"array 12 ended: 3 of 3 runs done; report job 13: completed", ""},
		{"report forgotten", done("a", "b", "c"), "",
			"array 12 ended: 3 of 3 runs done; report job 13: unknown (no longer known to slurmctld)", ""},
		{"runs not done", append(done("b"), runner.RunStatus{ID: "a", State: "interrupted"}), "COMPLETED",
			"array 12 ended: 1 of 3 runs done; report job 13: completed",
			"slurm: 2 runs did not finish: a (interrupted), c (pending) (see each run's job.log; marlow slurm again resubmits them)"},
		{"report failed", done("a", "b", "c"), "FAILED",
			"array 12 ended: 3 of 3 runs done; report job 13: failed",
			"slurm: report job 13 ended FAILED (see /runs/x/slurm/submit-001-report.out)"},
	} {
		o := outcomeOf(b, rec, tc.sts, tc.report)
		if got := o.String(); got != tc.summary {
			t.Errorf("%s: summary %q, want %q", tc.name, got, tc.summary)
		}
		err := o.Err()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
}
