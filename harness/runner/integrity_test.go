package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

const vsp = "voting-sp-s-synth-math-seed1"

// doneRuns runs the fake experiment to the end and returns the runs folder.
func doneRuns(t *testing.T) (string, func() Options) {
	t.Helper()
	runs := t.TempDir()
	s := writeSpec(t, "0.5")
	if _, err := Run(context.Background(), s, fakeOptions(runs)); err != nil {
		t.Fatal(err)
	}
	return runs, func() Options { return fakeOptions(runs) }
}

func outcomeOf(t *testing.T, sum *Summary, id string) Outcome {
	t.Helper()
	for _, o := range sum.Outcomes {
		if o.ID == id {
			return o
		}
	}
	t.Fatalf("no outcome for %s", id)
	return Outcome{}
}

// TestDamagedDoneRunNotSkipped damages a file of a finished run: the next
// `run` must report the run damaged (naming the file), not skip it, and
// leave the other runs skipped; status must say damaged too.
func TestDamagedDoneRunNotSkipped(t *testing.T) {
	ckptFile := func(dir string) string {
		return filepath.Join(grpo.CheckpointPath(filepath.Join(dir, "ckpt"), 4), "engine", "fake-engine.json")
	}
	seg := func(dir string) string { return filepath.Join(dir, "evals", "000004.parquet") }
	cases := []struct {
		name   string
		file   func(dir string) string
		damage func(t *testing.T, p string)
	}{
		{"segment deleted", seg, func(t *testing.T, p string) { must(t, os.Remove(p)) }},
		{"segment truncated", seg, func(t *testing.T, p string) { must(t, os.Truncate(p, 100)) }},
		{"segment extended", seg, appendBytes},
		{"checkpoint deleted", ckptFile, func(t *testing.T, p string) { must(t, os.Remove(p)) }},
		{"checkpoint truncated", ckptFile, func(t *testing.T, p string) { must(t, os.Truncate(p, 10)) }},
		{"checkpoint extended", ckptFile, appendBytes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runs, opts := doneRuns(t)
			s := writeSpec(t, "0.5")
			dir := filepath.Join(runs, "fk", vsp)
			p := c.file(dir)
			c.damage(t, p)
			sum, err := Run(context.Background(), s, opts())
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range sum.Outcomes {
				switch {
				case o.ID == vsp:
					if o.State != "damaged" || o.Err == nil || !strings.Contains(o.Err.Error(), p) {
						t.Errorf("%s: state %s, err %v; want damaged naming %s", o.ID, o.State, o.Err, p)
					}
				case o.State != StateSkipped:
					t.Errorf("%s: state %s, want skipped", o.ID, o.State)
				}
			}
			sts, err := Status(s, runs, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range sts {
				if st.ID == vsp && st.State != "damaged" {
					t.Errorf("status of %s: %s, want damaged", st.ID, st.State)
				}
			}
		})
	}
}

// TestResumeRefusesAlteredCheckpoint alters the checkpoint of a partial run
// in place (still valid JSON of the same size): resume must not load it
// and finish with different results; it rolls back to the checkpoint
// before it, naming the file, and finishes with an uninterrupted run's
// rows.
func TestResumeRefusesAlteredCheckpoint(t *testing.T) {
	s := writeSpec(t, "0.5")
	runs := t.TempDir()
	opt, ctx := interruptAt(fakeOptions(runs), vsp, 2)
	if _, err := Run(ctx, s, opt); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(runs, "fk", vsp)
	p := filepath.Join(grpo.CheckpointPath(filepath.Join(dir, "ckpt"), 2), "engine", "fake-engine.json")
	b, err := os.ReadFile(p)
	must(t, err)
	i := strings.IndexAny(string(b), "123456789")
	if i < 0 {
		t.Fatalf("no digit to alter in %s", b)
	}
	b[i] = '0' + (b[i]-'0')%9 + 1
	must(t, os.WriteFile(p, b, 0o644))
	wantRolledBack(t, s, runs, p)
}

