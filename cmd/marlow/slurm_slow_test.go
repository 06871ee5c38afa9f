//go:build slow

// The Slurm acceptance tests: marlow slurm against a real cluster (the
// single-node one of .ci/slurm-cluster.sh in CI). They need sbatch and a
// node that answers; without them they are skipped, except under CI=true,
// where a missing cluster is a failure.

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/marlowlab/marlow/harness/runlog"
)

const (
	smokeSpecPath = "seeds/smoke.yaml"
	longSpecPath  = "cmd/marlow/testdata/slurm-long.yaml"
	longRun       = "sa-rl-s-synth-math-seed1"
)

var built struct {
	once sync.Once
	bin  string
	err  error
}

// needSlurm skips the test when no Slurm cluster answers, or fails it
// under CI=true.
func needSlurm(t *testing.T) {
	t.Helper()
	miss := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s (.ci/run check-slow starts the cluster with .ci/slurm-cluster.sh)", msg)
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("sbatch"); err != nil {
		miss("sbatch is not on PATH")
	}
	out, err := exec.Command("sinfo", "--noheader", "--Node", "--format=%T").CombinedOutput()
	if err != nil {
		miss("sinfo fails: %v: %s", err, bytes.TrimSpace(out))
	}
	if !regexp.MustCompile(`(?m)^(idle|mixed|allocated|completing)`).Match(out) {
		miss("no Slurm node is up (sinfo: %q)", strings.TrimSpace(string(out)))
	}
}

