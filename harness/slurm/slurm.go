// Package slurm runs an experiment on a Slurm cluster: it submits one job
// array task per run that is not yet done, each running
// `marlow run SPEC --only <run-id>` against a runs root on the cluster's
// shared filesystem, and a report job that runs `marlow report` once the
// array has ended. It plans exactly as `marlow run` does (runner.Prepare:
// same selection, dirty-tree rule and refusal of folders holding another
// config), writes the batch scripts and the array index -> run id map under
// <runs>/<experiment>/slurm/, creates every run folder with its job log
// (runlog.JobLogFile, appended to by Slurm) before submitting, and reads
// the queue with squeue (no accounting database is needed).
//
// Surviving requeue and preemption is the runner's resume: a task's script
// is idempotent and reruns from the top, marlow resumes the run from its
// last checkpoint, and the warning signal before the time limit makes
// marlow commit the current step and stop.
package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/marlowlab/marlow/harness/internal/atomicfile"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/spec"
)

// ErrNoSbatch is returned (wrapped) when Slurm's sbatch is not on PATH.
var ErrNoSbatch = errors.New("no sbatch found on PATH")

// DirName is the folder of an experiment's run root that holds the batch
// scripts, index maps and submission records.
const DirName = "slurm"

// DefaultWarn is how long before the time limit a task is told to commit
// and stop.
const DefaultWarn = 120 * time.Second

// Options configure a submission.
type Options struct {
	// Runner holds the selection and policy shared with marlow run:
	// RunsDir, Only, AllowDirty, UnsafeCodeExec.
	Runner runner.Options
	// Marlow is the marlow binary the tasks run (made absolute).
	Marlow string
	// WorkDir is the jobs' working directory (the current one when empty).
	WorkDir string
	// ReportOut is the report folder (reports/<experiment> under WorkDir
	// when empty).
	ReportOut string

	Partition, Account, QOS, Time, Gres, Mem string
	CPUsPerTask                              int
	MaxParallel                              int
	// Warn is how long before the time limit the warning signal comes
	// (DefaultWarn when 0; negative: none).
	Warn       time.Duration
	SbatchArgs []string
}

// Task is one array task: its index, run and run folder.
type Task struct {
	Index int
	ID    string
	Dir   string
}

// Batch is a planned submission.
type Batch struct {
	Experiment string
	Root       string // <runs>/<experiment>, absolute
	Dir        string // Root/slurm
	Name       string // submission name, e.g. submit-001
	Tasks      []Task // the runs submitted, in plan order
	Done       []string
	Script     Script
	Report     ReportScript
}

// ScriptPath is the path of the array's batch script.
func (b *Batch) ScriptPath() string { return filepath.Join(b.Dir, b.Name+".sh") }

// ReportPath is the path of the report job's script.
func (b *Batch) ReportPath() string { return filepath.Join(b.Dir, b.Name+"-report.sh") }

// MapPath is the path of the index -> run id map.
func (b *Batch) MapPath() string { return filepath.Join(b.Dir, b.Name+".runs") }

// RecordPath is the path of the submission record (job ids), written after
// submitting.
func (b *Batch) RecordPath() string { return filepath.Join(b.Dir, b.Name+".json") }

// outputDir holds one link per array index to its run's job log.
func (b *Batch) outputDir() string { return filepath.Join(b.Dir, b.Name) }

// Record is a submission as stored next to its script: the job ids the
// queue is read by.
type Record struct {
	Experiment string   `json:"experiment"`
	Submission string   `json:"submission"`
	ArrayJob   string   `json:"array_job"`
	ReportJob  string   `json:"report_job"`
	Runs       []string `json:"runs"` // index -> run id
	Submitted  string   `json:"submitted"`
}

// LookSbatch finds sbatch on PATH, or returns ErrNoSbatch with what to do.
func LookSbatch() (string, error) {
	p, err := exec.LookPath("sbatch")
	if err != nil {
		return "", fmt.Errorf("slurm: %w: marlow slurm submits through Slurm; run it on a machine with the Slurm client tools (a cluster's login node), or use marlow run here", ErrNoSbatch)
	}
	return p, nil
}

