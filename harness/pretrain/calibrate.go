package pretrain

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/marlowlab/marlow/analysis"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/runlog"
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
	// Supervisor is the workflow's supervisory role's value at base
	// (analysis.SupervisorOf; nil for a workflow without one).
	Supervisor *analysis.SupervisorValue
	// Fidelity is the supervisory role's check fidelity (FidelityOf; nil
	// where the recipe writes it no check on this task).
	Fidelity *Fidelity
	// Majority is the aggregator's answers lines and majority selections
	// (MajorityOf; nil but in voting under pretrain.selection).
	Majority *Majority
	// Errors sorts the wrong first answers of the workflow's generators
	// by kind (MathErrorKind; nil but on synth-math under a checking
	// recipe).
	Errors *GeneratorErrors
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
	CI     float64 // interval level of the supervisor table (the spec's analysis.ci)
	Recipe string  // the supervisors' pretraining recipe (pretrain.supervisors; "" the default)
	// Selection is the aggregators' pretrain.selection ("" the recipe's own).
	Selection string
	Rows      []CalRow // by task (matrix order), then workflow (design order)
}

// Calibrate runs every workflow with eng (an engine opened over the base
// checkpoint of job, with no adapters needed) on the validation set of each
// synthetic task of the spec's matrix (one rollout per problem at the
// spec's temperature and completion budgets) and returns accuracies and
// per-role format compliance.
func Calibrate(ctx context.Context, s *spec.Spec, job Job, eng engine.Engine, opt CalibrateOptions) (Calibration, error) {
	cal := Calibration{Scale: job.Scale, Params: job.Model.NumParams(), CI: s.Analysis.CI, Recipe: job.Pretrain.Supervisors,
		Selection: job.Pretrain.Selection}
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
			row, err := calibrateOne(ctx, s, eng, task, name, wf, jobs, cal.Recipe, cal.Selection)
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

func calibrateOne(ctx context.Context, s *spec.Spec, eng engine.Engine, task datasets.Task, name, wf string, jobs []workflow.Job, recipe, selection string) (CalRow, error) {
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
	if role := analysis.SupervisorOf(wf); role != "" {
		run := &runlog.Run{Manifest: runlog.Manifest{SchemaVersion: runlog.SchemaVersion}, Samples: grpo.ValSampleRows("calibration", 0, eps)}
		if steps := analysis.WorkflowSteps(run, wf); len(steps) == 1 {
			v := analysis.SupervisorValueOf(role, steps[0], s.Analysis.CI)
			row.Supervisor = &v
		}
		if f, ok := FidelityOf(recipe, task.Kind(), role, eps); ok {
			row.Fidelity = &f
		}
		if m, ok := MajorityOf(selection, task.Kind(), eps); ok {
			row.Majority = &m
		}
	}
	if task.Kind() == datasets.KindMath && problemCheckOf(recipe) != nil {
		e := generatorErrorsOf(eps)
		row.Errors = &e
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
	c.supervisorMarkdown(&b)
	c.fidelityMarkdown(&b)
	c.majorityMarkdown(&b)
	c.errorsMarkdown(&b)
	return b.String()
}

// SupervisorBar states when a base model's supervisor meets the bar of a
// skilled supervisor; MeetsBar applies it.
func SupervisorBar(ci float64) string {
	return fmt.Sprintf("the aggregator (voting) meets the bar when its accuracy minus that of candidate 1 has a %g%% t interval over problems "+
		"whose lower bound is above 0 (the rule of the studies' supervisor value); the evaluator (eval-opt) meets it when the %g%% Wilson interval "+
		"of its true-accept rate (accepts among its parsed verdicts on correct generator turns) lies wholly above that of its false-accept rate "+
		"(accepts among its parsed verdicts on incorrect ones). The synthesizer (orch-workers) is shown and not held to a bar", ci*100, ci*100)
}

// MeetsBar applies SupervisorBar to a supervisor value; the second result
// is false for a role the bar does not cover.
func MeetsBar(v analysis.SupervisorValue, ci float64) (meets, covered bool) {
	switch v.Role {
	case study.Aggregator:
		return v.Diff.HasCI() && v.Diff.Lo > 0, true
	case study.Evaluator:
		right, wrong := v.TrueAccepts+v.FalseRejects, v.FalseAccepts+v.TrueRejects
		taLo, _ := analysis.Wilson(v.TrueAccepts, right, ci)
		_, faHi := analysis.Wilson(v.FalseAccepts, wrong, ci)
		return right > 0 && wrong > 0 && taLo > faHi, true
	}
	return false, false
}

// supervisorMarkdown writes the supervisor-value table: per task and
// workflow with a supervisor, the supervisor's answer against candidate 1,
// the majority and the oracle (aggregator, synthesizer), or the
// evaluator's true- and false-accept rates, each with its interval, and
// whether it meets SupervisorBar.
func (c Calibration) supervisorMarkdown(b *strings.Builder) {
	rows := c.rowsWith(func(r CalRow) bool { return r.Supervisor != nil })
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### Supervisor value at base\n\nBar: %s.\n\n", SupervisorBar(c.CI))
	b.WriteString("| task | workflow | role | episodes | supervisor | candidate 1 | majority | oracle | supervisor − candidate 1 | true-accept rate | false-accept rate | Fisher p | bar |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---|---|---|---:|---|\n")
	for _, r := range rows {
		v := *r.Supervisor
		sup, first, maj, orc, diff, ta, fa, p := "–", "–", "–", "–", "–", "–", "–", "–"
		if v.Role == study.Evaluator {
			ta = wilsonRate(v.TrueAccepts, v.TrueAccepts+v.FalseRejects, c.CI)
			fa = wilsonRate(v.FalseAccepts, v.FalseAccepts+v.TrueRejects, c.CI)
			if !math.IsNaN(v.P) {
				p = fmt.Sprintf("%.3g", v.P)
			}
		} else if v.Episodes > 0 {
			sup, first, maj, orc = f3(v.Sup), f3(v.First), f3(v.Majority), f3(v.Oracle)
			diff = fmt.Sprintf("%+.3f", v.Diff.Value)
			if v.Diff.HasCI() {
				diff += fmt.Sprintf(" [%+.3f, %+.3f]", v.Diff.Lo, v.Diff.Hi)
			}
		}
		bar := "–"
		if meets, covered := MeetsBar(v, c.CI); covered {
			bar = "no"
			if meets {
				bar = "yes"
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Task, r.Workflow, v.Role, v.Episodes, sup, first, maj, orc, diff, ta, fa, p, bar)
	}
}

// rowsWith are the calibration's rows for which keep is true, in order.
func (c Calibration) rowsWith(keep func(CalRow) bool) []CalRow {
	var rows []CalRow
	for _, r := range c.Rows {
		if keep(r) {
			rows = append(rows, r)
		}
	}
	return rows
}

// wilsonRate renders k of n with its Wilson interval at level ci.
func wilsonRate(k, n int, ci float64) string {
	if n == 0 {
		return "– (0)"
	}
	lo, hi := analysis.Wilson(k, n, ci)
	return fmt.Sprintf("%.3f [%.3f, %.3f] (%d/%d)", float64(k)/float64(n), lo, hi, k, n)
}

func f3(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.3f", x)
}
