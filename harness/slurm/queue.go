package slurm

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Job is one line of the queue: an array task or a plain job.
type Job struct {
	ArrayJob string // the array's job id (the job id for a plain job)
	Task     string // the array index ("" for a plain job)
	State    string // Slurm's state: PENDING, RUNNING, COMPLETING, ...
	Restarts int    // times the job was requeued
	Reason   string
}

// Label is the state shown next to a run's manifest state: pending,
// running, requeued (pending again after a requeue or preemption),
// completing, and Slurm's other states in lower case; the restart count
// follows when the task was requeued.
func (j Job) Label() string {
	st := strings.ToLower(j.State)
	switch {
	case j.State == "PENDING" && j.Restarts > 0, strings.HasPrefix(j.State, "REQUEUE"):
		st = "requeued"
	}
	if j.Restarts > 0 {
		st += fmt.Sprintf(" (restart %d)", j.Restarts)
	}
	return st
}

// queueFormat is squeue's --Format: one field per column, '|' separated.
const queueFormat = "ArrayJobID:0|,ArrayTaskID:0|,State:0|,RestartCnt:0|,Reason:0|"

// Available reports whether squeue is on PATH.
func Available() bool {
	_, err := exec.LookPath("squeue")
	return err == nil
}

// Queue lists every job in the queue, one line per array task (squeue
// --array), without the accounting database.
func Queue(ctx context.Context) ([]Job, error) {
	out, err := command(ctx, "squeue", "--noheader", "--all", "--array", "--Format="+queueFormat)
	if err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	return parseQueue(out)
}

// parseQueue reads squeue's output in queueFormat.
func parseQueue(out string) ([]Job, error) {
	var jobs []Job
	for n, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) < 5 {
			return nil, fmt.Errorf("slurm: squeue line %d: %q has %d fields, want 5", n+1, line, len(f))
		}
		j := Job{ArrayJob: strings.TrimSpace(f[0]), Task: strings.TrimSpace(f[1]), State: strings.TrimSpace(f[2]), Reason: strings.TrimSpace(f[4])}
		if j.Task == "N/A" {
			j.Task = ""
		}
		if r := strings.TrimSpace(f[3]); r != "" && r != "N/A" {
			k, err := strconv.Atoi(r)
			if err != nil {
				return nil, fmt.Errorf("slurm: squeue line %d: restart count %q: %w", n+1, r, err)
			}
			j.Restarts = k
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// RunStates maps run ids to the queue state of their array task, for the
// runs of the given submissions that are in the queue. A run submitted
// more than once takes the state of its latest submission in the queue.
func RunStates(recs []Record, jobs []Job) map[string]Job {
	byArray := map[string]map[string]Job{}
	for _, j := range jobs {
		if byArray[j.ArrayJob] == nil {
			byArray[j.ArrayJob] = map[string]Job{}
		}
		byArray[j.ArrayJob][j.Task] = j
	}
	out := map[string]Job{}
	for _, r := range recs {
		tasks := byArray[r.ArrayJob]
		for i, id := range r.Runs {
			if j, ok := tasks[strconv.Itoa(i)]; ok {
				out[id] = j
			}
		}
	}
	return out
}

// Wait polls the queue every interval until neither the array nor the
// report job of rec is in it, calling tick (if not nil) with the jobs of
// the submission after each poll.
func Wait(ctx context.Context, rec *Record, interval time.Duration, tick func([]Job)) error {
	for {
		jobs, err := Queue(ctx)
		if err != nil {
			return err
		}
		var mine []Job
		for _, j := range jobs {
			if j.ArrayJob == rec.ArrayJob || j.ArrayJob == rec.ReportJob {
				mine = append(mine, j)
			}
		}
		if tick != nil {
			tick(mine)
		}
		if len(mine) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("slurm: waiting for jobs %s and %s: %w", rec.ArrayJob, rec.ReportJob, context.Cause(ctx))
		case <-time.After(interval):
		}
	}
}

// JobState asks scontrol for the final state of a job that has left the
// queue (COMPLETED, FAILED, ...); slurmctld keeps ended jobs for MinJobAge
// (300 s by default), so "" with no error means it no longer knows it.
func JobState(ctx context.Context, id string) (string, error) {
	out, err := command(ctx, "scontrol", "--oneliner", "show", "job", id)
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") {
			return "", nil
		}
		return "", fmt.Errorf("slurm: %w", err)
	}
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "JobState="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("slurm: scontrol show job %s printed no JobState", id)
}
