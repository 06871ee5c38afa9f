package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/pretrain"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newPretrainCmd() *cobra.Command {
	var (
		scale, cache   string
		report, commit bool
		threads, steps int
		valN           int
		noBuild        bool
	)
	cmd := &cobra.Command{
		Use:   "pretrain SPEC",
		Short: "Pretrain the tiny base models of a spec on teacher transcripts, and calibrate them",
		Long: `pretrain builds the checkpoint of every tiny scale of SPEC (or only --scale):
full-parameter supervised training on noisy teacher transcripts of every
workflow role, deterministic from pretrain.seed. A checkpoint already in the
repository (seeds/models/<scale>-<key12>) or in the cache
($MARLOW_CACHE/models/<key>, default ~/.cache/marlow) is reused; --commit
writes new ones into seeds/models. --report then runs every workflow with
each base model on the validation sets and prints accuracy and per-role
format compliance.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := spec.Load(args[0])
			if err != nil {
				return err
			}
			scales, err := pretrain.Scales(s, scale)
			if err != nil {
				return err
			}
			var jobs []pretrain.Job
			for _, sc := range scales {
				cfg := pretrain.ConfigOf(s, sc)
				if steps > 0 {
					cfg.Steps = map[string]int{"default": steps}
				}
				j, err := pretrain.FromSpec(s, sc, cfg)
				if err != nil {
					return err
				}
				jobs = append(jobs, j)
			}
			threads = resolveThreads(threads, 1)
			errOut := cmd.ErrOrStderr()
			isTerm := false
			if f, ok := errOut.(*os.File); ok {
				isTerm = term.IsTerminal(int(f.Fd()))
			}
			l := pretrain.LocatorOf(s)
			l.CacheRoot, l.NoBuild = cache, noBuild
			l.Options = pretrain.Options{Threads: threads, Progress: errOut, Bar: isTerm}
			built, err := pretrain.Build(cmd.Context(), l, jobs, commit)
			for _, b := range built {
				line := fmt.Sprintf("%s\t%d params\t%s\t%s", b.Scale, b.Params, b.Where, b.Dir)
				if b.Where == pretrain.FromBuild {
					line += fmt.Sprintf("\t%d steps, final loss %.4f, %s", b.Result.Steps, b.Result.FinalLoss, b.Result.Wall.Round(1e9))
				}
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			if err != nil || !report {
				return err
			}
			engines, err := newEngines()
			if err != nil {
				return err
			}
			for i, b := range built {
				name := s.Models[b.Scale].Engine
				eng, _, err := engines.Open(cmd.Context(), name, b.Dir, engine.Options{Threads: threads})
				if err != nil {
					return fmt.Errorf("pretrain: calibrate %s: %w", b.Scale, err)
				}
				cal, err := pretrain.Calibrate(cmd.Context(), s, jobs[i], eng, pretrain.CalibrateOptions{ValSize: valN, Progress: errOut})
				eng.Close()
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), cal.Markdown())
				if commit || b.Where == pretrain.FromCommitted {
					if err := os.WriteFile(filepath.Join(b.Dir, pretrain.CalibrationFile), []byte(cal.Markdown()), 0o644); err != nil {
						return fmt.Errorf("pretrain: %w", err)
					}
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&scale, "scale", "", "pretrain only this scale (e.g. s, m, l)")
	f.BoolVar(&report, "report", false, "calibrate: run every workflow with the base models on the validation sets")
	f.BoolVar(&commit, "commit", false, "write new checkpoints into the repository's seeds/models instead of the cache")
	f.BoolVar(&noBuild, "no-build", false, "fail instead of pretraining a missing checkpoint")
	f.StringVar(&cache, "cache", "", "cache root (default $MARLOW_CACHE or ~/.cache/marlow)")
	addThreadsFlag(cmd, &threads, "engine threads")
	f.IntVar(&steps, "steps", 0, "override pretrain.steps for every scale (changes the checkpoint key)")
	f.IntVar(&valN, "val", 0, "calibration: validation problems per task (0 = eval.val_size, else the task's val_size)")
	return cmd
}
