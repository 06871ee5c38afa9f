package slurm

import (
	"fmt"
	"strings"
)

// Script holds what a batch script says: the sbatch directives and the
// command of every array task. Paths must be absolute: the tasks run on
// other nodes, reading the shared filesystem.
type Script struct {
	Experiment string
	Submission string // name of the submission (e.g. submit-001)
	// Runs maps array index i to the id of the run it executes.
	Runs []string

	Marlow   string // the marlow binary the tasks run
	Spec     string // the spec file
	RunsRoot string // the root of run folders (marlow run --runs)
	WorkDir  string // the tasks' working directory
	Output   string // sbatch --output pattern (holds %a)

	Partition, Account, QOS, Time, Gres, Mem string
	CPUsPerTask                              int
	MaxParallel                              int // array throttle (%K); 0: no throttle
	WarnSeconds                              int // USR1 this many seconds before the time limit
	SbatchArgs                               []string

	AllowDirty, UnsafeCodeExec bool
}

// ReportScript holds what the report job's script says.
type ReportScript struct {
	Experiment string
	Marlow     string
	Spec       string // the spec file
	RunsRoot   string // the root of run folders (marlow report --runs)
	Out        string // the report folder
	WorkDir    string
	Output     string

	Partition, Account, QOS, Time, Mem string
	SbatchArgs                         []string
}

// quote returns s as one single-quoted shell word.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Array is the --array value: 0-(n-1), throttled to max tasks at once.
func Array(n, max int) string {
	a := "0"
	if n > 1 {
		a = fmt.Sprintf("0-%d", n-1)
	}
	if max > 0 && max < n {
		a += fmt.Sprintf("%%%d", max)
	}
	return a
}

// directives returns the #SBATCH lines shared by both scripts.
func directives(b *strings.Builder, partition, account, qos, tlimit, gres, mem string, cpus int, workDir string) {
	d := func(k, v string) {
		if v != "" {
			fmt.Fprintf(b, "#SBATCH --%s=%s\n", k, v)
		}
	}
	d("chdir", workDir)
	d("partition", partition)
	d("account", account)
	d("qos", qos)
	d("time", tlimit)
	d("gres", gres)
	if cpus > 0 {
		d("cpus-per-task", fmt.Sprint(cpus))
	}
	d("mem", mem)
}

