package main

import (
	"fmt"
	"time"

	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/spf13/cobra"
)

func init() {
	bench := &cobra.Command{
		Use:   "bench",
		Short: "Measure the speed of marlow's components",
	}
	var size string
	var threads int
	var minTime time.Duration
	eng := &cobra.Command{
		Use:   "engine",
		Short: "Benchmark the native engine: train tok/s, generated tok/s, GEMM GFLOP/s, peak RSS",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := native.Bench(cmd.Context(), size, native.BenchOptions{Threads: threads, MinTime: minTime})
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), r.String())
			return nil
		},
	}
	eng.Flags().StringVar(&size, "size", "d64l2", "model size: d64l2 or d128l4")
	eng.Flags().IntVar(&threads, "threads", 2, "engine threads")
	eng.Flags().DurationVar(&minTime, "time", 3*time.Second, "minimum time per measurement")
	bench.AddCommand(eng)
	rootCmd.AddCommand(bench)
}
