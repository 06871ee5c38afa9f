// Command marlow is the one CLI of the marlow research harness: plan, run,
// status, pretrain, analyze, report, diff, slurm and bench. Subcommands live
// one per file and register themselves on rootCmd; their logic lives in the
// harness, analysis and reports packages.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:           "marlow",
	Short:         "marlow: when does multi-agent RL improve an LLM workflow, and how does it fail?",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	if err := rootCmd.Execute(); err != nil {
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