// Plan resolves the runs to submit like marlow run (runner.Prepare), leaves
// out those done with the same config, and lays out the scripts. It writes
// nothing. A batch with no tasks means every selected run is done.
func Plan(ctx context.Context, s *spec.Spec, opt Options) (*Batch, error) {
	ropt := opt.Runner
	if ropt.RunsDir == "" {
		ropt.RunsDir = runner.DefaultRunsDir
	}
	runsRoot, err := filepath.Abs(ropt.RunsDir)
	if err != nil {
		return nil, fmt.Errorf("slurm: runs folder %s: %w", ropt.RunsDir, err)
	}
	ropt.RunsDir = runsRoot
	specPath, err := filepath.Abs(s.File)
	if err != nil {
		return nil, fmt.Errorf("slurm: spec %s: %w", s.File, err)
	}
	marlow, err := filepath.Abs(opt.Marlow)
	if err != nil || opt.Marlow == "" {
		return nil, fmt.Errorf("slurm: the marlow binary %q cannot be named absolutely (%v)", opt.Marlow, err)
	}
	wd := opt.WorkDir
	if wd == "" {
		if wd, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("slurm: working directory: %w", err)
		}
	}
	if wd, err = filepath.Abs(wd); err != nil {
		return nil, fmt.Errorf("slurm: working directory: %w", err)
	}
	out := opt.ReportOut
	if out == "" {
		out = filepath.Join("reports", s.Experiment)
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join(wd, out)
	}
	if opt.CPUsPerTask < 0 || opt.MaxParallel < 0 {
		return nil, fmt.Errorf("slurm: --cpus-per-task %d and --max-parallel %d must not be negative", opt.CPUsPerTask, opt.MaxParallel)
	}
	warn := opt.Warn
	if warn == 0 {
		warn = DefaultWarn
	}
	if opt.Time != "" {
		limit, err := ParseTime(opt.Time)
		if err != nil {
			return nil, fmt.Errorf("slurm: --time: %w", err)
		}
		// The warning must leave the task time to run at all.
		warn = min(warn, limit/2)
	}
	for _, a := range opt.SbatchArgs {
		if !strings.HasPrefix(a, "-") || strings.ContainsAny(a, "\n\r") {
			return nil, fmt.Errorf("slurm: --sbatch-arg %q is not one sbatch option (like --constraint=a100)", a)
		}
	}

	prepared, _, err := runner.Prepare(ctx, s, ropt)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(runsRoot, s.Experiment)
	b := &Batch{Experiment: s.Experiment, Root: root, Dir: filepath.Join(root, DirName)}
	b.Name, err = nextName(b.Dir)
	if err != nil {
		return nil, err
	}
	var damaged []string
	for _, p := range prepared {
		if p.Damaged != nil {
			damaged = append(damaged, fmt.Sprintf("run %s: %v", p.Run.ID, p.Damaged))
		}
	}
	if len(damaged) > 0 {
		return nil, fmt.Errorf("slurm: %d run folders do not match their manifests; nothing was submitted (rerun them with marlow run --redo, or move the folders away):\n  %s",
			len(damaged), strings.Join(damaged, "\n  "))
	}
	var ids []string
	cuda := false
	for _, p := range prepared {
		if p.Done {
			b.Done = append(b.Done, p.Run.ID)
			continue
		}
		b.Tasks = append(b.Tasks, Task{Index: len(b.Tasks), ID: p.Run.ID, Dir: p.Dir})
		ids = append(ids, p.Run.ID)
		cuda = cuda || p.Run.Config.Model.Device == "cuda"
	}
	gres, err := taskGres(opt.Gres, cuda)
	if err != nil {
		return nil, err
	}
	b.Script = Script{
		Experiment: s.Experiment, Submission: b.Name, Runs: ids,
		Marlow: marlow, Spec: specPath, RunsRoot: runsRoot, WorkDir: wd,
		Output:    filepath.Join(b.outputDir(), "%a.log"),
		Partition: opt.Partition, Account: opt.Account, QOS: opt.QOS, Time: opt.Time, Gres: gres, Mem: opt.Mem,
		CPUsPerTask: opt.CPUsPerTask, MaxParallel: opt.MaxParallel, SbatchArgs: opt.SbatchArgs,
		AllowDirty: ropt.AllowDirty, UnsafeCodeExec: ropt.UnsafeCodeExec,
	}
	if warn > 0 {
		b.Script.WarnSeconds = int(warn.Round(time.Second) / time.Second)
	}
	b.Report = ReportScript{
		Experiment: s.Experiment, Marlow: marlow, Spec: specPath, RunsRoot: runsRoot, Out: out, WorkDir: wd,
		Output:    filepath.Join(b.Dir, b.Name+"-report.log"),
		Partition: opt.Partition, Account: opt.Account, QOS: opt.QOS, Time: opt.Time, Mem: opt.Mem,
		SbatchArgs: opt.SbatchArgs,
	}
	return b, nil
}

