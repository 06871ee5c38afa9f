package main

import (
	"fmt"
	"time"

	"github.com/marlowlab/marlow/harness/bench"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	benchCmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the speed of marlow's components",
	}
	var size, name, backend string
	var threads int
	var minTime time.Duration
	eng := &cobra.Command{
		Use:   "engine",
		Short: "Benchmark an engine: train tok/s, generated tok/s, GEMM GFLOP/s, peak RSS",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			engines, err := newEngines()
			if err != nil {
				return err
			}
			r, err := bench.Engine(cmd.Context(), engines, size, bench.Options{Engine: name, Threads: resolveThreads(threads, 1), MinTime: minTime, GenBackend: backend})
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), r.String())
			return nil
		},
	}
	eng.Flags().StringVar(&size, "size", "d64l2", "model size: d64l2 or d128l4")
	eng.Flags().StringVar(&name, "engine", native.Name, "registered engine to measure")
	eng.Flags().StringVar(&backend, "gen-backend", "", "torch engine generation backend: reference or slots (default: slots on cuda, reference on the CPU)")
	addThreadsFlag(eng, &threads, "engine threads")
	eng.Flags().DurationVar(&minTime, "time", 3*time.Second, "minimum time per measurement")
	benchCmd.AddCommand(eng)
	return benchCmd
}
