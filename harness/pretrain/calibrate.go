package pretrain

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

// CalibrationFile is the calibration table written next to a committed
// checkpoint.
const CalibrationFile = "calibration.md"

// CalibrateOptions tune Calibrate.
type CalibrateOptions struct {
	// ValSize caps the validation problems per task (0 = the spec's
	// eval.val_size, else the task's val_size).
	ValSize int
	// Workflows to run (default all four).
	Workflows []string
	Progress  io.Writer
}

// RoleRate is one role's format compliance.
type RoleRate struct {
	Role      string
	Turns     int
	Compliant int
}

// Rate is the compliant fraction (NaN-free: 0 turns give 0).
func (r RoleRate) Rate() float64 {
	if r.Turns == 0 {
		return 0
	}
	return float64(r.Compliant) / float64(r.Turns)
}

// CalRow is the calibration of one workflow on one task.
type CalRow struct {
	Task     string
	Workflow string
	Problems int
	Correct  int
	Roles    []RoleRate // sorted by role
}

// Accuracy is the fraction of episodes whose final answer is correct.
func (r CalRow) Accuracy() float64 {
	if r.Problems == 0 {
		return 0
	}
	return float64(r.Correct) / float64(r.Problems)
}

// Calibration is the base-model calibration of one scale.
type Calibration struct {
	Scale  string
	Params int64
	Rows   []CalRow // by task (matrix order), then workflow (design order)
}

// Calibrate runs every workflow with eng (an engine opened over the base
// checkpoint of job, with no adapters needed) on the validation set of each
// synthetic task of the spec's matrix (one rollout per problem at the
// spec's temperature and completion budgets) and returns accuracies and
// per-role format compliance.
func Calibrate(ctx context.Context, s *spec.Spec, job Job, eng engine.Engine, opt CalibrateOptions) (Calibration, error) {
	cal := Calibration{Scale: job.Scale, Params: job.Model.NumParams()}
	wfs := opt.Workflows
	if len(wfs) == 0 {
		wfs = study.Workflows
	}
	for _, name := range s.Matrix.Tasks {
		st, ok := s.Tasks[name]
		if !ok || (st.Source != datasets.SourceSynthMath && st.Source != datasets.SourceSynthCode) {
			continue
		}
		tc, err := SynthTaskConfig(name, st)
		if err != nil {
			return cal, fmt.Errorf("pretrain: calibrate: %w", err)
		}
		task, err := tc.Open()
		if err != nil {
			return cal, err
		}
		val, err := task.Validation()
		if err != nil {
			return cal, fmt.Errorf("pretrain: calibrate %s: %w", name, err)
		}
		n := opt.ValSize
		if n <= 0 {
			n = s.Eval.ValSize
		}
		if n > 0 && n < len(val) {
			val = val[:n]
		}
		jobs := make([]workflow.Job, len(val))
		for i, p := range val {
			jobs[i] = workflow.Job{Problem: p, Index: int64(i)}
		}
		for _, wf := range wfs {
			start := time.Now()
			row, err := calibrateOne(ctx, s, eng, task, name, wf, jobs)
			if err != nil {
				return cal, err
			}
			if opt.Progress != nil {
				fmt.Fprintf(opt.Progress, "calibrate %s %s %s: accuracy %.3f on %d problems (%s)\n",
					job.Scale, name, wf, row.Accuracy(), row.Problems, time.Since(start).Round(time.Second))
			}
			cal.Rows = append(cal.Rows, row)
		}
	}
	return cal, nil
}

// WorkflowConfig is the workflow configuration of a spec for a task kind:
// the spec's workflow section (eval-opt's max_iterations resolved by kind,
// 3 math and 2 code, when unset) with its grpo temperature and completion
// budgets.
func WorkflowConfig(s *spec.Spec, name, kind string) workflow.Config {
	ws := spec.ResolveWorkflowSettings(s.Workflow, kind)
	mnt := map[string]int{}
	for k, v := range s.GRPO.MaxNewTokens {
		if k != "default" {
			mnt[k] = v
		}
	}
	return workflow.Config{Name: name, Settings: ws,
		Temperature: s.GRPO.Temperature, MaxNewTokens: mnt, DefaultMaxNewTokens: s.GRPO.MaxNewTokens["default"]}
}

func calibrateOne(ctx context.Context, s *spec.Spec, eng engine.Engine, task datasets.Task, name, wf string, jobs []workflow.Job) (CalRow, error) {
	row := CalRow{Task: name, Workflow: wf, Problems: len(jobs)}
	r := &workflow.Runner{Engine: eng, Task: task, Config: WorkflowConfig(s, wf, task.Kind())}
	eps, err := r.Run(ctx, workflow.Batch{RunSeed: s.MasterSeed, Purpose: "val"}, jobs)
	if err != nil {
		return row, fmt.Errorf("pretrain: calibrate %s %s: %w", name, wf, err)
	}
	roles, err := workflow.Roles(wf)
	if err != nil {
		return row, err
	}
	idx := map[string]int{}
	for i, role := range roles {
		idx[role] = i
		row.Roles = append(row.Roles, RoleRate{Role: role})
	}
	for _, ep := range eps {
		if ep.Reward() > 0 {
			row.Correct++
		}
		for _, c := range ep.Compliance() {
			if i, ok := idx[c.Role]; ok {
				row.Roles[i].Turns += c.Turns
				row.Roles[i].Compliant += c.Compliant
			}
		}
	}
	return row, nil
}

// Markdown renders the calibration as a table: one row per task and
// workflow with the accuracy and each of the workflow's roles' compliance.
func (c Calibration) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Calibration of scale %s (%d parameters)\n\n", c.Scale, c.Params)
	b.WriteString("| task | workflow | problems | accuracy | format compliance per role |\n")
	b.WriteString("|---|---|---:|---:|---|\n")
	for _, r := range c.Rows {
		parts := make([]string, len(r.Roles))
		for i, rr := range r.Roles {
			parts[i] = fmt.Sprintf("%s %.2f (%d)", rr.Role, rr.Rate(), rr.Turns)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.3f | %s |\n", r.Task, r.Workflow, r.Problems, r.Accuracy(), strings.Join(parts, ", "))
	}
	return b.String()
}
