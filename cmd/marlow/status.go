package main

import (
	"fmt"
	"os"

	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/slurm"
	"github.com/spf13/cobra"
)

func newStatusCmd() *cobra.Command {
	var (
		runsDir, only string
		asJSON        bool
	)
	cmd := &cobra.Command{
		Use:   "status " + sourceArg,
		Short: "Show the state and last committed step of each run of an experiment",
		Long: `status prints one line per run and the counts per state. Given a spec it reads
the manifests under <runs>/<experiment>/ and lists every planned run: pending
(no folder yet), running (a process holds it), done, failed (with its error),
interrupted, crashed (the manifest says running but no process holds it; run
again to resume), stale (the folder holds another config) or corrupt (the
manifest cannot be read). Given a runs folder or an archive it lists the runs
found there, from their manifests alone (no plan, so none is pending or
stale). --json prints the runs and counts as JSON. It changes nothing.

When the experiment was submitted with marlow slurm and squeue is on PATH,
a SLURM column (a "slurm" field in JSON) shows each queued run's array task
state (pending, running, requeued, ...), read from squeue alone (no
accounting database).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, s, err := runner.SourceOrPlan(args[0], runsDir)
			if err != nil {
				return err
			}
			var sts []runner.RunStatus
			if s != nil {
				sts, err = runner.Status(s, runsDir, only)
			} else {
				sts, err = runner.StatusOfLogs(src, only)
			}
			if err != nil {
				return err
			}
			if st, err := os.Stat(src); err == nil && st.IsDir() {
				if err := addSlurmStates(cmd, sts, src); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "marlow status: Slurm state not shown: %v\n", err)
				}
			}
			if asJSON {
				return runner.WriteStatusJSON(cmd.OutOrStdout(), sts)
			}
			return runner.WriteStatus(cmd.OutOrStdout(), sts)
		},
	}
	addRunsFlags(cmd, &runsDir, &only)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the runs and the counts per state as JSON")
	return cmd
}

// addSlurmStates fills in the Slurm state of the runs of an experiment
// submitted with marlow slurm, when squeue is available.
func addSlurmStates(cmd *cobra.Command, sts []runner.RunStatus, root string) error {
	recs, err := slurm.Records(root)
	if err != nil || len(recs) == 0 || !slurm.Available() {
		return err
	}
	jobs, err := slurm.Queue(cmd.Context())
	if err != nil {
		return err
	}
	states := slurm.RunStates(recs, jobs)
	for i := range sts {
		if j, ok := states[sts[i].ID]; ok {
			sts[i].Slurm = j.Label()
		}
	}
	return nil
}