// repoRoot is the repository root, where the commands run.
func repoRoot(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// marlowBin builds the CLI once: Slurm's tasks run it.
func marlowBin(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "marlow-slurm-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.bin = filepath.Join(dir, "marlow")
		out, err := exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// marlow runs the CLI in the repository root.
func marlow(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(marlowBin(t), args...)
	cmd.Dir = repoRoot(t)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// mustMarlow runs the CLI and fails the test unless it exits 0.
func mustMarlow(t *testing.T, args ...string) string {
	t.Helper()
	t0 := time.Now()
	out, errOut, code := marlow(t, args...)
	if code != 0 {
		t.Fatalf("marlow %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errOut)
	}
	t.Logf("marlow %s: %s", strings.Join(args, " "), time.Since(t0).Round(time.Second))
	return out
}

// submitted reads the array and report job ids marlow slurm printed.
func submitted(t *testing.T, out string) (array, report string) {
	t.Helper()
	a := regexp.MustCompile(`submitted as array job (\S+) `).FindStringSubmatch(out)
	r := regexp.MustCompile(`report job (\S+) runs after`).FindStringSubmatch(out)
	if a == nil || r == nil {
		t.Fatalf("marlow slurm printed no job ids:\n%s", out)
	}
	return a[1], r[1]
}

func readManifest(t *testing.T, dir string) runlog.Manifest {
	t.Helper()
	m, err := runlog.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sameLogs checks that the committed Parquet files of the deterministic
// tables (all but timing) of every run of experiment under a (restricted
// to ids) are byte-identical to those under b.
func sameLogs(t *testing.T, a, b, experiment string, ids ...string) {
	t.Helper()
	if len(ids) == 0 {
		ents, err := os.ReadDir(filepath.Join(a, experiment))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() && e.Name() != "slurm" {
				ids = append(ids, e.Name())
			}
		}
	}
	if len(ids) == 0 {
		t.Fatalf("no runs of %s under %s", experiment, a)
	}
	files := 0
	for _, id := range ids {
		for _, tb := range []string{"steps", "evals", "samples"} {
			da, db := filepath.Join(a, experiment, id, tb), filepath.Join(b, experiment, id, tb)
			fa, fb := parquetNames(t, da), parquetNames(t, db)
			if strings.Join(fa, ",") != strings.Join(fb, ",") {
				t.Errorf("%s/%s: segments %v vs %v", id, tb, fa, fb)
				continue
			}
			for _, f := range fa {
				x, err1 := os.ReadFile(filepath.Join(da, f))
				y, err2 := os.ReadFile(filepath.Join(db, f))
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				if !bytes.Equal(x, y) {
					t.Errorf("%s/%s/%s differs (%d vs %d bytes)", id, tb, f, len(x), len(y))
				}
				files++
			}
		}
	}
	t.Logf("%d runs, %d Parquet files byte-identical (steps, evals, samples)", len(ids), files)
}

func parquetNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".parquet") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// jobState asks scontrol for a job's state (slurmctld keeps ended jobs for
// MinJobAge).
func jobState(t *testing.T, id string) string {
	t.Helper()
	out, err := exec.Command("scontrol", "--oneliner", "show", "job", id).CombinedOutput()
	if err != nil {
		t.Fatalf("scontrol show job %s: %v: %s", id, err, out)
	}
	m := regexp.MustCompile(`JobState=(\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("scontrol show job %s: no JobState in %s", id, out)
	}
	return string(m[1])
}

// queueState is the state of an array task in the queue, "" when gone.
func queueState(t *testing.T, array, task string) string {
	t.Helper()
	out, err := exec.Command("squeue", "--noheader", "--all", "--array", "--format=%F %K %T").Output()
	if err != nil {
		t.Fatalf("squeue: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == array && f[1] == task {
			return f[2]
		}
	}
	return ""
}

// waitGone waits until no job of array or report is queued.
func waitGone(t *testing.T, timeout time.Duration, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		out, err := exec.Command("squeue", "--noheader", "--all", "--format=%F").Output()
		if err != nil {
			t.Fatalf("squeue: %v", err)
		}
		busy := false
		for _, f := range strings.Fields(string(out)) {
			for _, id := range ids {
				busy = busy || f == id
			}
		}
		if !busy {
			return
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("jobs %v still queued after %s", ids, timeout)
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readFiles reads every file under dir, keyed by relative path.
func readFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var rebuildLine = regexp.MustCompile(`(?m)^marlow report .*$`)

// TestSlurmSmoke: marlow slurm seeds/smoke.yaml --wait completes and its
// logs are byte-identical to a local marlow run; Slurm's job, index and
// node are in each manifest; a second submission has nothing to do; and
// the runs split into two archives report byte-identically to one archive.
func TestSlurmSmoke(t *testing.T) {
	needSlurm(t)
	tmp := t.TempDir()
	local, cluster := filepath.Join(tmp, "local"), filepath.Join(tmp, "cluster")
	mustMarlow(t, "run", smokeSpecPath, "--runs", local, "--allow-dirty", "--jobs", "2", "--progress", "none")

	dry := mustMarlow(t, "slurm", smokeSpecPath, "--runs", cluster, "--allow-dirty", "--dry-run", "--mem", "1G")
	if !strings.Contains(dry, "#SBATCH --array=0-21\n") || !strings.Contains(dry, "--dependency=afterany") {
		t.Errorf("--dry-run printed:\n%s", dry)
	}
	if _, err := os.Stat(cluster); err == nil {
		t.Errorf("--dry-run wrote %s", cluster)
	}
	t0 := time.Now()
	out := mustMarlow(t, "slurm", smokeSpecPath, "--runs", cluster, "--allow-dirty", "--wait", "--poll", "2s",
		"--cpus-per-task", "1", "--mem", "1G", "--report-out", filepath.Join(tmp, "report"))
	t.Logf("smoke through Slurm: %s", time.Since(t0).Round(time.Second))
	array, report := submitted(t, out)
	if !strings.Contains(out, "watch: marlow status") || !strings.Contains(out, "report job "+report+": completed") {
		t.Errorf("marlow slurm output:\n%s", out)
	}
	sameLogs(t, local, cluster, "smoke")

	mapText, err := os.ReadFile(filepath.Join(cluster, "smoke", "slurm", "submit-001.runs"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(mapText)), "\n")
	if len(lines) != 22 {
		t.Errorf("index map has %d lines, want the 22 smoke runs", len(lines))
	}
	for _, line := range lines {
		idx, id, _ := strings.Cut(line, "\t")
		m := readManifest(t, filepath.Join(cluster, "smoke", id))
		sl := m.Provenance.Slurm
		if m.Status != runlog.StatusDone || sl == nil || sl.ArrayJobID != array || sl.ArrayTaskID != idx || sl.Node == "" || sl.JobID == "" {
			t.Errorf("run %s: status %s, Slurm provenance %+v; want done, array %s index %s and a node", id, m.Status, sl, array, idx)
		}
		if lm := readManifest(t, filepath.Join(local, "smoke", id)); lm.Provenance.Slurm != nil || lm.ConfigHash != m.ConfigHash {
			t.Errorf("run %s: local manifest has Slurm provenance %+v or another config hash", id, lm.Provenance.Slurm)
		}
		if log, err := os.ReadFile(filepath.Join(cluster, "smoke", id, runlog.JobLogFile)); err != nil || !bytes.Contains(log, []byte("== marlow slurm: run "+id)) {
			t.Errorf("run %s: job log %q (%v)", id, log, err)
		}
	}
	for _, f := range []string{"README.md", "summary.parquet"} {
		if _, err := os.Stat(filepath.Join(tmp, "report", f)); err != nil {
			t.Errorf("the report job wrote no %s: %v", f, err)
		}
	}
	st := mustMarlow(t, "status", smokeSpecPath, "--runs", cluster)
	if !strings.Contains(st, "22 runs: done 22") {
		t.Errorf("status after the array:\n%s", st)
	}
	again := mustMarlow(t, "slurm", smokeSpecPath, "--runs", cluster, "--allow-dirty")
	if !strings.Contains(again, "nothing to submit") {
		t.Errorf("resubmitting a done experiment:\n%s", again)
	}

	// Report merging: two archives of half the runs each against one.
	ents, err := os.ReadDir(filepath.Join(cluster, "smoke"))
	if err != nil {
		t.Fatal(err)
	}
	halves := [2]string{filepath.Join(tmp, "half-a"), filepath.Join(tmp, "half-b")}
	n := 0
	for _, e := range ents {
		if e.IsDir() && e.Name() != "slurm" {
			copyDir(t, filepath.Join(cluster, "smoke", e.Name()), filepath.Join(halves[n%2], "smoke", e.Name()))
			n++
		}
	}
	all, a, b := filepath.Join(tmp, "all.tar.zst"), filepath.Join(tmp, "a.tar.zst"), filepath.Join(tmp, "b.tar.zst")
	mustMarlow(t, "archive", cluster, all)
	mustMarlow(t, "archive", halves[0], a)
	mustMarlow(t, "archive", halves[1], b)
	out1, out2 := filepath.Join(tmp, "merged"), filepath.Join(tmp, "single")
	mustMarlow(t, "report", a, b, "--out", out1)
	mustMarlow(t, "report", all, "--out", out1+"-2")
	if err := os.Rename(out1+"-2", out2); err != nil {
		t.Fatal(err)
	}
	merged, single := readFiles(t, out1), readFiles(t, out2)
	if len(merged) != len(single) || len(merged) == 0 {
		t.Fatalf("merged report has %d files, single %d", len(merged), len(single))
	}
	for p, want := range single {
		got := merged[p]
		if p == "README.md" {
			// The rebuild command names the sources and the folder.
			got, want = rebuildLine.ReplaceAll(got, nil), rebuildLine.ReplaceAll(want, nil)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("report file %s differs between two archives and one", p)
		}
	}
	if _, errOut, code := marlow(t, "report", all, local, "--out", filepath.Join(tmp, "clash")); code == 0 || !strings.Contains(errOut, "different bytes") {
		t.Errorf("report of the Slurm and the local runs together (same runs, other manifests): exit %d, %s", code, errOut)
	}
}

// longReference runs the long run locally once: the logs a requeued or
// time-limited Slurm task must reproduce.
var longRef struct {
	once sync.Once
	dir  string
}

func longReference(t *testing.T) string {
	t.Helper()
	longRef.once.Do(func() {
		dir, err := os.MkdirTemp("", "marlow-slurm-long-")
		if err != nil {
			t.Fatal(err)
		}
		mustMarlow(t, "run", longSpecPath, "--runs", dir, "--only", longRun, "--allow-dirty", "--progress", "none")
		longRef.dir = dir
	})
	if longRef.dir == "" {
		t.Fatal("the long reference run failed")
	}
	return longRef.dir
}

// TestSlurmPreemption: a task requeued while running resumes from its
// checkpoint, and one stopped by its time limit finishes when submitted
// again; both end with the logs of an uninterrupted local run.
func TestSlurmPreemption(t *testing.T) {
	needSlurm(t)
	ref := longReference(t)
	t.Cleanup(func() { os.RemoveAll(ref) }) // after the parallel subtests
	total := readManifest(t, filepath.Join(ref, "slurm-long", longRun)).TotalSteps

	t.Run("requeue", func(t *testing.T) {
		t.Parallel()
		runs := t.TempDir()
		dir := filepath.Join(runs, "slurm-long", longRun)
		out := mustMarlow(t, "slurm", longSpecPath, "--runs", runs, "--only", longRun, "--allow-dirty", "--mem", "1G", "--report-out", filepath.Join(runs, "report"))
		array, report := submitted(t, out)
		task := array + "_0"
		// Requeue once a quarter of the steps are committed.
		deadline := time.Now().Add(5 * time.Minute)
		for {
			if m, err := runlog.ReadManifest(dir); err == nil && m.LastStep >= total/4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the task committed no quarter of its steps in 5 minutes")
			}
			time.Sleep(200 * time.Millisecond)
		}
		if st := mustMarlow(t, "status", longSpecPath, "--runs", runs, "--only", longRun); !regexp.MustCompile(`running\s+running`).MatchString(st) {
			t.Errorf("status of the running task:\n%s", st)
		}
		if out, err := exec.Command("scontrol", "requeue", task).CombinedOutput(); err != nil {
			t.Fatalf("scontrol requeue %s: %v: %s", task, err, out)
		}
		// Slurm holds a requeued job back (BeginTime, about two minutes);
		// once status has shown it requeued, release it in a few seconds:
		// a task started within a second or so of its requeue is killed
		// by slurmd ("Job credential revoked"), as the old credential of
		// the same job was revoked at the requeue.
		shown := false
		for deadline := time.Now().Add(time.Minute); ; {
			if s := queueState(t, array, "0"); s == "PENDING" {
				st := mustMarlow(t, "status", longSpecPath, "--runs", runs, "--only", longRun)
				if !strings.Contains(st, "requeued (restart 1)") {
					t.Errorf("status of the requeued task:\n%s", st)
				}
				shown = true
				if out, err := exec.Command("scontrol", "update", "JobId="+task, "StartTime=now+3").CombinedOutput(); err != nil {
					t.Fatalf("scontrol update: %v: %s", err, out)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the requeued task never became pending again")
			}
			time.Sleep(200 * time.Millisecond)
		}
		waitGone(t, 8*time.Minute, array, report)
		m := readManifest(t, dir)
		if !shown || m.Status != runlog.StatusDone || m.Provenance.Slurm == nil || m.Provenance.Slurm.RestartCount != "1" {
			t.Fatalf("after the requeue: status %s, Slurm provenance %+v; want done on restart 1", m.Status, m.Provenance.Slurm)
		}
		log, _ := os.ReadFile(filepath.Join(dir, runlog.JobLogFile))
		if !bytes.Contains(log, []byte("DUE TO JOB REQUEUE")) || !bytes.Contains(log, []byte("restart 1")) {
			t.Errorf("job log of the requeued run:\n%s", log)
		}
		sameLogs(t, ref, runs, "slurm-long", longRun)
	})

	// held submits the run with --wait, waits until a quarter of its steps
	// are committed, calls hold with the array job id, and returns what
	// marlow slurm --wait printed and its exit status.
	held := func(t *testing.T, runs string, hold func(array string), extra ...string) (stdout, errOut string, code int) {
		dir := filepath.Join(runs, "slurm-long", longRun)
		done := make(chan struct{})
		go func() {
			defer close(done)
			args := append([]string{"slurm", longSpecPath, "--runs", runs, "--only", longRun, "--allow-dirty", "--mem", "1G",
				"--wait", "--poll", "2s", "--report-out", filepath.Join(runs, "report")}, extra...)
			stdout, errOut, code = marlow(t, args...)
		}()
		array := ""
		for deadline := time.Now().Add(5 * time.Minute); ; {
			if m, err := runlog.ReadManifest(dir); err == nil && m.LastStep >= total/4 {
				if recs, _ := filepath.Glob(filepath.Join(runs, "slurm-long", "slurm", "submit-*.json")); len(recs) > 0 {
					var rec struct {
						ArrayJob string `json:"array_job"`
					}
					data, _ := os.ReadFile(recs[len(recs)-1])
					if json.Unmarshal(data, &rec) == nil && rec.ArrayJob != "" {
						array = rec.ArrayJob
						break
					}
				}
			}
			select {
			case <-done:
				t.Fatalf("the task ended before a quarter of its steps:\n%s\n%s", stdout, errOut)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("the task committed no quarter of its steps in 5 minutes")
			}
			time.Sleep(100 * time.Millisecond)
		}
		hold(array)
		<-done
		return stdout, errOut, code
	}
	// stopped checks that the first submission stopped part way, then
	// submits again and checks the run ends with the reference's logs.
	resubmit := func(t *testing.T, runs, logWant string, stdout, errOut string, code int) {
		dir := filepath.Join(runs, "slurm-long", longRun)
		m := readManifest(t, dir)
		if code == 0 || !strings.Contains(errOut, "1 runs did not finish") || m.LastStep <= 0 || m.LastStep >= total {
			t.Fatalf("exit %d\n%s\n%s\nmanifest %s at step %d of %d; want a run stopped part way", code, stdout, errOut, m.Status, m.LastStep, total)
		}
		log, _ := os.ReadFile(filepath.Join(dir, runlog.JobLogFile))
		if !bytes.Contains(log, []byte(logWant)) {
			t.Errorf("the job log lacks %q:\n%s", logWant, log)
		}
		t.Logf("stopped after step %d of %d (manifest %s)", m.LastStep, total, m.Status)
		mustMarlow(t, "slurm", longSpecPath, "--runs", runs, "--only", longRun, "--allow-dirty", "--mem", "1G", "--wait", "--poll", "2s",
			"--report-out", filepath.Join(runs, "report"))
		if m := readManifest(t, dir); m.Status != runlog.StatusDone {
			t.Fatalf("after resubmission: %s", m.Status)
		}
		if _, err := os.Stat(filepath.Join(runs, "slurm-long", "slurm", "submit-002.sh")); err != nil {
			t.Errorf("the resubmission wrote no second script: %v", err)
		}
		sameLogs(t, ref, runs, "slurm-long", longRun)
	}

	t.Run("warning signal", func(t *testing.T) {
		t.Parallel()
		runs := t.TempDir()
		// The warning before the time limit, as Slurm sends it: USR1 to
		// the batch shell alone.
		stdout, errOut, code := held(t, runs, func(array string) {
			if out, err := exec.Command("scancel", "--batch", "--signal=USR1", array+"_0").CombinedOutput(); err != nil {
				t.Fatalf("scancel --signal=USR1: %v: %s", err, out)
			}
		})
		if m := readManifest(t, filepath.Join(runs, "slurm-long", longRun)); m.Status != runlog.StatusInterrupted {
			t.Errorf("after the warning the run is %s, want interrupted", m.Status)
		}
		resubmit(t, runs, "time limit near (USR1)", stdout, errOut, code)
	})

	t.Run("time limit", func(t *testing.T) {
		t.Parallel()
		runs := t.TempDir()
		// However fast this machine, the run must outlast its one-minute
		// limit: once a quarter of its steps are committed, marlow is
		// stopped (SIGSTOP) until the limit, where Slurm resumes it
		// (SIGCONT) and sends SIGTERM. No warning signal: this is the
		// limit itself.
		stdout, errOut, code := held(t, runs, func(string) {
			pid := marlowPID(t, runs)
			if pid == 0 {
				t.Fatal("no marlow process of the task found")
			}
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatalf("stop marlow (pid %d): %v", pid, err)
			}
		}, "--time", "1", "--warn", "0")
		resubmit(t, runs, "DUE TO TIME LIMIT", stdout, errOut, code)
	})
}

// marlowPID finds the marlow run process of a task on this (single) node:
// the built binary running with --runs runs. 0 when it is not running.
func marlowPID(t *testing.T, runs string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
		if len(args) > 1 && args[0] == marlowBin(t) && args[1] == "run" && slices.Contains(args, runs) {
			return pid
		}
	}
	return 0
}

// TestSlurmFailingRun: a run whose checkpoint is corrupt fails its own
// array task only, status shows it failed, and the report job still
// reports the run that finished.
func TestSlurmFailingRun(t *testing.T) {
	needSlurm(t)
	runs, out := t.TempDir(), filepath.Join(t.TempDir(), "report")
	const bad, good = "voting-ip-s-synth-math-seed1", "voting-sp-s-synth-math-seed1"
	mustMarlow(t, "run", smokeSpecPath, "--runs", runs, "--only", bad, "--allow-dirty", "--progress", "none")
	dir := filepath.Join(runs, "smoke", bad)
	// Make the finished run one to resume from a corrupt checkpoint, as if
	// it had been written corrupt: every byte of its files flipped, and the
	// manifest's inventory updated to match, so that the folder is intact
	// and the run fails when it loads the checkpoint.
	n := 0
	sums := map[string]string{}
	filepath.WalkDir(filepath.Join(dir, "ckpt"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i := range data {
			data[i] ^= 0xff
		}
		n++
		rel, _ := filepath.Rel(dir, p)
		sum := sha256.Sum256(data)
		sums[filepath.ToSlash(rel)] = hex.EncodeToString(sum[:])
		return os.WriteFile(p, data, 0o644)
	})
	rewriteManifest(t, dir, func(m *runlog.Manifest) {
		m.Status = runlog.StatusInterrupted
		if m.Inventory == nil {
			return
		}
		for i, f := range m.Inventory.Checkpoint {
			if h, ok := sums[f.Path]; ok {
				m.Inventory.Checkpoint[i].SHA256 = h
			}
		}
	})
	if n == 0 {
		t.Fatal("the run has no checkpoint files to damage")
	}

	stdout, errOut, code := marlow(t, "slurm", smokeSpecPath, "--runs", runs, "--only", "voting-[is]p-s-synth-math-seed1", "--allow-dirty",
		"--mem", "1G", "--wait", "--poll", "2s", "--report-out", out)
	if code == 0 || !strings.Contains(errOut, bad+" (failed)") || strings.Contains(errOut, good) {
		t.Fatalf("exit %d\n%s\n%s\nwant a failure naming %s only", code, stdout, errOut, bad)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, runlog.JobLogFile)); !bytes.Contains(log, []byte("ckpt")) && !bytes.Contains(log, []byte("checkpoint")) {
		t.Errorf("the failed run's job log does not show the checkpoint failing:\n%s", log)
	}
	array, _ := submitted(t, stdout)
	mapText, err := os.ReadFile(filepath.Join(runs, "smoke", "slurm", "submit-001.runs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(mapText)), "\n") {
		idx, id, _ := strings.Cut(line, "\t")
		want := "COMPLETED"
		if id == bad {
			want = "FAILED"
		}
		if got := jobState(t, array+"_"+idx); got != want {
			t.Errorf("array task %s (%s): %s, want %s", idx, id, got, want)
		}
	}
	st := mustMarlow(t, "status", smokeSpecPath, "--runs", runs, "--only", "voting-[is]p-s-synth-math-seed1")
	if !regexp.MustCompile(bad+`\s+ip\s+failed`).MatchString(st) || !regexp.MustCompile(good+`\s+sp\s+done`).MatchString(st) {
		t.Errorf("status:\n%s", st)
	}
	readme, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil || !bytes.Contains(readme, []byte(good)) {
		t.Errorf("the report job's README does not report %s (%v)", good, err)
	}
	if !strings.Contains(stdout, ": completed") {
		t.Errorf("the report job did not complete:\n%s", stdout)
	}
}

// rewriteManifest edits a run's manifest in place.
func rewriteManifest(t *testing.T, dir string, edit func(*runlog.Manifest)) {
	t.Helper()
	m := readManifest(t, dir)
	edit(&m)
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, runlog.ManifestFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}
