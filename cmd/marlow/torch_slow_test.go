//go:build slow

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marlowlab/marlow/harness/engine/torch/torchtest"
	"github.com/marlowlab/marlow/harness/runlog"
)

// TestTorchSmoke runs seeds/smoke.yaml with every model on the torch engine
// (cpu, fp32) through the CLI: all runs finish and the report builds; a
// rerun of some runs gives byte-identical Parquet logs; killing the torch
// server in the middle of a run marks the run failed with the server's
// stderr tail in its error, and the next invocation resumes it from its
// last checkpoint to the same bytes as the uninterrupted run; an injected
// out-of-memory fails a run with a clear error, and the run resumes after
// its budgets are lowered (torchOutOfMemoryResume).
func TestTorchSmoke(t *testing.T) {
	py := torchtest.Python(t, "torch", "transformers", "peft", "safetensors", "tokenizers", "numpy", "jinja2")
	specPath := torchSmokeSpec(t, py)
	runs := t.TempDir()
	t0 := time.Now()
	if _, stderr, code := runCLI(t, nil, "run", specPath, "--runs", runs, "--jobs", "2", "--allow-dirty", "--progress", "none"); code != 0 {
		t.Fatalf("torch smoke run: exit %d\n%s", code, stderr)
	}
	t.Logf("torch smoke runs took %v", time.Since(t0).Round(time.Second))
	manifests, _ := filepath.Glob(filepath.Join(runs, "smoke", "*", "manifest.json"))
	if len(manifests) < 20 {
		t.Fatalf("%d run folders, want every run of the smoke plan", len(manifests))
	}
	for _, p := range manifests {
		if m, err := runlog.ReadManifest(filepath.Dir(p)); err != nil || m.Status != runlog.StatusDone {
			t.Fatalf("%s: %v %v", p, m.Status, err)
		}
	}
	m, err := runlog.ReadManifest(filepath.Dir(manifests[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"torch/", "transformers/", "peft/", "cpu", "float32"} {
		if !strings.Contains(m.EngineVersion, want) {
			t.Errorf("manifest engine version %q lacks %q", m.EngineVersion, want)
		}
	}
	rep := t.TempDir()
	if out, stderr, code := runCLI(t, nil, "report", filepath.Join(runs, "smoke"), "--out", rep); code != 0 {
		t.Fatalf("report: exit %d\n%s%s", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(rep, "README.md")); err != nil {
		t.Fatalf("report: %v", err)
	}

	// Rerun: the same bytes.
	const subset = "voting-*-synth-math-seed1"
	again := t.TempDir()
	if _, stderr, code := runCLI(t, nil, "run", specPath, "--runs", again, "--only", subset, "--jobs", "2", "--allow-dirty", "--progress", "none"); code != 0 {
		t.Fatalf("rerun: exit %d\n%s", code, stderr)
	}
	sameParquet(t, runs, again, subset)

	// The server killed mid-run: the run fails with the server's stderr,
	// then resumes to the same bytes.
	const id = "orch-workers-ip-s-synth-code-seed1"
	killed := t.TempDir()
	dir := filepath.Join(killed, "smoke", id)
	server := killServerAfterStep1(t, dir, 10*time.Minute, "run", specPath, "--runs", killed, "--only", id, "--jobs", "1", "--threads", "1", "--allow-dirty", "--progress", "none")
	m, err = runlog.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != runlog.StatusFailed && m.Status != runlog.StatusInterrupted {
		t.Fatalf("after the server was killed the run is %s, want failed or interrupted", m.Status)
	}
	for _, want := range []string{"server died", "signal: killed"} {
		if !strings.Contains(m.Error, want) {
			t.Errorf("run error lacks %q: %s", want, m.Error)
		}
	}
	if !strings.Contains(m.Error, "stderr") {
		t.Errorf("run error quotes no stderr: %s", m.Error)
	}
	t.Logf("killed server %d after step %d; run error: %s", server, m.LastStep, m.Error)
	if _, stderr, code := runCLI(t, nil, "run", specPath, "--runs", killed, "--only", id, "--jobs", "1", "--threads", "1", "--allow-dirty", "--progress", "none"); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	sameParquet(t, runs, killed, id)

	torchOutOfMemoryResume(t, specPath, runs)
	torchSlotsSmoke(t, specPath, runs, subset)
}

// torchSlotsSmoke runs the subset of the smoke plan with gen_backend: slots
// twice: the two are byte-identical, and against the reference backend's
// runs under ref the completions are compared turn by turn; the accuracy
// figures of every validation agree within the episodes whose turns differ
// (none, on the CPU in fp32: the slot backend's tokens equal the
// reference's wherever their logits do not straddle a CDF boundary).
func torchSlotsSmoke(t *testing.T, specPath, ref, subset string) {
	t.Helper()
	raw, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	slots := strings.ReplaceAll(string(raw), "    device: cpu\n", "    device: cpu\n    gen_backend: slots\n")
	slotsPath := filepath.Join(filepath.Dir(specPath), "smoke-torch-slots.yaml")
	if err := os.WriteFile(slotsPath, []byte(slots), 0o644); err != nil {
		t.Fatal(err)
	}
	first, second := t.TempDir(), t.TempDir()
	for _, runs := range []string{first, second} {
		if out, stderr, code := runCLI(t, nil, "run", slotsPath, "--runs", runs, "--only", subset, "--jobs", "2", "--allow-dirty", "--progress", "none"); code != 0 {
			t.Fatalf("smoke with gen_backend slots: exit %d\n%s%s", code, out, stderr)
		}
	}
	sameParquet(t, first, second, subset)
	dirs, _ := filepath.Glob(filepath.Join(first, "smoke", subset))
	for _, d := range dirs {
		id := filepath.Base(d)
		s, err := runlog.ReadRun(d)
		if err != nil {
			t.Fatal(err)
		}
		r, err := runlog.ReadRun(filepath.Join(ref, "smoke", id))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Samples) != len(r.Samples) || len(s.Evals) != len(r.Evals) {
			t.Fatalf("%s: slots wrote %d samples and %d evals, reference %d and %d", id, len(s.Samples), len(s.Evals), len(r.Samples), len(r.Evals))
		}
		// episodes (step, problem, rollout) of validation whose turns differ
		differ := map[int64]map[string]bool{}
		turns := 0
		for i := range s.Samples {
			a, b := s.Samples[i], r.Samples[i]
			if a.Step != b.Step || a.ProblemID != b.ProblemID || a.Rollout != b.Rollout || a.Agent != b.Agent {
				t.Fatalf("%s: sample %d is %d/%s/%d/%s under slots, %d/%s/%d/%s under reference", id, i, a.Step, a.ProblemID, a.Rollout, a.Agent, b.Step, b.ProblemID, b.Rollout, b.Agent)
			}
			if a.Completion != b.Completion {
				turns++
				if a.Split == "val" {
					if differ[a.Step] == nil {
						differ[a.Step] = map[string]bool{}
					}
					differ[a.Step][fmt.Sprintf("%s/%s/%d", a.Workflow, a.ProblemID, a.Rollout)] = true
				}
			}
		}
		for i := range s.Evals {
			a, b := s.Evals[i], r.Evals[i]
			if a.Role != "*" {
				continue
			}
			bound := float64(len(differ[a.Step]))/float64(a.Problems) + 1e-12
			for _, f := range []struct {
				name string
				x, y float64
			}{{"accuracy", a.Accuracy, b.Accuracy}, {"strict accuracy", a.StrictAccuracy, b.StrictAccuracy}} {
				if d := f.x - f.y; d > bound || d < -bound {
					t.Errorf("%s step %d %s: %s %.4f under slots, %.4f under reference; %d episodes differ", id, a.Step, a.Workflow, f.name, f.x, f.y, len(differ[a.Step]))
				}
			}
		}
		t.Logf("%s: %d of %d turns differ between the slot and the reference backend", id, turns, len(s.Samples))
	}
}

// torchOutOfMemoryResume injects a CUDA out-of-memory into the second train
// step of a run (MARLOW_TORCH_INJECT_OOM): the run fails with an error that
// names the operation, the batch and train_tokens, and how to resume; run
// again with train_tokens and gen_tokens lowered (not part of the config
// hash), it resumes from step 1 and ends done, with the same steps, evals
// and samples as the run at the default budgets under ref (measured so on
// the CPU: the budgets only regroup float sums taken in a fixed order). The
// runs take one engine thread, as the reference's did (--jobs 2 over the
// whole plan): torch's CPU reductions split by thread, so on torch a
// different --threads can change the last bits of the logged statistics.
func torchOutOfMemoryResume(t *testing.T, specPath, ref string) {
	t.Helper()
	const id = "voting-sp-s-synth-math-seed1"
	runs := t.TempDir()
	dir := filepath.Join(runs, "smoke", id)
	out, stderr, code := runCLI(t, []string{"MARLOW_TORCH_INJECT_OOM=train_step:2"}, "run", specPath, "--runs", runs, "--only", id, "--threads", "1", "--allow-dirty", "--progress", "none")
	if code != 1 {
		t.Fatalf("run with an out-of-memory at its second train step: exit %d, want 1\n%s%s", code, out, stderr)
	}
	m, err := runlog.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != runlog.StatusFailed || m.LastStep != 1 {
		t.Fatalf("after the out-of-memory the run is %s at step %d, want failed at step 1", m.Status, m.LastStep)
	}
	for _, want := range []string{"step 2: train adapter shared", "train_step: out_of_memory: train step of adapter 'shared' ran out of memory on 32 turns",
		"lower train_tokens in the spec's model section (e.g. to 8192)", "lower the budget named above in models.s of the spec", "resumes from its last checkpoint (step 1 committed)"} {
		if !strings.Contains(m.Error, want) || !strings.Contains(out, want) {
			t.Errorf("run error (manifest and summary) lacks %q:\n%s\n%s", want, m.Error, out)
		}
	}
	if strings.Contains(m.Error, "Traceback") {
		t.Errorf("run error quotes a Python traceback:\n%s", m.Error)
	}
	raw, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	low := strings.ReplaceAll(string(raw), "    device: cpu\n", "    device: cpu\n    train_tokens: 512\n    gen_tokens: 2048\n")
	lowPath := filepath.Join(filepath.Dir(specPath), "smoke-torch-low.yaml")
	if err := os.WriteFile(lowPath, []byte(low), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := runCLI(t, nil, "run", lowPath, "--runs", runs, "--only", id, "--threads", "1", "--allow-dirty", "--progress", "none"); code != 0 {
		t.Fatalf("resume with train_tokens 512, gen_tokens 2048: exit %d\n%s%s", code, out, stderr)
	}
	if m2, err := runlog.ReadManifest(dir); err != nil || m2.Status != runlog.StatusDone || m2.Created != m.Created {
		t.Fatalf("after the resume: %+v %v (want done, created %s: the same run folder)", m2.Status, err, m.Created)
	}
	sameParquet(t, ref, runs, id)
}

// killServerAfterStep1 starts the CLI with args (one run, whose folder is
// dir), kills the run's torch server once the run has committed step 1, and
// returns the server's pid after the CLI has exited with an error.
func killServerAfterStep1(t *testing.T, dir string, timeout time.Duration, args ...string) int {
	t.Helper()
	cmd, out := startCLI(t, args...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	server := 0
	deadline := time.After(timeout)
	for server == 0 {
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before its server could be killed:\n%s", err, out.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("timed out waiting for step 1 to commit")
		case <-time.After(50 * time.Millisecond):
			if m, err := runlog.ReadManifest(dir); err == nil && m.LastStep >= 1 {
				server = serverPID(cmd.Process.Pid)
			}
		}
	}
	if err := syscall.Kill(server, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatalf("the run succeeded although its server was killed:\n%s", out.String())
	}
	return server
}

// torchSmokeSpec writes seeds/smoke.yaml with every model on the torch
// engine into an ignored folder of the repository (so the committed tiny
// base models are found) and returns its path.
func torchSmokeSpec(t *testing.T, py string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "seeds", "smoke.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(raw), "    engine: native\n", fmt.Sprintf("    engine: torch\n    device: cpu\n    python: %s\n", py))
	if !strings.Contains(text, "engine: torch") {
		t.Fatal("seeds/smoke.yaml has no `engine: native` line to switch")
	}
	cache := filepath.Join("..", "..", ".cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(cache, "torch-smoke-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p, _ := filepath.Abs(filepath.Join(dir, "smoke-torch.yaml"))
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startCLI starts the marlow CLI (this test binary) without waiting.
func startCLI(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	a, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MARLOW_TEST_RUN_MAIN=1", "MARLOW_TEST_ARGS="+string(a))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// serverPID finds the torch server started by process parent (0 when none).
func serverPID(parent int) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		st, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if bytes.Contains(cl, []byte("marlow_torch")) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

// sameParquet checks that the Parquet logs of the smoke runs matching glob
// are byte-identical under runs folders a and b.
func sameParquet(t *testing.T, a, b, glob string) {
	t.Helper()
	sameParquetOf(t, "smoke", a, b, glob)
}

// sameParquetOf is sameParquet for the runs of experiment exp.
func sameParquetOf(t *testing.T, exp, a, b, glob string) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(b, exp, glob))
	if len(dirs) == 0 {
		t.Fatalf("no runs %s under %s", glob, b)
	}
	n := 0
	for _, d := range dirs {
		id := filepath.Base(d)
		for _, table := range []string{"steps", "evals", "samples"} {
			files, _ := filepath.Glob(filepath.Join(d, table, "*.parquet"))
			ref, _ := filepath.Glob(filepath.Join(a, exp, id, table, "*.parquet"))
			if len(files) != len(ref) {
				t.Errorf("%s/%s: %d segments, reference %d", id, table, len(files), len(ref))
				continue
			}
			for _, f := range files {
				x, err1 := os.ReadFile(f)
				y, err2 := os.ReadFile(filepath.Join(a, exp, id, table, filepath.Base(f)))
				if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
					t.Errorf("%s/%s/%s differs from the first run (%v %v)", id, table, filepath.Base(f), err1, err2)
				}
				n++
			}
		}
	}
	t.Logf("%d Parquet files of %d runs byte-identical", n, len(dirs))
}
