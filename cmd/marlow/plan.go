package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/marlowlab/marlow/harness/pin"
	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/spf13/cobra"
)

func newPlanCmd() *cobra.Command {
	var (
		asJSON, resolved, allowDirty, noEstimate bool
		only, runsDir, gpuCheck                  string
	)
	cmd := &cobra.Command{
		Use:   "plan SPEC",
		Short: "Validate an experiment file and list the runs it expands to",
		Long: `plan validates SPEC strictly and prints one line per run (id, condition,
workflow trained, workflows evaluated, task, scale, seed index, derived seed,
config hash, estimated files and bytes the run will write), the counts per
condition, the experiment's estimated footprint, and the pinned git commit;
then, per scale, whether its base model is committed (seeds/models), cached,
or will be pretrained by marlow run, and a rough time estimate of the runs on
this machine: each tiny model's engine is calibrated on its shape for about
a second, turns are taken as long as the pretraining teacher's, and runs
execute as marlow run's defaults run them (--no-estimate skips it). For
checkpoint models (the paper study) it states the GPU-hours per run and in
all (docs/gpu-cost.md): from the throughput marlow bench node measured when
--runs holds its file (saying on what GPU and when), else from the stated
model (saying so); with turn lengths from the finished base runs under
--runs when there are any, else a stated share of max_new_tokens; then the
disk the runs write, and first subsets to run with --only. A note names the workflow
settings (n_votes, max_subtasks) that give a tiny model's runs another base
model than the defaults, and --only warns when it keeps SP or IP runs
without their cell's SA-RL run.
With --resolved it prints the spec with every default filled in instead.

It opens every task whose data is here (synthetic tasks always are) and
fails, naming the task, when its validation split holds fewer problems than
eval.val_size, or its train split fewer than train_size (none at all for a
run that trains), or when a file task's problem holds a character a tiny
scale's tokenizer cannot encode, as marlow run's preflight does before any
pretraining.

It warns (on stderr; it still exits 0) when a run would write more than
50,000 files or 1 GiB, when the experiment would write more than 1,000,000
files or 10 GiB, and when a trained run has no learning signal (the role
writing the final answer may write fewer than 4 tokens). The estimates count
the committed Parquet segments (sized from measured bytes per row and per
file, erring on the large side), the manifest, the lock file and the one
checkpoint a run keeps (LoRA adapters with AdamW moments; unknown for a
checkpoint model whose config.json cannot be read).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := spec.Load(args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if resolved {
				b, err := s.ResolvedYAML()
				if err != nil {
					return err
				}
				_, err = out.Write(b)
				return err
			}
			planned, err := spec.Plan(s)
			if err != nil {
				return err
			}
			runs, err := runner.Select(planned, only)
			if err != nil {
				return fmt.Errorf("plan: %w", err)
			}
			if bad := runner.SplitProblems(runs, nil); len(bad) > 0 {
				return fmt.Errorf("plan: a task's data cannot give the runs their problems:\n  - %s", strings.Join(bad, "\n  - "))
			}
			prov, perr := pin.Resolve(args[0], allowDirty, nil)
			if perr != nil {
				// plan writes nothing, so it only warns; `marlow run` refuses.
				fmt.Fprintf(cmd.ErrOrStderr(), "marlow: warning: %v\n", perr)
				if prov, err = pin.Inspect(args[0]); err != nil {
					return err
				}
			}
			for _, w := range append(runner.OnlyWarnings(planned, only), runner.PlanWarnings(runs)...) {
				fmt.Fprintf(cmd.ErrOrStderr(), "marlow: warning: %s\n", w)
			}
			info := runner.PlanInfo{}
			if info.Bases, err = runner.BaseModels(s, runs); err != nil {
				return err
			}
			if !noEstimate {
				engines, err := newEngines()
				if err != nil {
					return err
				}
				est, err := runner.EstimatePlan(cmd.Context(), engines, runs, info.Bases, runtime.NumCPU())
				if err != nil {
					return err
				}
				info.Estimate = &est
				in := runner.GPUInputs{}
				if in.Check, err = runner.ReadNodeCheck(checkFile(gpuCheck, runsDir)); err != nil {
					return err
				}
				if in.Lengths, in.LengthsFrom, err = runner.BaseLengths(runsDir, s.Experiment, planned); err != nil {
					return err
				}
				info.GPU = runner.EstimateGPU(runs, in)
			}
			return runner.WritePlan(out, s, runs, prov, info, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	cmd.Flags().BoolVar(&resolved, "resolved", false, "print the fully resolved spec (with defaults) as YAML")
	cmd.Flags().StringVar(&only, "only", "", "keep only runs whose id matches this glob (e.g. 'voting-*-seed1'); one matching nothing is an error")
	cmd.Flags().BoolVar(&noEstimate, "no-estimate", false, "skip the engine calibration and the time estimate")
	cmd.Flags().StringVar(&runsDir, "runs", runner.DefaultRunsDir, "runs folder: finished base runs there give the turn lengths of the GPU cost, and its "+runner.NodeCheckFile+" (marlow bench node) the throughput")
	cmd.Flags().StringVar(&gpuCheck, "gpu-check", "", "node self-check file to price GPU runs from (default: "+runner.NodeCheckFile+" in --runs)")
	cmd.Flags().BoolVar(&allowDirty, "allow-dirty", false, "accept a dirty tree or a spec outside git without a warning")
	return cmd
}

// checkFile is the node self-check file: file when given, else the one in
// the runs folder.
func checkFile(file, runsDir string) string {
	if file != "" {
		return file
	}
	return filepath.Join(runsDir, runner.NodeCheckFile)
}
