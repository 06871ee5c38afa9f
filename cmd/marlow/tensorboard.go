package main

import (
	"errors"
	"fmt"
	"sync"

	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/tensorboard"
	"github.com/spf13/cobra"
)

func newTensorboardCmd() *cobra.Command {
	var runsDir, only string
	cmd := &cobra.Command{
		Use:   "tensorboard " + sourceArg + " OUTDIR",
		Short: "Write the runs' scalars as TensorBoard event files, one folder per run",
		Long: `tensorboard writes OUTDIR/<run-id>/events.out.tfevents.<created>.marlow for
every run of the source (a spec, a runs folder or an archive): one event per
step with the training scalars per policy and role (train_reward, loss,
grad_norm, grad_share, kl, entropy, train_len, clip_frac, zero_var_frac, lr;
role "all" is the policy's total) and the validation scalars per evaluated
workflow and role (val_accuracy, val_any_correct, val_selection, val_format,
val_len; role "final" is the workflow's answer). Files are rewritten whole
and follow from the logs alone: the same logs give the same bytes (wall
times are the run's creation time plus its logged step seconds). View them
with: tensorboard --logdir OUTDIR. marlow run --tensorboard DIR writes the
same files while the runs train, appending at every commit.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, _, err := runner.Source(args[0], runsDir)
			if err != nil {
				return err
			}
			keep, err := runner.RunFilter(only)
			if err != nil {
				return err
			}
			runs, err := runlog.ReadRuns(src)
			if err != nil {
				return err
			}
			n := 0
			for _, r := range runs {
				if keep != nil && !keep(r.Manifest.RunID) {
					continue
				}
				if _, err := tensorboard.Export(args[1], r); err != nil {
					return fmt.Errorf("tensorboard: run %s: %w", r.Manifest.RunID, err)
				}
				n++
			}
			if n == 0 {
				return fmt.Errorf("tensorboard: %w in %s (--only %q)", runlog.ErrNoRuns, src, only)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d %s written under %s (view: tensorboard --logdir %s)\n", n, pluralWord(n, "run", "runs"), args[1], args[1])
			return nil
		},
	}
	addRunsFlags(cmd, &runsDir, &only)
	return cmd
}

// pluralWord picks the singular or plural word for n.
func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// tbReporter is the Reporter of `marlow run --tensorboard DIR`: it passes
// every call on, and after each commit of a run appends the newly committed
// steps to the run's event file under DIR (written whole when the run
// starts, so a resumed run's file matches its logs). A failure to write
// is a note, never a failed run.
type tbReporter struct {
	runner.Reporter
	root    string
	runDir  func(id string) string
	mu      sync.Mutex
	written map[string]int64 // run id -> last step in its event file
}

func newTBReporter(inner runner.Reporter, root string, runDir func(id string) string) *tbReporter {
	return &tbReporter{Reporter: inner, root: root, runDir: runDir, written: map[string]int64{}}
}

// Started passes the call on and writes the run's event file anew.
func (t *tbReporter) Started(id string, steps int, from int64) {
	t.Reporter.Started(id, steps, from)
	t.mu.Lock()
	delete(t.written, id)
	t.mu.Unlock()
	t.sync(id)
}

// Step passes the call on and appends what the run has committed since.
func (t *tbReporter) Step(id string, p grpo.Progress) {
	t.Reporter.Step(id, p)
	t.sync(id)
}

// Finished appends the run's last commit, then passes the call on.
func (t *tbReporter) Finished(id, state string, err error) {
	t.sync(id)
	t.Reporter.Finished(id, state, err)
}

// sync appends the steps committed after the last one written.
func (t *tbReporter) sync(id string) {
	dir := t.runDir(id)
	m, err := runlog.ReadManifest(dir)
	if err != nil {
		if !errors.Is(err, runlog.ErrMissingManifest) {
			t.Note("marlow: tensorboard: %s: %v", id, err)
		}
		return
	}
	t.mu.Lock()
	last, ok := t.written[id]
	t.mu.Unlock()
	if ok && m.LastStep <= last {
		return
	}
	r, err := runlog.ReadMetrics(dir)
	if err != nil {
		t.Note("marlow: tensorboard: %s: %v", id, err)
		return
	}
	after := int64(-1)
	if ok {
		after = last
	}
	if _, err := tensorboard.ExportAfter(t.root, r, after); err != nil {
		t.Note("marlow: tensorboard: %s: %v", id, err)
		return
	}
	t.mu.Lock()
	t.written[id] = r.Manifest.LastStep
	t.mu.Unlock()
}
