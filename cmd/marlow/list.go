package main

import (
	"errors"
	"fmt"
	"io/fs"
	"text/tabwriter"

	"github.com/marlowlab/marlow/harness/runner"
	"github.com/spf13/cobra"
)

func newListCmd() *cobra.Command {
	var runsDir string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the experiments under a runs root and the state of their runs",
		Long: `list prints one line per experiment folder under --runs (default runs): its
name, how many runs it holds, how many are in each state (done, running,
crashed, interrupted, failed, corrupt), and the latest manifest update. It
reads manifests only; marlow status SPEC shows one experiment run by run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			xs, err := runner.Experiments(runsDir)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("list: no runs folder %s (run an experiment with marlow run, or pass --runs)", runsDir)
			}
			if err != nil {
				return fmt.Errorf("list: %w", err)
			}
			out := cmd.OutOrStdout()
			if len(xs) == 0 {
				fmt.Fprintf(out, "no experiments under %s\n", runsDir)
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "EXPERIMENT\tRUNS\tSTATES\tUPDATED\tFOLDER")
			for _, x := range xs {
				upd := x.Updated
				if upd == "" {
					upd = "-"
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", x.Name, x.Runs, runner.CountsText(x.Counts), upd, x.Dir)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&runsDir, "runs", runner.DefaultRunsDir, "root folder of run folders")
	return cmd
}
