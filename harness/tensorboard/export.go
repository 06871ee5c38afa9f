package tensorboard

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/marlowlab/marlow/harness/runlog"
)

// Tags of the scalars of a run, grouped by their first path component as
// TensorBoard groups them: training metrics per policy and role
// ("<metric>/<policy>/<role>", role "all" for the policy's total row) and
// validation metrics per evaluated workflow and role
// ("<metric>/<workflow>/<role>", role "final" for the workflow's answer).
var (
	stepMetrics = []struct {
		name string
		get  func(*runlog.StepRow) float64
	}{
		{"train_reward", func(r *runlog.StepRow) float64 { return r.RewardMean }},
		{"train_reward_std", func(r *runlog.StepRow) float64 { return r.RewardStd }},
		{"loss", func(r *runlog.StepRow) float64 { return r.Loss }},
		{"grad_norm", func(r *runlog.StepRow) float64 { return r.GradNorm }},
		{"grad_share", func(r *runlog.StepRow) float64 { return r.GradShare }},
		{"kl", func(r *runlog.StepRow) float64 { return r.KL }},
		{"entropy", func(r *runlog.StepRow) float64 { return r.Entropy }},
		{"train_len", func(r *runlog.StepRow) float64 { return r.MeanLen }},
		{"clip_frac", func(r *runlog.StepRow) float64 { return r.ClipFrac }},
		{"zero_var_frac", func(r *runlog.StepRow) float64 { return r.ZeroVarFrac }},
		{"lr", func(r *runlog.StepRow) float64 { return r.LR }},
	}
	evalMetrics = []struct {
		name string
		get  func(*runlog.EvalRow) float64
	}{
		{"val_accuracy", func(r *runlog.EvalRow) float64 { return r.Accuracy }},
		{"val_any_correct", func(r *runlog.EvalRow) float64 { return r.AnyCorrect }},
		{"val_selection", func(r *runlog.EvalRow) float64 { return r.SelectionAcc }},
		{"val_format", func(r *runlog.EvalRow) float64 { return r.FormatRate }},
		{"val_len", func(r *runlog.EvalRow) float64 { return r.MeanLen }},
	}
)

// FileName is the event file of a run inside its folder: TensorBoard reads
// files whose name holds "tfevents"; the number is the run's creation time
// (from its manifest), so the name, like the bytes, follows from the logs.
func FileName(m runlog.Manifest) string {
	return fmt.Sprintf("events.out.tfevents.%d.marlow", createdUnix(m))
}

func createdUnix(m runlog.Manifest) int64 {
	t, err := time.Parse(time.RFC3339, m.Created)
	if err != nil {
		return 0
	}
	return t.Unix()
}

// StepScalars returns the scalars of one step of a run, sorted by tag, and
// the step's wall time: the run's creation time plus the total_sec of its
// timing rows up to that step (so a rerun of the same logs gives the same
// bytes; TensorBoard's relative-time axis then shows training time).
func StepScalars(r *runlog.Run, step int64) (wall float64, out []Scalar) {
	wall = float64(createdUnix(r.Manifest))
	for _, t := range r.Timing {
		if t.Step <= step && !math.IsNaN(t.TotalSec) {
			wall += t.TotalSec
		}
	}
	for i := range r.Steps {
		s := &r.Steps[i]
		if s.Step != step {
			continue
		}
		role := s.Role
		if role == "*" {
			role = "all"
		}
		for _, m := range stepMetrics {
			out = append(out, Scalar{Tag: m.name + "/" + s.Policy + "/" + role, Value: m.get(s)})
		}
	}
	for i := range r.Evals {
		e := &r.Evals[i]
		if e.Step != step {
			continue
		}
		role := e.Role
		if role == "*" {
			role = "final"
		}
		for _, m := range evalMetrics {
			out = append(out, Scalar{Tag: m.name + "/" + e.Workflow + "/" + role, Value: m.get(e)})
		}
	}
	slices.SortFunc(out, func(a, b Scalar) int { return strings.Compare(a.Tag, b.Tag) })
	return wall, out
}

// Steps lists the steps of a run that have rows in steps/ or evals/, in
// order, after step after (-1 for all).
func Steps(r *runlog.Run, after int64) []int64 {
	var out []int64
	for _, s := range r.Steps {
		out = append(out, s.Step)
	}
	for _, e := range r.Evals {
		out = append(out, e.Step)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return slices.DeleteFunc(out, func(s int64) bool { return s <= after })
}

// RunDir is the folder of a run's event file under root: one per run,
// named by its run id.
func RunDir(root string, m runlog.Manifest) string { return filepath.Join(root, m.RunID) }

// Export writes the event file of run r under root/<run-id>/, replacing
// any earlier one: a file_version event, then one event per step with
// that step's scalars. It returns the file's path.
func Export(root string, r *runlog.Run) (string, error) {
	return ExportAfter(root, r, -1)
}

// ExportAfter is Export for the steps after step after only, appended to
// the run's event file; after -1 writes the file anew. A run's file
// written by appending commit by commit is byte-identical to one written
// by Export at the end.
func ExportAfter(root string, r *runlog.Run, after int64) (string, error) {
	dir := RunDir(root, r.Manifest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("tensorboard: %w", err)
	}
	p := filepath.Join(dir, FileName(r.Manifest))
	var w *Writer
	var err error
	if after < 0 {
		w, err = Create(p, float64(createdUnix(r.Manifest)))
	} else {
		w, err = Append(p)
	}
	if err != nil {
		return "", err
	}
	for _, st := range Steps(r, after) {
		wall, sc := StepScalars(r, st)
		if err := w.Scalars(st, wall, sc); err != nil {
			w.Close()
			return "", err
		}
	}
	return p, w.Close()
}
