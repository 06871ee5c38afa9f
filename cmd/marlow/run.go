package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Exit statuses of `marlow run`: 0 when every run is done, skipped or held
// by another process, the number of failed and damaged runs (at most
// maxFailExit) when there are some, and exitInterrupted when a signal
// stopped it.
const (
	maxFailExit     = 100
	exitInterrupted = 130
)

func newRunCmd() *cobra.Command {
	var (
		opt       runner.Options
		progress  string
		preflight bool
		every     time.Duration
		tbDir     string
	)
	cmd := &cobra.Command{
		Use:   "run SPEC",
		Short: "Train and evaluate the runs of an experiment, resuming where it stopped",
		Long: `run executes the runs of SPEC on this machine, --jobs at a time (default one
per core; runs on GPUs: one per GPU, each run's engine pinned to its own GPU
through CUDA_VISIBLE_DEVICES, --jobs above the GPU count refused unless
--runs-per-gpu lets runs share a GPU; --gpus-per-run gives each run
several), each with --threads engine threads, in run folders
<runs>/<experiment>/<run-id>/. A run already done with the same config is
skipped once its files match its manifest (sizes; SHA-256 too with
--verify), and reported damaged otherwise (rerun it with --redo); a partial
one is verified (SHA-256 of its segments and checkpoint) and resumes from its
last checkpoint; a folder written by another config is refused (the
differing keys are listed) before anything runs; --redo GLOB discards the
matching runs and runs them again. A run another marlow process holds is
left to it (its pid and host are named). The runs folder must be a writable
folder with free space for the estimated footprint of the runs still to
write, else nothing runs. A dirty work tree is refused unless --allow-dirty
(then recorded): results are pinned to a commit, and uncommitted changes
would make them irreproducible. --tensorboard DIR writes each run's
scalars as TensorBoard event files under DIR, appended at every commit.

Progress: one bar per active run on a terminal, plain lines otherwise.
SIGINT/SIGTERM: runs finish their current step, commit it and are marked
interrupted (a second signal kills at once). A failing run is marked failed
with its error and the others continue. Exit status: 0 when all runs are
done, skipped or held by another process, the number of failed and damaged
runs (at most 100) otherwise, 130 when interrupted; 1 for an error before
any run starts.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := spec.Load(args[0])
			if err != nil {
				return err
			}
			if opt.Engines, err = newEngines(); err != nil {
				return err
			}
			if preflight {
				if err := runner.PreflightIn(cmd.Context(), s, opt.Only, opt.RunsDir, opt.Engines); err != nil {
					return err
				}
				place, err := runner.Place(cmd.Context(), s, opt)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "preflight %s: checkpoints, data and engines are all present, and %s has room for the estimated footprint\n", args[0], opt.RunsDir)
				if d := place.Describe(); d != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "preflight %s: the runs use %s\n", args[0], d)
				}
				return nil
			}
			errOut := cmd.ErrOrStderr()
			if planned, err := spec.Plan(s); err == nil {
				for _, w := range runner.OnlyWarnings(planned, opt.Only) {
					fmt.Fprintf(errOut, "marlow: warning: %s\n", w)
				}
			}
			rep, err := newReporter(progress, errOut, every)
			if err != nil {
				return err
			}
			opt.Reporter = rep
			if tbDir != "" {
				opt.Reporter = newTBReporter(rep, tbDir, func(id string) string { return runner.RunDir(opt.RunsDir, s.Experiment, id) })
			}
			place, err := runner.Place(cmd.Context(), s, opt)
			if err != nil {
				return err
			}
			if d := place.Describe(); d != "" {
				rep.Note("marlow: the runs use %s", d)
			}
			if opt.Threads, err = runThreads(s, opt, place.Jobs); err != nil {
				return err
			}
			opt.BaseModel = runner.PretrainedBase(s, opt.Threads, errOut)
			ctx, cancel := context.WithCancelCause(cmd.Context())
			defer cancel(nil)
			stopSignals := onSignal(func(sig os.Signal) {
				rep.Note("marlow: %v received: finishing the current step of each run (signal again to kill)", sig)
				cancel(fmt.Errorf("%v received", sig))
			})
			defer stopSignals()
			sum, err := runner.Run(ctx, s, opt)
			rep.Close()
			if err != nil {
				return err
			}
			return runExit(cmd.OutOrStdout(), sum)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opt.RunsDir, "runs", runner.DefaultRunsDir, "root folder of run folders (runs live in <runs>/<experiment>/<run-id>)")
	f.IntVar(&opt.Jobs, "jobs", 0, "runs executed at once (0: one per core; for runs on GPUs, one per GPU)")
	f.IntVar(&opt.GPUsPerRun, "gpus-per-run", 0, "GPUs each run on GPUs is pinned to (0: 1)")
	f.IntVar(&opt.RunsPerGPU, "runs-per-gpu", 0, "runs that share each GPU (0: 1); lets --jobs go up to GPUs x this")
	addThreadsFlag(cmd, &opt.Threads, "engine threads per run")
	f.StringVar(&opt.Only, "only", "", "run only the runs whose id matches this glob (e.g. 'voting-*')")
	f.BoolVar(&opt.AllowDirty, "allow-dirty", false, "accept uncommitted changes (recorded in each manifest)")
	f.BoolVar(&opt.UnsafeCodeExec, "unsafe-code-exec", false, "run generated code without network isolation when the sandbox cannot isolate it")
	f.BoolVar(&opt.Verify, "verify", false, "compare the SHA-256 of every file of a done run with its manifest before skipping it")
	f.StringVar(&opt.Redo, "redo", "", "discard the runs whose id matches this glob and run them again from the start")
	f.StringVar(&progress, "progress", "auto", "progress display: auto (bars on a terminal, else lines), bars, lines or none")
	f.DurationVar(&every, "log-every", 30*time.Second, "period of a run's progress line in lines mode")
	f.StringVar(&tbDir, "tensorboard", "", "also write each run's scalars as TensorBoard event files under this folder (one per run), appended at every commit")
	f.BoolVar(&preflight, "preflight", false, "only check that the checkpoints, data and engines the runs need are present (writes nothing)")
	return cmd
}

// runThreads resolves --threads for run: the cores divided among the runs
// executed at once (jobs, as runner.Place resolved --jobs, or fewer when
// fewer runs are selected).
func runThreads(s *spec.Spec, opt runner.Options, jobs int) (int, error) {
	if opt.Threads > 0 {
		return opt.Threads, nil
	}
	planned, err := spec.Plan(s)
	if err != nil {
		return 0, err
	}
	runs, err := runner.Select(planned, opt.Only)
	if err != nil {
		return 0, err
	}
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	return resolveThreads(0, min(jobs, len(runs))), nil
}

// onSignal calls fn on the first SIGINT or SIGTERM and then restores the
// default handling, so that a second signal kills the process. The
// returned function stops listening.
func onSignal(fn func(os.Signal)) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			signal.Stop(sigs)
			fn(sig)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// newReporter picks the progress display.
func newReporter(mode string, w io.Writer, every time.Duration) (runner.Reporter, error) {
	switch mode {
	case "auto":
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return runner.NewBars(w), nil
		}
		return runner.NewLines(w, every), nil
	case "bars":
		return runner.NewBars(w), nil
	case "lines":
		return runner.NewLines(w, every), nil
	case "none":
		return runner.NewLines(io.Discard, every), nil
	}
	return nil, fmt.Errorf("--progress %q: want auto, bars, lines or none", mode)
}

// runExit prints the summary and maps it to the exit status.
func runExit(w io.Writer, sum *runner.Summary) error {
	states := []string{runner.StateDone, runner.StateSkipped, runner.StateHeld, runner.StateFailed, runner.StateDamaged, runner.StateInterrupted, runner.StateNotStarted}
	var parts []string
	for _, st := range states {
		if n := sum.Count(st); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", st, n))
		}
	}
	fmt.Fprintf(w, "%d runs: %s\n", len(sum.Outcomes), strings.Join(parts, ", "))
	for _, o := range sum.Outcomes {
		switch o.State {
		case runner.StateFailed, runner.StateDamaged, runner.StateHeld:
			fmt.Fprintf(w, "%s: %s: %v\n", o.State, o.ID, o.Err)
		}
	}
	if n := sum.Count(runner.StateInterrupted) + sum.Count(runner.StateNotStarted); n > 0 {
		return &exitError{code: exitInterrupted, err: fmt.Errorf("run: interrupted; %d runs not finished (run the same command to resume)", n)}
	}
	if n := len(sum.Failed()); n > 0 {
		return &exitError{code: min(n, maxFailExit), err: fmt.Errorf("run: %d of %d runs failed or are damaged", n, len(sum.Outcomes))}
	}
	return nil
}
