package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/runner"
	"github.com/spf13/cobra"
)

func newArchiveCmd() *cobra.Command {
	var runsDir, only string
	cmd := &cobra.Command{
		Use:   "archive SPEC|RUNS_DIR OUT.tar.zst",
		Short: "Pack the run logs of a spec or a runs tree into a deterministic .tar.zst archive",
		Long: "archive packs the manifest and committed Parquet segments of every run of the source (a\n" +
			"spec's runs under <runs>/<experiment>, or a runs folder; --only keeps the runs whose id\n" +
			"matches a glob) into OUT.tar.zst, with sorted entries and fixed times and modes, so the same\n" +
			"runs give the same bytes. Checkpoints and uncommitted files are left out. The readers,\n" +
			"marlow status, check, analyze and report accept the archive in place of the folder.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := args[1]
			if !strings.HasSuffix(out, ".tar.zst") {
				return fmt.Errorf("archive: output %q must end in .tar.zst", out)
			}
			src, _, err := runner.Source(args[0], runsDir)
			if err != nil {
				return err
			}
			keep, err := runner.RunFilter(only)
			if err != nil {
				return err
			}
			n, err := runlog.ArchiveRuns(src, out, keep)
			if err != nil {
				return err
			}
			st, err := os.Stat(out)
			if err != nil {
				return fmt.Errorf("archive: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d runs, %d bytes)\n", out, n, st.Size())
			return nil
		},
	}
	addRunsFlags(cmd, &runsDir, &only)
	return cmd
}
