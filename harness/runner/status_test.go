package runner

import (
	"bytes"
	"context"
	"errors"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/runlog"
)

func TestStatusStates(t *testing.T) {
	s := writeSpec(t, "0.5")
	runs := t.TempDir()
	opt := fakeOptions(runs)
	opt.Only = "voting-*"
	if _, err := Run(context.Background(), s, opt); err != nil {
		t.Fatal(err)
	}
	// A process holding a run's lock makes it running; a manifest left
	// running without a holder is a crash.
	spDir := filepath.Join(runs, "fk", "voting-sp-s-synth-math-seed1")
	ipDir := filepath.Join(runs, "fk", "voting-ip-s-synth-math-seed1")
	for _, d := range []string{spDir, ipDir} {
		w, _, err := runlog.Open(d, mustManifest(t, d))
		if err != nil {
			t.Fatal(err)
		}
		w.Close() // leaves status running
	}
	l, err := lockRun(spDir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	writeFile(t, filepath.Join(runs, "fk", "voting-base-s-synth-math-seed1", runlog.ManifestFile), "{")

	sts, err := Status(s, runs, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, st := range sts {
		got[st.ID] = st.State
	}
	want := map[string]string{
		"sa-rl-s-synth-math-seed1":       StatePending,
		"voting-base-s-synth-math-seed1": StateCorrupt,
		"voting-sp-s-synth-math-seed1":   StateRunning,
		"voting-ip-s-synth-math-seed1":   StateCrashed,
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %s, want %s", id, got[id], w)
		}
	}
	var buf bytes.Buffer
	if err := WriteStatus(&buf, sts); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, frag := range []string{"RUN", "voting-ip-s-synth-math-seed1", "4/4", "4 runs: pending 1, corrupt 1, running 1, crashed 1"} {
		if !strings.Contains(out, frag) {
			t.Errorf("status table lacks %q:\n%s", frag, out)
		}
	}
	// A run that is locked cannot be started by a second invocation.
	sum, err := Run(context.Background(), s, fakeOptions(runs))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range sum.Outcomes {
		if o.ID == "voting-sp-s-synth-math-seed1" && !errors.Is(o.Err, ErrLocked) {
			t.Errorf("locked run: %s %v, want ErrLocked", o.State, o.Err)
		}
	}
}

func mustManifest(t *testing.T, dir string) runlog.Manifest {
	t.Helper()
	m, err := runlog.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLinesReporter(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewLines(&buf, 10*time.Second)
	l.Now = func() time.Time { return clock }
	l.Started("a", 4, -1)
	clock = clock.Add(5 * time.Second)
	l.Step("a", grpo.Progress{Step: 1, Steps: 4, Reward: 0.25, ValAcc: math.NaN()}) // within the period: silent
	clock = clock.Add(10 * time.Second)
	l.Step("a", grpo.Progress{Step: 2, Steps: 4, Reward: 0.5, ValAcc: 0.125})
	clock = clock.Add(time.Second)
	l.Step("a", grpo.Progress{Step: 4, Steps: 4, Reward: 0.5, ValAcc: 0.25}) // the last step always prints
	l.Finished("a", StateDone, nil)
	l.Started("b", 4, 2)
	l.Finished("b", StateFailed, errors.New("boom"))
	l.Note("x %d", 1)
	want := `a: started (4 steps)
a: step 2/4 reward 0.500 val_acc 0.125 eta 15s
a: step 4/4 reward 0.500 val_acc 0.250 eta -
a: done in 16s
b: resuming after step 2 of 4
b: failed after 0s: boom
x 1
`
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestBarsReporterDrawsRuns(t *testing.T) {
	s := writeSpec(t, "0.5")
	var buf syncBuffer
	opt := fakeOptions(t.TempDir())
	bars := NewBars(&buf)
	opt.Reporter = bars
	sum, err := Run(context.Background(), s, opt)
	bars.Close()
	if err != nil {
		t.Fatal(err)
	}
	if sum.Count(StateDone) != 4 {
		t.Fatalf("states:\n%s", states(sum))
	}
	out := buf.String()
	for _, id := range []string{"voting-ip-s-synth-math-seed1", "sa-rl-s-synth-math-seed1"} {
		if !regexp.MustCompile(id + ` +4/4 .*done`).MatchString(out) {
			frag := id + " 4/4 ... done"
			t.Errorf("bars output lacks %q:\n%s", frag, out)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the progress goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A SLURM column appears only when some run has a Slurm state.
func TestWriteStatusSlurmColumn(t *testing.T) {
	sts := []RunStatus{
		{ID: "a-seed1", Condition: "sp", State: runlog.StatusInterrupted, LastStep: 3, TotalSteps: 8, Slurm: "requeued (restart 1)"},
		{ID: "b-seed1", Condition: "ip", State: StatePending, LastStep: -1, TotalSteps: 8},
	}
	var buf bytes.Buffer
	if err := WriteStatus(&buf, sts); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, re := range []string{`RUN\s+CONDITION\s+STATE\s+SLURM\s+STEP`, `a-seed1\s+sp\s+interrupted\s+requeued \(restart 1\)\s+3/8`, `b-seed1\s+ip\s+pending\s+-\s+-`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("status lacks %s:\n%s", re, out)
		}
	}
	sts[0].Slurm = ""
	buf.Reset()
	if err := WriteStatus(&buf, sts); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "SLURM") {
		t.Errorf("a SLURM column without Slurm states:\n%s", buf.String())
	}
}
