// Command marlow is the one CLI of the marlow research harness: plan, run,
// status, data, pretrain, analyze, report, diff, archive, check, slurm,
// bench, engine-check and version. Each subcommand is built by a
// constructor in its own file, with its flags in the closure's variables;
// the logic lives in the harness, analysis, reports and datasets packages,
// and cmd only wires them.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// newRootCmd builds the command tree.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "marlow",
		Short:         "marlow: when does multi-agent RL improve an LLM workflow, and how does it fail?",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newPlanCmd(), newRunCmd(), newStatusCmd(), newDataCmd(), newPretrainCmd(), newAnalyzeCmd(), newReportCmd(),
		newDiffCmd(), newArchiveCmd(), newCheckCmd(), newSlurmCmd(), newBenchCmd(), newEngineCheckCmd(), newVersionCmd())
	return root
}

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "marlow:", err)
		os.Exit(exitCode(err))
	}
}

// exitError carries a specific exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	if e, ok := err.(*exitError); ok {
		return e.code
	}
	return 1
}
