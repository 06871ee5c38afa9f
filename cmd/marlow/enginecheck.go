package main

import (
	"fmt"
	"strings"

	"github.com/marlowlab/marlow/harness/engine/enginecheck"
	"github.com/marlowlab/marlow/harness/engine/torch"
	"github.com/spf13/cobra"
)

func newEngineCheckCmd() *cobra.Command {
	var name, device, dtype, python string
	var tolLP, tolStep float64
	var threads int
	cmd := &cobra.Command{
		Use:   "engine-check CHECKPOINT",
		Short: "Cross-check the torch engine against the native engine on one checkpoint",
		Long: "engine-check scores a fixed set of token sequences with the native engine and the torch\n" +
			"engine (fp32 by default) over the Hugging Face checkpoint folder CHECKPOINT, with no adapter\n" +
			"and with a seeded random non-zero LoRA adapter; takes one identical GRPO train step in both;\n" +
			"and loads each engine's saved checkpoint into the other. It prints the largest absolute\n" +
			"difference of per-token log-probs and the relative differences of the step's loss, KL and\n" +
			"per-role gradient norms, and exits with status 1 when any exceeds its tolerance\n" +
			"(defaults: 1e-4 absolute for log-probs, 1e-3 relative for the step, as CI checks on the CPU).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name != "torch" {
				return fmt.Errorf("engine-check: --engine %q: only torch is checked against native", name)
			}
			threads := resolveThreads(threads, 2) // the two engines share the cores
			opt := enginecheck.Options{LogProbTol: tolLP, StepTol: tolStep, Threads: threads,
				Torch: torch.Options{Python: python, Device: device, DType: dtype, Threads: threads}}
			rep, err := enginecheck.Run(cmd.Context(), args[0], opt)
			if err != nil {
				return fmt.Errorf("engine-check %s: %w", args[0], err)
			}
			rep.Print(cmd.OutOrStdout())
			if f := rep.Failures(); len(f) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("engine-check %s: beyond tolerance:\n  %s", args[0], strings.Join(f, "\n  "))}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "engine-check: within tolerance")
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "engine", "torch", "engine checked against native (torch)")
	cmd.Flags().StringVar(&device, "device", "cpu", "torch device: cpu, cuda or auto")
	cmd.Flags().StringVar(&dtype, "dtype", "float32", "torch dtype (the tolerances assume float32)")
	cmd.Flags().StringVar(&python, "python", "", "interpreter of the torch server (default $MARLOW_PYTHON, else python3)")
	cmd.Flags().Float64Var(&tolLP, "tol-logprob", enginecheck.DefaultLogProbTol, "largest absolute log-prob difference accepted")
	cmd.Flags().Float64Var(&tolStep, "tol-step", enginecheck.DefaultStepTol, "largest relative difference of loss, KL and gradient norms accepted")
	addThreadsFlag(cmd, &threads, "CPU threads of each of the two engines")
	return cmd
}
