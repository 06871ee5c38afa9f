package main

import (
	"fmt"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/inspect"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/workflow"
	"github.com/spf13/cobra"
)

// newDataCmd is `marlow data`: it describes a downloaded task file with
// datasets/inspect and shows sample problems as a generator's prompt.
func newDataCmd() *cobra.Command {
	opt := inspect.DefaultOptions()
	var specFile, task string
	cmd := &cobra.Command{
		Use:   "data [FILE|DIR]",
		Short: "Describe a downloaded DAPO-Math-17k or DeepCoder file the way a run reads it",
		Long: `data reads a task file (a DAPO-Math-17k Parquet file: the original, the
open-r1 processed variant of any config, or AIME-2024) or DeepCoder shards (a
shard, a folder of shards, or the dataset root with its subset folders) and
prints the detected variant, the rows, the distinct problem statements, the
rows dropped as repeats and how many of them conflict, DAPO's instruction
wrapper outcomes, the problems skipped with their reasons, the train and
validation sizes a run gets with these settings, and sample problems as the
generator sees them. A file of the wrong schema is named with the column and
the type expected.

The settings default to the spec's (split_seed 1, val_frac 0.1, val_size 200);
--spec SPEC --task NAME takes them, and the path, from a task of a spec.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := ""
			if len(args) == 1 {
				path = args[0]
			}
			if specFile != "" || task != "" {
				p, err := taskOptions(specFile, task, &opt, cmd)
				if err != nil {
					return err
				}
				if path == "" {
					path = p
				}
			}
			if path == "" {
				return fmt.Errorf("data: give a FILE or DIR, or --spec and --task")
			}
			r, err := inspect.Inspect(path, opt)
			if err != nil {
				return err
			}
			return r.Write(cmd.OutOrStdout(), func(p datasets.Problem) string {
				return workflow.RenderPrompt(workflow.GeneratorPrompt(r.Instructions, p))
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&opt.Source, "source", "", "dapo-math or deepcoder (default: detected from the file)")
	f.StringVar(&opt.Language, "language", "", "dapo-math: keep all, en or cn problems (default all)")
	f.StringSliceVar(&opt.Subsets, "subsets", nil, "deepcoder: subset folders of the dataset root (lcbv5, primeintellect, taco, codeforces)")
	f.StringVar(&opt.TestPath, "test", "", "deepcoder: test shards (file, folder or dataset root) that form the validation set")
	f.Uint64Var(&opt.SplitSeed, "split-seed", opt.SplitSeed, "split_seed")
	f.Float64Var(&opt.ValFrac, "val-frac", opt.ValFrac, "val_frac")
	f.IntVar(&opt.ValSize, "val-size", opt.ValSize, "val_size (a cap on the validation set; 0 = none)")
	f.IntVar(&opt.Samples, "samples", opt.Samples, "sample problems to print")
	f.StringVar(&specFile, "spec", "", "take the settings and path from this spec's --task")
	f.StringVar(&task, "task", "", "task of --spec")
	return cmd
}

// taskOptions fills opt from a spec's task (flags given explicitly win)
// and returns the task's path.
func taskOptions(specFile, task string, opt *inspect.Options, cmd *cobra.Command) (string, error) {
	if specFile == "" || task == "" {
		return "", fmt.Errorf("data: --spec and --task go together")
	}
	s, err := spec.Load(specFile)
	if err != nil {
		return "", err
	}
	t, ok := s.Tasks[task]
	if !ok {
		return "", fmt.Errorf("data: spec %s has no task %q", specFile, task)
	}
	if t.Path == "" {
		return "", fmt.Errorf("data: task %q (source %s) reads no file", task, t.Source)
	}
	set := func(name string) bool { return !cmd.Flags().Changed(name) }
	if set("source") {
		opt.Source = t.Source
	}
	if set("language") {
		opt.Language = t.Language
	}
	if set("subsets") {
		opt.Subsets = t.Subsets
	}
	if set("test") {
		opt.TestPath = t.TestPath
	}
	if set("split-seed") {
		opt.SplitSeed = t.SplitSeed
	}
	if set("val-frac") {
		opt.ValFrac = t.ValFrac
	}
	if set("val-size") {
		opt.ValSize = t.ValSize
	}
	return t.Path, nil
}
