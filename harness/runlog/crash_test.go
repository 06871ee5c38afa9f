package runlog

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	crashEnvDir = "MARLOW_RUNLOG_CRASH_DIR"
	crashEnvAt  = "MARLOW_RUNLOG_CRASH_AT"
	crashRun    = "crash-run"
	crashSteps  = 10
)

// TestCrashChild is the child of TestCrashResume: it writes the scenario
// run and, at the crashEnvAt-th hook call, reports the point on stdout and
// blocks until the parent SIGKILLs it. Without the environment it skips.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnvDir)
	if dir == "" {
		t.Skip("child of TestCrashResume only")
	}
	at, err := strconv.Atoi(os.Getenv(crashEnvAt))
	if err != nil {
		t.Fatalf("%s: %v", crashEnvAt, err)
	}
	n := 0
	crashHook = func(point string) {
		n++
		if n == at {
			fmt.Fprintf(os.Stdout, "\nAT %s\n", point)
			os.Stdout.Sync()
			select {} // wait for SIGKILL
		}
	}
	if err := writeScenario(dir, crashRun, crashSteps); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(os.Stdout, "\nFINISHED")
}

// hookPoints runs the scenario in-process and records every hook call.
func hookPoints(t *testing.T) []string {
	var points []string
	crashHook = func(p string) { points = append(points, p) }
	defer func() { crashHook = nil }()
	if err := writeScenario(filepath.Join(t.TempDir(), "count"), crashRun, crashSteps); err != nil {
		t.Fatal(err)
	}
	return points
}

// crashAt picks the hook calls to kill at: every distinct point kind at
// least once, then evenly spread calls, at least min in all.
func crashAt(points []string, min int) []int {
	chosen := map[int]bool{}
	kinds := map[string]bool{}
	for i, p := range points {
		if !kinds[p] {
			kinds[p] = true
			chosen[i+1] = true
		}
	}
	stride := len(points) / min
	if stride < 1 {
		stride = 1
	}
	for i := stride / 2; i < len(points); i += stride {
		chosen[i+1] = true
	}
	var out []int
	for i := 1; i <= len(points); i++ {
		if chosen[i] {
			out = append(out, i)
		}
	}
	return out
}

// TestCrashResume SIGKILLs a child writer at many points of its commits
// (mid-segment write, between write and fsync, between renames, before and
// after the manifest update) and checks that the committed rows are exactly
// what the reader sees, that reopening leaves exactly those rows, and that
// finishing the resumed run gives the same bytes as a run never killed.
func TestCrashResume(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	ref := filepath.Join(t.TempDir(), "ref")
	if err := writeScenario(ref, crashRun, crashSteps); err != nil {
		t.Fatal(err)
	}
	refFiles := treeFiles(t, ref)
	points := hookPoints(t)
	ats := crashAt(points, 12)
	if len(ats) < 20 {
		t.Fatalf("only %d crash points", len(ats))
	}
	kinds := map[string]int{}
	for _, at := range ats {
		at := at
		point := points[at-1]
		kinds[point]++
		t.Run(fmt.Sprintf("%03d-%s", at, strings.ReplaceAll(point, ":", "-")), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			killChildAt(t, dir, at, point)

			last := int64(-1)
			m, err := ReadManifest(dir)
			switch {
			case err == nil:
				last = m.LastStep
				r, err := ReadRun(dir)
				if err != nil {
					t.Fatalf("read after kill: %v", err)
				}
				mustSameRun(t, r, scenarioRun(crashRun, last))
				if probs := Check(dir); len(probs) != 0 {
					t.Fatalf("check after kill: %v", probs)
				}
			case errors.Is(err, ErrMissingManifest):
			default:
				t.Fatalf("manifest after kill: %v", err)
			}

			w, got, err := Open(dir, testManifest(crashRun))
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			w.Close()
			if got != last {
				t.Fatalf("reopen says last step %d, manifest said %d", got, last)
			}
			for name := range treeFiles(t, dir) {
				if strings.HasSuffix(name, tmpSuffix) {
					t.Fatalf("temporary %s survived reopen", name)
				}
				if step, ok := segmentStep(filepath.Base(name)); ok && step > last {
					t.Fatalf("uncommitted segment %s survived reopen", name)
				}
			}
			r, err := ReadRun(dir)
			if err != nil {
				t.Fatal(err)
			}
			mustSameRun(t, r, scenarioRun(crashRun, last))

			if err := writeScenario(dir, crashRun, crashSteps); err != nil {
				t.Fatalf("resume: %v", err)
			}
			files := treeFiles(t, dir)
			if len(files) != len(refFiles) {
				t.Fatalf("resumed run has %d files, reference %d", len(files), len(refFiles))
			}
			for name, data := range refFiles {
				if name == ManifestFile {
					continue
				}
				if files[name] != data {
					t.Fatalf("%s differs from the run that was never killed", name)
				}
			}
		})
	}
	for _, k := range []string{"half-written:steps", "written:samples", "renamed:steps", "renamed:evals", "segments-committed", "half-written:manifest", "manifest-committed"} {
		if kinds[k] == 0 {
			t.Errorf("no crash at %s", k)
		}
	}
	t.Logf("%d crash points over %d hook calls", len(ats), len(points))
}

// killChildAt starts the child, waits until it reports hook call at, and
// SIGKILLs it there.
func killChildAt(t *testing.T, dir string, at int, point string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvDir+"="+dir, crashEnvAt+"="+strconv.Itoa(at))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reached := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var seen []string
		for sc.Scan() {
			line := sc.Text()
			if p, ok := strings.CutPrefix(line, "AT "); ok {
				reached <- p
				return
			}
			seen = append(seen, line)
		}
		reached <- "EOF: " + strings.Join(seen, "\n")
	}()
	select {
	case p := <-reached:
		if p != point {
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			t.Fatalf("child stopped at %q, want %q\nstderr: %s", p, point, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		t.Fatalf("child did not reach hook %d in 30 s", at)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed by SIGKILL: %v", err)
	}
}
