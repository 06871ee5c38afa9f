package main

import (
	"fmt"
	"os"
	"time"

	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/slurm"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/spf13/cobra"
)

// newSlurmCmd is `marlow slurm`: submit an experiment as a Slurm job array.
func newSlurmCmd() *cobra.Command {
	var (
		opt    slurm.Options
		dryRun bool
		wait   bool
		poll   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "slurm SPEC",
		Short: "Submit the runs of an experiment to Slurm as a job array, with a report job after it",
		Long: `slurm plans SPEC as marlow run does (same --only selection, same refusal of
a dirty tree without --allow-dirty and of run folders holding another
config), leaves out the runs already done with the same config, and submits
one job-array task per remaining run with sbatch --parsable. Each task runs
'marlow run SPEC --only <run-id>' with the absolute --runs root, so the
runs root must be on a filesystem shared by the nodes.

The batch scripts and the array index -> run id map (submit-NNN.runs) are
written under <runs>/<experiment>/slurm/; each run folder is created before
submission with its job log, job.log, which Slurm appends the task's output
to. Tasks are submitted with --requeue and --open-mode=append: a requeued or
preempted task reruns its script and the run resumes from its checkpoint.
USR1 arrives --warn before the time limit; the task then has marlow finish
the current step, commit it and stop (the run is interrupted; submit again
to continue it). A report job (--dependency=afterany on the array) runs
'marlow report SPEC --partial' into --report-out: it reports the runs that
finished and lists the others.

--dry-run prints the scripts and submits nothing. --wait blocks until both
jobs have left the queue and exits non-zero if a run is not done or the
report job did not complete. 'marlow status SPEC' shows each run's Slurm
state next to its manifest state.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !dryRun {
				if _, err := slurm.LookSbatch(); err != nil {
					return err
				}
			}
			s, err := spec.Load(args[0])
			if err != nil {
				return err
			}
			if opt.Runner.Engines, err = newEngines(); err != nil {
				return err
			}
			if opt.Warn <= 0 {
				opt.Warn = -1 // no warning signal
			}
			if opt.Marlow, err = os.Executable(); err != nil {
				return fmt.Errorf("slurm: the marlow binary: %w", err)
			}
			b, err := slurm.Plan(cmd.Context(), s, opt)
			if err != nil {
				return err
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if len(b.Done) > 0 {
				fmt.Fprintf(errOut, "marlow slurm: %d runs already done with the same config are left out\n", len(b.Done))
			}
			if len(b.Tasks) == 0 {
				fmt.Fprintf(out, "experiment %s: every selected run is done; nothing to submit\n", s.Experiment)
				return nil
			}
			if dryRun {
				fmt.Fprintf(out, "# %s\n%s\n# %s (submitted with --dependency=afterany:<array job id>)\n%s",
					b.ScriptPath(), b.Script.Text(), b.ReportPath(), b.Report.Text())
				return nil
			}
			rec, err := b.Submit(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "experiment %s: %d runs submitted as array job %s (%s; index map %s)\n",
				s.Experiment, len(b.Tasks), rec.ArrayJob, b.ScriptPath(), b.MapPath())
			fmt.Fprintf(out, "report job %s runs after the array (afterany) and writes %s\n", rec.ReportJob, b.Report.Out)
			fmt.Fprintf(out, "watch: marlow status %s --runs %s   (or squeue -j %s,%s); each run's output: <run folder>/job.log\n",
				args[0], opt.Runner.RunsDir, rec.ArrayJob, rec.ReportJob)
			if !wait {
				return nil
			}
			return waitSubmission(cmd, s, opt, b, rec, poll)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opt.Runner.RunsDir, "runs", runner.DefaultRunsDir, "root folder of run folders, on a filesystem the nodes share")
	f.StringVar(&opt.Runner.Only, "only", "", "submit only the runs whose id matches this glob")
	f.BoolVar(&opt.Runner.AllowDirty, "allow-dirty", false, "accept uncommitted changes (recorded in each manifest)")
	f.BoolVar(&opt.Runner.UnsafeCodeExec, "unsafe-code-exec", false, "run generated code without network isolation when the sandbox cannot isolate it")
	f.StringVar(&opt.Partition, "partition", "", "sbatch --partition")
	f.StringVar(&opt.Account, "account", "", "sbatch --account")
	f.StringVar(&opt.QOS, "qos", "", "sbatch --qos")
	f.StringVar(&opt.Time, "time", "", "time limit of each task, D-HH:MM:SS (sbatch --time)")
	f.StringVar(&opt.Gres, "gres", "", "generic resources of each task, e.g. gpu:1 (sbatch --gres)")
	f.IntVar(&opt.CPUsPerTask, "cpus-per-task", 1, "cores of each task; also its engine threads")
	f.StringVar(&opt.Mem, "mem", "", "memory of each task, e.g. 4G (sbatch --mem)")
	f.IntVar(&opt.MaxParallel, "max-parallel", 0, "at most this many tasks at once (the array's %K throttle; 0: no limit)")
	f.StringArrayVar(&opt.SbatchArgs, "sbatch-arg", nil, "one more sbatch option for both jobs, e.g. --sbatch-arg=--constraint=a100 (repeatable)")
	f.DurationVar(&opt.Warn, "warn", slurm.DefaultWarn, "how long before the time limit a task commits its current step and stops (at most half of --time; 0: no warning)")
	f.StringVar(&opt.ReportOut, "report-out", "", "folder the report job writes (default reports/<experiment> in this directory)")
	f.BoolVar(&dryRun, "dry-run", false, "print the batch scripts and submit nothing")
	f.BoolVar(&wait, "wait", false, "block until the array and the report job end; exit non-zero if a run is not done")
	f.DurationVar(&poll, "poll", 10*time.Second, "how often --wait reads the queue")
	return cmd
}

// waitSubmission blocks until both jobs leave the queue, printing the
// array's progress, then prints how the submission ended and fails unless
// every submitted run is done and the report job completed.
func waitSubmission(cmd *cobra.Command, s *spec.Spec, opt slurm.Options, b *slurm.Batch, rec *slurm.Record, poll time.Duration) error {
	errOut := cmd.ErrOrStderr()
	last := ""
	err := slurm.Wait(cmd.Context(), rec, poll, func(jobs []slurm.Job) {
		line := slurm.Progress(jobs, rec.ArrayJob)
		if line != last && line != "" {
			fmt.Fprintf(errOut, "marlow slurm: array %s: %s\n", rec.ArrayJob, line)
		}
		last = line
	})
	if err != nil {
		return err
	}
	o, reportErr, err := slurm.Ended(cmd.Context(), s, opt.Runner.Only, b, rec)
	if err != nil {
		return err
	}
	if reportErr != nil {
		fmt.Fprintf(errOut, "marlow slurm: %v\n", reportErr)
	}
	fmt.Fprintln(cmd.OutOrStdout(), o)
	if err := o.Err(); err != nil {
		return &exitError{code: 1, err: err}
	}
	return nil
}