// wantRolledBack resumes the runs of s under runs: vsp must be rolled back
// to the checkpoint of step 0, with a note naming the damaged file p, and
// finish with the rows of an uninterrupted run.
func wantRolledBack(t *testing.T, s *spec.Spec, runs, p string) {
	t.Helper()
	notes := &noteLog{}
	opt := fakeOptions(runs)
	opt.Reporter = notes
	sum, err := Run(context.Background(), s, opt)
	must(t, err)
	o := outcomeOf(t, sum, vsp)
	if note := notes.String(); o.State != StateDone || !strings.Contains(note, p) || !strings.Contains(note, "rolled back to the checkpoint of step 0") {
		t.Fatalf("%s: state %s (%v), notes:\n%s\nwant done after a roll-back to step 0 naming %s", vsp, o.State, o.Err, note, p)
	}
	ref := t.TempDir()
	_, err = Run(context.Background(), s, fakeOptions(ref))
	must(t, err)
	if rowsText(t, filepath.Join(runs, "fk", vsp)) != rowsText(t, filepath.Join(ref, "fk", vsp)) {
		t.Errorf("%s: rows after the roll-back differ from an uninterrupted run", vsp)
	}
}

// TestDamagedManifestConfig changes the stored config of a done run (and,
// in a second case, its config_hash too): it is a damaged manifest, not a
// config change.
func TestDamagedManifestConfig(t *testing.T) {
	for _, alsoHash := range []bool{false, true} {
		t.Run(fmt.Sprintf("hash-edited=%v", alsoHash), func(t *testing.T) {
			runs, opts := doneRuns(t)
			s := writeSpec(t, "0.5")
			dir := filepath.Join(runs, "fk", vsp)
			mp := filepath.Join(dir, runlog.ManifestFile)
			b, err := os.ReadFile(mp)
			must(t, err)
			text := strings.Replace(string(b), `"lr": 0.5`, `"lr": 0.25`, 1)
			if text == string(b) {
				t.Fatal("no lr in the manifest to edit")
			}
			if alsoHash {
				m, err := runlog.ReadManifest(dir)
				must(t, err)
				text = strings.Replace(text, m.ConfigHash, strings.Repeat("0", len(m.ConfigHash)), 1)
			}
			must(t, os.WriteFile(mp, []byte(text), 0o644))
			sum, err := Run(context.Background(), s, opts())
			if err != nil {
				t.Fatalf("run: %v; want the damaged run reported, the others skipped", err)
			}
			o := outcomeOf(t, sum, vsp)
			if o.State != "damaged" || !strings.Contains(fmt.Sprint(o.Err), "damaged manifest") {
				t.Errorf("%s: state %s, err %v; want damaged (damaged manifest)", vsp, o.State, o.Err)
			}
			sts, err := Status(s, runs, vsp)
			must(t, err)
			if sts[0].State != "damaged" || !strings.Contains(sts[0].Error, "damaged manifest") {
				t.Errorf("status: %s %q; want damaged manifest", sts[0].State, sts[0].Error)
			}
		})
	}
}

