package main

import (
	"fmt"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/spf13/cobra"
)

func newCheckCmd() *cobra.Command {
	var runsDir, only string
	cmd := &cobra.Command{
		Use:   "check " + sourceArg,
		Short: "List every problem in the run logs of a spec, a runs tree, a run folder or a .tar.zst archive",
		Long: "check reads every run of the source (a spec's runs under <runs>/<experiment>, a runs tree,\n" +
			"one run folder, or an archive written by marlow archive; --only keeps the runs whose id\n" +
			"matches a glob) and prints one line per problem: the file, then what is wrong with it\n" +
			"(missing manifest, damaged manifest (its config does not hash to its config_hash), truncated\n" +
			"or corrupt Parquet, foreign schema or version, misplaced or duplicate rows, and segments and\n" +
			"checkpoint files that are missing, unlisted, resized or altered against the SHA-256\n" +
			"inventory of the manifest), then how many runs it read. It exits with status 1 when it\n" +
			"finds any problem.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src := args[0]
			if runner.IsSpec(src) {
				dir, _, err := runner.Source(src, runsDir)
				if err != nil {
					return &exitError{code: 1, err: err}
				}
				src = dir
			}
			keep, err := runner.RunFilter(only)
			if err != nil {
				return err
			}
			probs, n := runlog.CheckRuns(src, runlog.CheckOptions{ConfigHash: spec.StoredConfigHash, Keep: keep})
			for _, p := range probs {
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			if n == 0 && only != "" && len(probs) == 0 {
				return &exitError{code: 1, err: fmt.Errorf("check %s: no run matches --only %q", src, only)}
			}
			if len(probs) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("check %s: %d problem(s) in %s", src, len(probs), runsRead(n))}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "check %s: %s, no problems\n", src, runsRead(n))
			return nil
		},
	}
	addRunsFlags(cmd, &runsDir, &only)
	return cmd
}

// runsRead says how many runs a command read.
func runsRead(n int) string {
	if n == 1 {
		return "1 run read"
	}
	return fmt.Sprintf("%d runs read", n)
}
