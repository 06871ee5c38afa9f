package slurm

import (
	"context"
	"fmt"
	"strings"

	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/spec"
)

// progressLabels are the queue states Progress counts, in its order.
var progressLabels = []string{"pending", "running", "requeued", "completing"}

// Progress summarises the tasks of array job arrayJob among jobs by queue
// state (their Label without the restart count), e.g. "pending 3,
// running 2"; "" when none of them is in the queue.
func Progress(jobs []Job, arrayJob string) string {
	counts := map[string]int{}
	for _, j := range jobs {
		if j.ArrayJob == arrayJob {
			label, _, _ := strings.Cut(j.Label(), " (restart")
			counts[label]++
		}
	}
	var parts []string
	for _, k := range progressLabels {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// Outcome is how a submission ended, read once its jobs have left the
// queue.
type Outcome struct {
	ArrayJob, ReportJob string
	// Tasks is the number of runs submitted.
	Tasks int
	// NotDone are the submitted runs whose manifest does not say done, as
	// "run-id (state)", in plan order.
	NotDone []string
	// ReportState is the report job's final state (COMPLETED, FAILED,
	// ...); "" when slurmctld no longer knows the job.
	ReportState string
	// ReportOutput is the report job's output file.
	ReportOutput string
}

// Ended reads how the submission b (submitted as rec) of spec s ended: the
// state of every submitted run, from its run folder under the batch's runs
// root, and the report job's final state. Call it after Wait. A failure to
// ask for the report job's state is returned as reportErr and leaves
// ReportState "", since the runs' states are still known; err is a failure
// to read the runs.
func Ended(ctx context.Context, s *spec.Spec, only string, b *Batch, rec *Record) (o Outcome, reportErr, err error) {
	sts, err := runner.Status(s, b.Script.RunsRoot, only)
	if err != nil {
		return Outcome{}, nil, err
	}
	state, reportErr := JobState(ctx, rec.ReportJob)
	if reportErr != nil {
		reportErr = fmt.Errorf("report job %s: %w", rec.ReportJob, reportErr)
	}
	return outcomeOf(b, rec, sts, state), reportErr, nil
}

// outcomeOf is the outcome of b given the runs' statuses and the report
// job's final state.
func outcomeOf(b *Batch, rec *Record, sts []runner.RunStatus, reportState string) Outcome {
	o := Outcome{ArrayJob: rec.ArrayJob, ReportJob: rec.ReportJob, Tasks: len(b.Tasks),
		ReportState: reportState, ReportOutput: b.Report.Output}
	state := map[string]string{}
	for _, st := range sts {
		state[st.ID] = st.State
	}
	for _, t := range b.Tasks {
		st, ok := state[t.ID]
		if !ok {
			st = runner.StatePending
		}
		if st != runner.StateDone {
			o.NotDone = append(o.NotDone, t.ID+" ("+st+")")
		}
	}
	return o
}

// String is the one-line summary of the outcome, e.g. "array 12 ended: 3
// of 4 runs done; report job 13: completed".
func (o Outcome) String() string {
	report := strings.ToLower(o.ReportState)
	if report == "" {
		report = "unknown (no longer known to slurmctld)"
	}
	return fmt.Sprintf("array %s ended: %d of %d runs done; report job %s: %s",
		o.ArrayJob, o.Tasks-len(o.NotDone), o.Tasks, o.ReportJob, report)
}

// Err is nil when every submitted run is done and the report job completed
// (or is no longer known); otherwise it names the runs that did not finish
// and what to do, or the report job's state and its output.
func (o Outcome) Err() error {
	if len(o.NotDone) > 0 {
		return fmt.Errorf("slurm: %d runs did not finish: %s (see each run's job.log; marlow slurm again resubmits them)",
			len(o.NotDone), strings.Join(o.NotDone, ", "))
	}
	if o.ReportState != "" && o.ReportState != "COMPLETED" {
		return fmt.Errorf("slurm: report job %s ended %s (see %s)", o.ReportJob, o.ReportState, o.ReportOutput)
	}
	return nil
}
