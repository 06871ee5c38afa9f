package main

import (
	"github.com/marlowlab/marlow/harness/runner"
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
config) or corrupt (the manifest cannot be read). It changes nothing.`,
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
			return runner.WriteStatus(cmd.OutOrStdout(), sts)
		},
	}
	cmd.Flags().StringVar(&runsDir, "runs", runner.DefaultRunsDir, "root folder of run folders")
	cmd.Flags().StringVar(&only, "only", "", "show only the runs whose id matches this glob")
	return cmd
}
