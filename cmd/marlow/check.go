package main

import (
	"fmt"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/spf13/cobra"
)

func newCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check RUNS_DIR",
		Short: "List every problem in the run logs of a runs tree, a run folder or a .tar.zst archive",
		Long: "check reads every run under RUNS_DIR (a runs tree, one run folder, or an archive written by\n" +
			"marlow archive) and prints one line per problem: the file, then what is wrong with it\n" +
			"(missing manifest, damaged manifest (its config does not hash to its config_hash), truncated\n" +
			"or corrupt Parquet, foreign schema or version, misplaced or duplicate rows, and segments and\n" +
			"checkpoint files that are missing, unlisted, resized or altered against the SHA-256\n" +
			"inventory of the manifest). It exits with status 1 when it finds any problem.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			probs := runlog.CheckWith(args[0], runlog.CheckOptions{ConfigHash: spec.StoredConfigHash})
			for _, p := range probs {
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			if len(probs) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("check %s: %d problem(s)", args[0], len(probs))}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "check %s: no problems\n", args[0])
			return nil
		},
	}
}
