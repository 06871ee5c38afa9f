package main

import (
	"github.com/spf13/cobra"

	"github.com/marlowlab/marlow/analysis/rollouts"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/runner"
)

func newSamplesCmd() *cobra.Command {
	var (
		runsDir, only string
		f             rollouts.Filter
		opt           rollouts.PrintOptions
		asJSON        bool
	)
	cmd := &cobra.Command{
		Use:   "samples " + sourceArg,
		Short: "Print the logged rollouts of runs at a step, for a role, problem or rollout",
		Long: "samples prints the rollouts a run logged in samples/ (all validation rollouts at eval steps, a\n" +
			"subset of the training turns every step): each turn with its role, agent and policy, whether\n" +
			"its output parsed and which fallback the workflow took (logs of schema 2 on), its grade,\n" +
			"tokens and finish reason, the parsed output and the completion, then the episode's final answer\n" +
			"and reward. The filters combine; --step defaults to the last step with matching rows, --split\n" +
			"to val. --role keeps that role's turns only, e.g. what a collapsed aggregator wrote:\n" +
			"  marlow samples reports/mini/logs-seed1.tar.zst --only voting-ip-s-synth-code-seed1 --role aggregator --problem sc-val-0003",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, _, err := runner.Source(args[0], runsDir)
			if err != nil {
				return err
			}
			runs, err := runlog.ReadRuns(src)
			if err != nil {
				return err
			}
			f.Run = only
			rs, err := rollouts.Select(runs, f)
			if err != nil {
				return err
			}
			if asJSON {
				return rollouts.WriteJSON(cmd.OutOrStdout(), rs)
			}
			return rollouts.Print(cmd.OutOrStdout(), rs, opt)
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&f.Step, "step", rollouts.LastStep, "training step (validation: the step the policy had reached, 0 before training); -1: the last step with matching rows")
	fl.StringVar(&f.Split, "split", "val", "val or train; empty: both")
	fl.StringVar(&f.Workflow, "workflow", "", "workflow the rollouts ran in (an sa-rl run is validated in several)")
	fl.StringVar(&f.Role, "role", "", "print only this role's turns (generator, evaluator, aggregator, orchestrator, worker, synthesizer)")
	fl.StringVar(&f.Problem, "problem", "", "problem id (e.g. sc-val-0003)")
	fl.Int64Var(&f.Rollout, "rollout", rollouts.AnyRollout, "rollout index within the problem's group; -1: all")
	fl.BoolVar(&opt.Prompts, "prompts", false, "also print each turn's prompt")
	fl.IntVar(&opt.MaxChars, "max-chars", 0, "cut prompts and completions after this many characters (0: print them whole)")
	fl.BoolVar(&asJSON, "json", false, "print the rollouts as a JSON array (whole texts, prompts included)")
	addRunsFlags(cmd, &runsDir, &only)
	return cmd
}
