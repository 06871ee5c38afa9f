package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/spf13/cobra"
)

func newArchiveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "archive RUNS_DIR OUT.tar.zst",
		Short: "Pack the run logs of a runs tree into a deterministic .tar.zst archive",
		Long: "archive packs the manifest and committed Parquet segments of every run under RUNS_DIR\n" +
			"into OUT.tar.zst, with sorted entries and fixed times and modes, so the same runs give the\n" +
			"same bytes. Checkpoints and uncommitted files are left out. The readers, marlow check and\n" +
			"marlow report accept the archive in place of the folder.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			runs, out := args[0], args[1]
			if !strings.HasSuffix(out, ".tar.zst") {
				return fmt.Errorf("archive: output %q must end in .tar.zst", out)
			}
			if err := runlog.Archive(runs, out); err != nil {
				return err
			}
			st, err := os.Stat(out)
			if err != nil {
				return fmt.Errorf("archive: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d bytes)\n", out, st.Size())
			return nil
		},
	}
}