// taskGres is the --gres of each array task. A task runs one run (marlow
// run --jobs 1), which marlow pins to the first GPU the task sees, so when
// a run to submit is on cuda a task asks for one GPU: gpu:1 unless gres
// says otherwise (a TYPE, or shards), and gres asking for more than one
// GPU is refused (the others would sit idle).
func taskGres(gres string, cuda bool) (string, error) {
	if !cuda {
		return gres, nil
	}
	if gres == "" {
		return "gpu:1", nil
	}
	if n := gresGPUs(gres); n > 1 {
		return "", fmt.Errorf("slurm: --gres %q asks for %d GPUs per task, but each task runs one run on one GPU (runs on cuda are pinned one per GPU): ask for gpu:1 (or gpu:TYPE:1), or leave --gres out", gres, n)
	}
	return gres, nil
}

// gresGPUs is the number of GPUs a --gres value asks for: the sum over its
// gpu entries (gpu, gpu:N, gpu:TYPE, gpu:TYPE:N; N defaults to 1).
func gresGPUs(gres string) int {
	n := 0
	for _, e := range strings.Split(gres, ",") {
		f := strings.Split(strings.TrimSpace(e), ":")
		if f[0] != "gpu" {
			continue
		}
		c := 1
		if len(f) > 1 {
			if v, err := strconv.Atoi(f[len(f)-1]); err == nil {
				c = v
			}
		}
		n += c
	}
	return n
}

// nextName numbers submissions in the order they were made: submit-001,
// submit-002, ... The scripts of earlier submissions stay, since their
// requeued tasks rerun them.
func nextName(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("slurm: %w", err)
	}
	n := 0
	for _, e := range ents {
		var k int
		if _, err := fmt.Sscanf(e.Name(), "submit-%d.sh", &k); err == nil && k > n {
			n = k
		}
	}
	return fmt.Sprintf("submit-%03d", n+1), nil
}

// Write creates the run folders with their job logs, the links Slurm
// writes each task's output through, the index map and both scripts.
func (b *Batch) Write() error {
	if err := os.MkdirAll(b.outputDir(), 0o755); err != nil {
		return fmt.Errorf("slurm: %w", err)
	}
	// the experiment folder ignores itself, as under marlow run, so run
	// folders inside the repository never make the tree dirty
	if err := runner.IgnoreRuns(filepath.Dir(b.Root), b.Experiment); err != nil {
		return fmt.Errorf("slurm: %w", err)
	}
	for _, t := range b.Tasks {
		if err := os.MkdirAll(t.Dir, 0o755); err != nil {
			return fmt.Errorf("slurm: run %s: %w", t.ID, err)
		}
		logPath := filepath.Join(t.Dir, runlog.JobLogFile)
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("slurm: run %s: %w", t.ID, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("slurm: run %s: %w", t.ID, err)
		}
		rel, err := filepath.Rel(b.outputDir(), logPath)
		if err != nil {
			return fmt.Errorf("slurm: run %s: %w", t.ID, err)
		}
		link := filepath.Join(b.outputDir(), fmt.Sprintf("%d.log", t.Index))
		if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("slurm: %w", err)
		}
		if err := os.Symlink(rel, link); err != nil {
			return fmt.Errorf("slurm: run %s: link its job log: %w", t.ID, err)
		}
	}
	// The script comes last: its name numbers the submission.
	files := []struct{ path, text string }{
		{b.MapPath(), MapText(b.Script.Runs)},
		{b.ReportPath(), b.Report.Text()},
		{b.ScriptPath(), b.Script.Text()},
	}
	for _, f := range files {
		if err := atomicfile.Write(f.path, []byte(f.text)); err != nil {
			return fmt.Errorf("slurm: %w", err)
		}
	}
	return nil
}