// TestConcurrentRunnerLeavesHeldRun runs a second runner on a run the
// first holds: it is left to the first (not a failure) and the message
// names the holder's pid and host.
func TestConcurrentRunnerLeavesHeldRun(t *testing.T) {
	s := writeSpec(t, "0.5")
	runs := t.TempDir()
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	first := fakeOptions(runs)
	first.Only = vsp
	first.Reporter = stepHook{fn: func(id string, step int) {
		if step == 1 {
			once.Do(func() { close(reached); <-release })
		}
	}}
	done := make(chan error, 1)
	go func() {
		sum, err := Run(context.Background(), s, first)
		if err == nil && sum.Outcomes[0].State != StateDone {
			err = fmt.Errorf("first runner: %s: %v", sum.Outcomes[0].State, sum.Outcomes[0].Err)
		}
		done <- err
	}()
	<-reached
	second := fakeOptions(runs)
	sum, err := Run(context.Background(), s, second)
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if ferr := <-done; ferr != nil {
		t.Fatal(ferr)
	}
	host, _ := os.Hostname()
	o := outcomeOf(t, sum, vsp)
	if o.State != "held" || !strings.Contains(fmt.Sprint(o.Err), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(fmt.Sprint(o.Err), host) {
		t.Errorf("second runner: %s: %s, %v; want held, naming pid %d on %s", vsp, o.State, o.Err, os.Getpid(), host)
	}
	if n := len(sum.Failed()); n != 0 {
		t.Errorf("second runner counts %d failed runs; a held run is not a failure", n)
	}
}

// TestRunnerDoesNotReopenRunFinishedMeanwhile: a run that the preflight saw
// unfinished but another process finished before this one got its lock is
// skipped, not reopened.
func TestRunnerDoesNotReopenRunFinishedMeanwhile(t *testing.T) {
	runs, opts := doneRuns(t)
	s := writeSpec(t, "0.5")
	dir := filepath.Join(runs, "fk", vsp)
	before, err := os.ReadFile(filepath.Join(dir, runlog.ManifestFile))
	must(t, err)
	r := outcomeRun(t, s, vsp)
	x := &executor{s: s, opt: opts(), rep: nopReporter{}, bases: map[string]*baseModel{}, hashes: map[string]string{}}
	// The job as a preflight that ran while the run was still going sees it.
	o := x.execute(context.Background(), job{run: r, dir: dir, last: 2}, nil)
	if o.State != StateSkipped {
		t.Errorf("state %s (%v), want skipped", o.State, o.Err)
	}
	after, err := os.ReadFile(filepath.Join(dir, runlog.ManifestFile))
	must(t, err)
	if string(after) != string(before) {
		t.Error("the finished run's manifest was rewritten: it was reopened")
	}
}

// TestRunsPathNotAFolder: a runs path that is a file gives one error before
// any run starts; status says so instead of calling every run corrupt.
func TestRunsPathNotAFolder(t *testing.T) {
	s := writeSpec(t, "0.5")
	file := filepath.Join(t.TempDir(), "runs")
	must(t, os.WriteFile(file, []byte("x"), 0o644))
	sum, err := Run(context.Background(), s, fakeOptions(file))
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("run: summary %v, err %v; want one error naming %s before any run", sum, err, file)
	}
	if sum != nil {
		t.Errorf("runs were attempted: %s", states(sum))
	}
	if _, err := Status(s, file, ""); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("status: err %v; want the runs path named as not a folder", err)
	}
}

// TestUnrecordedFailure: a run whose manifest cannot be written any more
// fails, and says that it could not record it; status shows it as such,
// not as crashed.
func TestUnrecordedFailure(t *testing.T) {
	s := writeSpec(t, "0.5")
	runs := t.TempDir()
	opt := fakeOptions(runs)
	opt.Only = vsp
	dir := filepath.Join(runs, "fk", vsp)
	opt.Reporter = stepHook{fn: func(id string, step int) {
		if step == 2 {
			// The manifest's temporary name is taken by a folder that is
			// not empty (so no clean-up can remove it): every later
			// manifest write fails, as on a full disk.
			blocker := filepath.Join(dir, runlog.ManifestFile+".tmp")
			must(t, os.Mkdir(blocker, 0o755))
			must(t, os.WriteFile(filepath.Join(blocker, "x"), nil, 0o644))
		}
	}}
	sum, err := Run(context.Background(), s, opt)
	if err != nil {
		t.Fatal(err)
	}
	o := sum.Outcomes[0]
	if o.State != StateFailed || !strings.Contains(fmt.Sprint(o.Err), "could not record") {
		t.Errorf("state %s, err %v; want failed, saying the status could not be recorded", o.State, o.Err)
	}
	sts, err := Status(s, runs, vsp)
	must(t, err)
	if sts[0].State == StateCrashed || !strings.Contains(sts[0].Error, "could not record") {
		t.Errorf("status %s %q; want the unrecorded failure, not crashed", sts[0].State, sts[0].Error)
	}
}

