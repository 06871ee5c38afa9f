// Command marlow is the one CLI of the marlow research harness: plan, run,
// status, list, data, pretrain, analyze, report, diff, archive, check,
// samples, slurm, bench, engine-check, random-checkpoint, tensorboard, workflows and
// version. Each subcommand is built by a
// constructor in its own file, with its flags in the closure's variables;
// the logic lives in the harness, analysis (with analysis/report) and
// datasets packages, and cmd only wires them.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// stopProfile ends the CPU profile --cpuprofile started, if any; main calls
// it after the command returns, whatever it returned.
var stopProfile = func() error { return nil }

// newRootCmd builds the command tree.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "marlow",
		Short:         "marlow: when does multi-agent RL improve an LLM workflow, and how does it fail?",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var cpuProfile string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole command to this file (read it with go tool pprof)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("cpu profile %s: %w", cpuProfile, err)
		}
		stopProfile = func() error {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				return fmt.Errorf("cpu profile %s: %w", cpuProfile, err)
			}
			return nil
		}
		return nil
	}
	root.AddCommand(newPlanCmd(), newRunCmd(), newStatusCmd(), newListCmd(), newDataCmd(), newPretrainCmd(), newAnalyzeCmd(), newReportCmd(),
		newDiffCmd(), newArchiveCmd(), newCheckCmd(), newSamplesCmd(), newSlurmCmd(), newBenchCmd(), newEngineCheckCmd(), newRandomCheckpointCmd(), newVersionCmd(),
		newTensorboardCmd(), newWorkflowsCmd())
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return withUsage(cmd, err) })
	addUsageToArgErrors(root)
	return root
}

// withUsage adds a command's usage line to an error about its arguments
// or flags, since SilenceUsage keeps cobra from printing the usage.
func withUsage(cmd *cobra.Command, err error) error {
	return fmt.Errorf("%w\nusage: %s\n(see %s --help)", err, cmd.UseLine(), cmd.CommandPath())
}

// addUsageToArgErrors makes every command's argument check name the
// command's usage line when it fails.
func addUsageToArgErrors(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return withUsage(cmd, err)
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		addUsageToArgErrors(sub)
	}
}

func main() {
	err := newRootCmd().Execute()
	if perr := stopProfile(); perr != nil {
		fmt.Fprintln(os.Stderr, "marlow:", perr)
	}
	if err != nil {
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