// Submit writes the batch and submits the array and its report job with
// sbatch --parsable, then stores the job ids in the submission record.
func (b *Batch) Submit(ctx context.Context) (*Record, error) {
	if len(b.Tasks) == 0 {
		return nil, fmt.Errorf("slurm: experiment %s: nothing to submit", b.Experiment)
	}
	if _, err := LookSbatch(); err != nil {
		return nil, err
	}
	if err := b.Write(); err != nil {
		return nil, err
	}
	array, err := sbatch(ctx, b.ScriptPath())
	if err != nil {
		return nil, fmt.Errorf("slurm: submit %s: %w", b.ScriptPath(), err)
	}
	rec := &Record{Experiment: b.Experiment, Submission: b.Name, ArrayJob: array, Runs: b.Script.Runs,
		Submitted: time.Now().UTC().Format(time.RFC3339)}
	report, err := sbatch(ctx, "--dependency=afterany:"+array, b.ReportPath())
	if err != nil {
		// Keep the record of the array, which is queued.
		_ = writeRecord(b.RecordPath(), rec)
		return nil, fmt.Errorf("slurm: array job %s is queued, but submitting its report job failed: %w", array, err)
	}
	rec.ReportJob = report
	if err := writeRecord(b.RecordPath(), rec); err != nil {
		return nil, err
	}
	return rec, nil
}

func writeRecord(path string, rec *Record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("slurm: %w", err)
	}
	if err := atomicfile.Write(path, append(data, '\n')); err != nil {
		return fmt.Errorf("slurm: %w", err)
	}
	return nil
}

// Records reads the submission records of an experiment's run root, oldest
// first. A root without submissions has none.
func Records(root string) ([]Record, error) {
	paths, err := filepath.Glob(filepath.Join(root, DirName, "submit-*.json"))
	if err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	sort.Strings(paths)
	var out []Record
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("slurm: %w", err)
		}
		var r Record
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("slurm: submission record %s: %w", p, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// sbatch runs sbatch --parsable with args and returns the job id.
func sbatch(ctx context.Context, args ...string) (string, error) {
	out, err := command(ctx, "sbatch", append([]string{"--parsable"}, args...)...)
	if err != nil {
		return "", err
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";") // "id;cluster" on federated clusters
	if id == "" || strings.ContainsAny(id, " \n") {
		return "", fmt.Errorf("sbatch printed %q, not a job id", out)
	}
	return id, nil
}

// command runs a Slurm client tool and returns its standard output; a
// failure carries its standard error.
func command(ctx context.Context, name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	c := exec.CommandContext(ctx, name, args...)
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}

// ParseTime parses a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH,
// D-HH:MM or D-HH:MM:SS) into a duration.
func ParseTime(v string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a Slurm time limit (D-HH:MM:SS, HH:MM:SS, MM:SS or minutes)", v)
	days := 0
	rest := v
	if d, r, ok := strings.Cut(v, "-"); ok {
		if _, err := fmt.Sscanf(d, "%d", &days); err != nil || days < 0 || fmt.Sprint(days) != d {
			return 0, bad
		}
		rest = r
	}
	parts := strings.Split(rest, ":")
	nums := make([]int, len(parts))
	for i, p := range parts {
		if _, err := fmt.Sscanf(p, "%d", &nums[i]); err != nil || nums[i] < 0 || len(p) == 0 || strings.TrimLeft(p, "0123456789") != "" {
			return 0, bad
		}
	}
	var h, m, sec int
	switch {
	case days > 0 || strings.Contains(v, "-"):
		switch len(nums) {
		case 1:
			h = nums[0]
		case 2:
			h, m = nums[0], nums[1]
		case 3:
			h, m, sec = nums[0], nums[1], nums[2]
		default:
			return 0, bad
		}
	default:
		switch len(nums) {
		case 1:
			m = nums[0]
		case 2:
			m, sec = nums[0], nums[1]
		case 3:
			h, m, sec = nums[0], nums[1], nums[2]
		default:
			return 0, bad
		}
	}
	return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second, nil
}