// Text is the batch script of the job array. Each task finds its run id
// from SLURM_ARRAY_TASK_ID, runs `marlow run SPEC --only ID` with the
// absolute runs root, and turns the warning signal (USR1, sent before the
// time limit) into the SIGTERM on which marlow finishes the current step,
// commits it and marks the run interrupted. A TERM from Slurm itself
// (scancel, requeue, preemption, time limit) reaches marlow directly; the
// script only keeps waiting, so marlow is never signalled twice (a second
// signal kills it). A requeued task reruns the script from the top and
// marlow resumes from the checkpoint.
func (s Script) Text() string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	fmt.Fprintf(&b, "# marlow slurm: experiment %s, submission %s, %d runs (one array task each).\n", s.Experiment, s.Submission, len(s.Runs))
	fmt.Fprintf(&b, "# The array index -> run id map is the case below, also written to %s.runs.\n", s.Submission)
	fmt.Fprintf(&b, "#SBATCH --job-name=marlow-%s\n", s.Experiment)
	fmt.Fprintf(&b, "#SBATCH --array=%s\n", Array(len(s.Runs), s.MaxParallel))
	b.WriteString("#SBATCH --requeue\n")
	b.WriteString("#SBATCH --open-mode=append\n")
	fmt.Fprintf(&b, "#SBATCH --output=%s\n", s.Output)
	if s.WarnSeconds > 0 {
		fmt.Fprintf(&b, "#SBATCH --signal=B:USR1@%d\n", s.WarnSeconds)
	}
	directives(&b, s.Partition, s.Account, s.QOS, s.Time, s.Gres, s.Mem, s.CPUsPerTask, s.WorkDir)
	for _, a := range s.SbatchArgs {
		fmt.Fprintf(&b, "#SBATCH %s\n", a)
	}
	b.WriteString("set -u\n\n")
	b.WriteString("case \"${SLURM_ARRAY_TASK_ID:-}\" in\n")
	for i, id := range s.Runs {
		fmt.Fprintf(&b, "%d) run=%s ;;\n", i, quote(id))
	}
	b.WriteString("*)\n\techo \"marlow slurm: array index '${SLURM_ARRAY_TASK_ID:-}' is not in the map of this script\" >&2\n\texit 2\n\t;;\nesac\n\n")
	b.WriteString(`echo "== marlow slurm: run $run: job ${SLURM_JOB_ID:-?} (array ${SLURM_ARRAY_JOB_ID:-?}_${SLURM_ARRAY_TASK_ID}) on ${SLURMD_NODENAME:-?}, restart ${SLURM_RESTART_COUNT:-0}, $(date -u +%Y-%m-%dT%H:%M:%SZ)"` + "\n")
	b.WriteString(`child=
warn() {
	echo "== marlow slurm: run $run: time limit near (USR1): marlow commits the current step and stops"
	[ -n "$child" ] && kill -TERM "$child" 2>/dev/null
}
trap warn USR1
trap 'echo "== marlow slurm: run $run: TERM from Slurm: marlow commits the current step and stops"' TERM
`)
	args := []string{quote(s.Marlow), "run", quote(s.Spec), "--runs", quote(s.RunsRoot), "--only", `"$run"`,
		"--jobs", "1", "--threads", `"${SLURM_CPUS_PER_TASK:-1}"`, "--progress", "lines"}
	if s.AllowDirty {
		args = append(args, "--allow-dirty")
	}
	if s.UnsafeCodeExec {
		args = append(args, "--unsafe-code-exec")
	}
	b.WriteString(strings.Join(args, " ") + " &\n")
	b.WriteString(`child=$!
# wait returns early when a trapped signal arrives; wait again until marlow ends.
while :; do
	wait "$child"
	rc=$?
	kill -0 "$child" 2>/dev/null || break
done
echo "== marlow slurm: run $run: marlow exited with status $rc, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
exit "$rc"
`)
	return b.String()
}

// Text is the report job's script: `marlow report SPEC --partial` over the
// runs root. It is submitted with --dependency=afterany on the array, so it
// runs once every task has ended, whatever their outcome, and reports the
// runs that finished (listing at its top those that did not).
func (r ReportScript) Text() string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	fmt.Fprintf(&b, "# marlow slurm: the report of experiment %s, run after its job array ends.\n", r.Experiment)
	fmt.Fprintf(&b, "#SBATCH --job-name=marlow-%s-report\n", r.Experiment)
	b.WriteString("#SBATCH --open-mode=append\n")
	fmt.Fprintf(&b, "#SBATCH --output=%s\n", r.Output)
	directives(&b, r.Partition, r.Account, r.QOS, r.Time, "", r.Mem, 1, r.WorkDir)
	for _, a := range r.SbatchArgs {
		fmt.Fprintf(&b, "#SBATCH %s\n", a)
	}
	b.WriteString("set -u\n")
	b.WriteString(`echo "== marlow slurm: report job ${SLURM_JOB_ID:-?} on ${SLURMD_NODENAME:-?}, $(date -u +%Y-%m-%dT%H:%M:%SZ)"` + "\n")
	fmt.Fprintf(&b, "exec %s report %s --runs %s --partial --out %s\n", quote(r.Marlow), quote(r.Spec), quote(r.RunsRoot), quote(r.Out))
	return b.String()
}

// MapText is the index map written next to the script: one line per array
// task, "index<TAB>run-id", in index order.
func MapText(runs []string) string {
	var b strings.Builder
	for i, id := range runs {
		fmt.Fprintf(&b, "%d\t%s\n", i, id)
	}
	return b.String()
}

// ParseMap reads a map written by MapText.
func ParseMap(text string) ([]string, error) {
	var runs []string
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if line == "" && n == 0 {
			continue
		}
		idx, id, ok := strings.Cut(line, "\t")
		if !ok || id == "" || idx != fmt.Sprint(len(runs)) {
			return nil, fmt.Errorf("line %d: %q is not \"%d<TAB>run-id\"", n+1, line, len(runs))
		}
		runs = append(runs, id)
	}
	return runs, nil
}
