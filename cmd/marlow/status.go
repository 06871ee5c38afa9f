package main

import (
	"fmt"
	"path/filepath"

	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/slurm"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/spf13/cobra"
)

func newStatusCmd() *cobra.Command {
	var runsDir, only string
	cmd := &cobra.Command{
		Use:   "status SPEC",
		Short: "Show the state and last committed step of each run of an experiment",
		Long: `status reads the manifests under <runs>/<experiment>/ and prints one line per
planned run: pending (no folder yet), running (a process holds it), done,
failed (with its error), interrupted, crashed (the manifest says running but
no process holds it; run again to resume), stale (the folder holds another
config) or corrupt (the manifest cannot be read). It changes nothing.

When the experiment was submitted with marlow slurm and squeue is on PATH,
a SLURM column shows each queued run's array task state (pending, running,
requeued, ...), read from squeue alone (no accounting database).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := spec.Load(args[0])
			if err != nil {
				return err
			}
			sts, err := runner.Status(s, runsDir, only)
			if err != nil {
				return err
			}
			if err := addSlurmStates(cmd, sts, filepath.Join(runsDir, s.Experiment)); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "marlow status: Slurm state not shown: %v\n", err)
			}
			return runner.WriteStatus(cmd.OutOrStdout(), sts)
		},
	}
	cmd.Flags().StringVar(&runsDir, "runs", runner.DefaultRunsDir, "root folder of run folders")
	cmd.Flags().StringVar(&only, "only", "", "show only the runs whose id matches this glob")
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