// outcomeRun returns the planned run id of s.
func outcomeRun(t *testing.T, s *spec.Spec, id string) spec.Run {
	t.Helper()
	runs, err := spec.Plan(s)
	must(t, err)
	for _, r := range runs {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no planned run %s", id)
	return spec.Run{}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, p string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.Write([]byte("\n\n\n\n"))
	must(t, errors.Join(err, f.Close()))
}

// TestVerifyAndRedo alters a segment of a done run in place (same size):
// sizes alone pass it, Verify finds it, and Redo discards and reruns it to
// the same rows.
func TestVerifyAndRedo(t *testing.T) {
	runs, opts := doneRuns(t)
	s := writeSpec(t, "0.5")
	dir := filepath.Join(runs, "fk", vsp)
	want := rowsText(t, dir)
	p := filepath.Join(dir, "samples", "000002.parquet")
	b, err := os.ReadFile(p)
	must(t, err)
	b[len(b)/3] ^= 0x20
	must(t, os.WriteFile(p, b, 0o644))

	sum, err := Run(context.Background(), s, opts())
	must(t, err)
	if o := outcomeOf(t, sum, vsp); o.State != StateSkipped {
		t.Errorf("without Verify: %s (%v), want skipped (sizes match)", o.State, o.Err)
	}
	opt := opts()
	opt.Verify = true
	sum, err = Run(context.Background(), s, opt)
	must(t, err)
	if o := outcomeOf(t, sum, vsp); o.State != StateDamaged || !errors.Is(o.Err, runlog.ErrFileHash) || !strings.Contains(o.Err.Error(), p) {
		t.Errorf("with Verify: %s (%v), want damaged with a hash mismatch naming %s", o.State, o.Err, p)
	}
	opt = opts()
	opt.Redo = "voting-sp-*"
	sum, err = Run(context.Background(), s, opt)
	must(t, err)
	for _, o := range sum.Outcomes {
		if want := map[bool]string{true: StateDone, false: StateSkipped}[o.ID == vsp]; o.State != want {
			t.Errorf("redo: %s: %s (%v), want %s", o.ID, o.State, o.Err, want)
		}
	}
	if got := rowsText(t, dir); got != want {
		t.Error("the redone run's rows differ from the original run's")
	}
	opt.Redo = "nothing-*"
	if _, err := Run(context.Background(), s, opt); err == nil || !strings.Contains(err.Error(), "--redo") {
		t.Errorf("a --redo glob matching nothing: err %v", err)
	}
}

// TestPartialRunDeletedSegment deletes a committed segment of an
// interrupted run: status calls it damaged, and resume, instead of
// finishing "done" with the hole kept, rolls back to the checkpoint before
// the hole, naming the file.
func TestPartialRunDeletedSegment(t *testing.T) {
	s := writeSpec(t, "0.5")
	runs := t.TempDir()
	opt, ctx := interruptAt(fakeOptions(runs), vsp, 2)
	if _, err := Run(ctx, s, opt); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(runs, "fk", vsp, "steps", "000002.parquet")
	must(t, os.Remove(p))
	sts, err := Status(s, runs, vsp)
	must(t, err)
	if sts[0].State != "damaged" || !strings.Contains(sts[0].Error, p) || !strings.Contains(sts[0].Error, "resume rolls back to the checkpoint of step 0") {
		t.Errorf("status: %s %q; want damaged naming %s and the roll-back resume will make", sts[0].State, sts[0].Error, p)
	}
	wantRolledBack(t, s, runs, p)
}
