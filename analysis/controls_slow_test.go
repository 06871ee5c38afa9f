//go:build slow

// Positive and negative controls of the failure-mode detectors
// (controls.go) from real training: the demo's cell (voting x synth-math x
// the tiny model s, its committed base model) trained on the native engine
// in three arms, the experiment files in testdata/controls:
//
//   - late: IP at a learning rate far too high (1e-2) reached by a linear
//     warm-up over 30 of the 40 steps, constant after it;
//   - early: SP at the same rate after a 10-step warm-up;
//   - steady: SP and IP at a stable rate (1e-3), otherwise as late.
//
// The stress arms must trigger their detector and the steady arm must not
// trigger any. Role capture is the exception: no arm produces it at these
// settings (the early SP arm's aggregator degenerates instead), so its
// positive control is a constructed log built from the steady SP run's
// (copiedCapture), and the early SP run is its specificity control. The runs are deterministic (same commit, spec and seed give
// the same logs), so each assertion is on the one measured outcome. The four
// runs take minutes, so these tests build only with -tags slow (`make
// check-slow`). MARLOW_CONTROLS_RUNS names a runs folder to keep the runs
// in (done runs are skipped on the next call) instead of a temporary one.

package analysis_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/analysis/analysistest"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
)

// controlArms are the arms' experiment files under testdata/controls.
var controlArms = []string{"late", "early", "steady"}

var controls struct {
	once    sync.Once
	studies map[string]*analysis.Study // arm -> its analysed runs
	logs    map[string][]*runlog.Run   // arm -> its runs' logs as read back
	err     string
}

// controlStudies trains the arms once per test binary (or finds them done
// under MARLOW_CONTROLS_RUNS) and analyses each.
func controlStudies(t *testing.T) map[string]*analysis.Study {
	t.Helper()
	controls.once.Do(func() {
		controls.err = "the control runs did not finish"
		runs := os.Getenv("MARLOW_CONTROLS_RUNS")
		if runs == "" {
			dir, err := os.MkdirTemp("", "marlow-controls-")
			if err != nil {
				controls.err = err.Error()
				return
			}
			defer os.RemoveAll(dir)
			runs = dir
		}
		reg := &engine.Registry{}
		if err := reg.Register(native.Driver()); err != nil {
			controls.err = err.Error()
			return
		}
		// The arms train at once, one run per core-thread: late and early
		// have one run each, steady two.
		studies := make([]*analysis.Study, len(controlArms))
		logs := make([][]*runlog.Run, len(controlArms))
		errs := make([]error, len(controlArms))
		var wg sync.WaitGroup
		for i, arm := range controlArms {
			wg.Go(func() { studies[i], logs[i], errs[i] = trainArm(t, reg, runs, arm) })
		}
		wg.Wait()
		controls.studies = map[string]*analysis.Study{}
		controls.logs = map[string][]*runlog.Run{}
		for i, arm := range controlArms {
			if errs[i] != nil {
				controls.err = errs[i].Error()
				return
			}
			controls.studies[arm], controls.logs[arm] = studies[i], logs[i]
		}
		controls.err = ""
	})
	if controls.err != "" {
		t.Fatalf("control runs: %s", controls.err)
	}
	return controls.studies
}

// trainArm trains (or finds done) the runs of an arm's experiment file
// under runs, reads their logs back and analyses them.
func trainArm(t *testing.T, reg *engine.Registry, runs, arm string) (*analysis.Study, []*runlog.Run, error) {
	s, err := spec.Load(filepath.Join("testdata", "controls", arm+".yaml"))
	if err != nil {
		return nil, nil, err
	}
	t0 := time.Now()
	sum, err := runner.Run(context.Background(), s, runner.Options{RunsDir: runs, Jobs: 2, Threads: 1, AllowDirty: true,
		Engines: reg, BaseModel: runner.PretrainedBase(s, 1, os.Stderr), Reporter: runner.NewLines(os.Stderr, time.Minute)})
	if err != nil {
		return nil, nil, fmt.Errorf("arm %s: %w", arm, err)
	}
	for _, o := range sum.Outcomes {
		if o.State != runner.StateDone && o.State != runner.StateSkipped {
			return nil, nil, fmt.Errorf("arm %s: run %s %s: %v", arm, o.ID, o.State, o.Err)
		}
	}
	t.Logf("arm %s: %d runs in %s", arm, len(sum.Outcomes), time.Since(t0).Round(time.Second))
	logs, err := analysis.MergeRuns(filepath.Join(runs, s.Experiment))
	if err != nil {
		return nil, nil, fmt.Errorf("arm %s: %w", arm, err)
	}
	st, err := analysis.Analyze(logs)
	if err != nil {
		return nil, nil, fmt.Errorf("arm %s: %w", arm, err)
	}
	return st, logs, nil
}

// controlRun is the run of an arm in a condition.
func controlRun(t *testing.T, arm, cond string) *analysis.RunResult {
	t.Helper()
	for _, r := range controlStudies(t)[arm].Runs {
		if r.Condition == cond {
			return r
		}
	}
	t.Fatalf("arm %s has no %s run", arm, cond)
	return nil
}

// TestControlCliff: the late IP run falls off a terminal cliff; neither
// steady run does.
func TestControlCliff(t *testing.T) {
	late := controlRun(t, "late", study.IP)
	m := late.Metrics
	t.Logf("late ip: base %.3f ceiling %.3f@%d final %.3f drop %.3f threshold %.3f fall step %d (acc %.3f) mid step %.0f; curve %v",
		m.Base, m.Ceiling, m.CeilingStep, m.Final, m.Drop, m.Cliff.Threshold, m.Cliff.FallStep, m.Cliff.FallAcc, m.Cliff.MidStep, late.Curve)
	if !m.Cliff.Cliff {
		t.Errorf("late ip: no terminal cliff (drop %.3f, threshold %.3f, fall step %d, mid step %.0f)", m.Drop, m.Cliff.Threshold, m.Cliff.FallStep, m.Cliff.MidStep)
	}
	for _, cond := range []string{study.SP, study.IP} {
		r := controlRun(t, "steady", cond)
		m := r.Metrics
		t.Logf("steady %s: base %.3f ceiling %.3f@%d final %.3f drop %.3f threshold %.3f fall step %d; curve %v",
			cond, m.Base, m.Ceiling, m.CeilingStep, m.Final, m.Drop, m.Cliff.Threshold, m.Cliff.FallStep, r.Curve)
		if m.Cliff.Cliff {
			t.Errorf("steady %s: a terminal cliff (drop %.3f, threshold %.3f, fall step %d)", cond, m.Drop, m.Cliff.Threshold, m.Cliff.FallStep)
		}
	}
}

// TestControlAmplification: a role of the late IP run is amplified (a
// sustained gradient-norm rise over its early median), before its cliff;
// no role of either steady run is. Every run logs the cosine to the role's
// gradient EMA; it is logged here as evidence (detect.go: it does not gate
// the test).
func TestControlAmplification(t *testing.T) {
	late := controlRun(t, "late", study.IP)
	var amplified bool
	for _, a := range late.Amplification {
		t.Logf("late ip %s/%s: early median %.4g, amplified %v (sustained at %d, before the cliff %v), peak %.4g@%d, steps over %v, EMA cosines there %.3f (%d above amp_cos)",
			a.Policy, a.Role, a.EarlyMedian, a.Amplified, a.Sustained, a.BeforeCliff, a.PeakNorm, a.PeakStep, a.Steps, a.EMACos, a.EMAAligned)
		if a.Amplified {
			amplified = true
			if !(a.PeakNorm > 3*a.EarlyMedian) {
				t.Errorf("late ip %s: amplified with peak %.4g not above %g x the early median %.4g", a.Role, a.PeakNorm, 3.0, a.EarlyMedian)
			}
		}
	}
	if !amplified {
		t.Errorf("late ip: no role amplified")
	}
	for _, cond := range []string{study.SP, study.IP} {
		r := controlRun(t, "steady", cond)
		if len(r.Amplification) == 0 {
			t.Errorf("steady %s: no amplification evidence (no step rows)", cond)
		}
		for _, a := range r.Amplification {
			ratio := a.PeakNorm / a.EarlyMedian
			t.Logf("steady %s %s/%s: early median %.4g, peak %.4g@%d (%.2f x), steps over %v", cond, a.Policy, a.Role, a.EarlyMedian, a.PeakNorm, a.PeakStep, ratio, a.Steps)
			if a.Amplified {
				t.Errorf("steady %s: role %s amplified (sustained at %d)", cond, a.Role, a.Sustained)
			}
		}
	}
}

// copiedCapture builds the capture control's rollout log. It is a
// constructed log, not a run of its own: the steady SP run's logs as the
// runner wrote them (real tiny training at a stable rate), read back, with
// one change: at the last validation each aggregator turn writes the text
// of its episode's first candidate (generator0's solution, its token count
// and finish reason) instead of a selection, so it fails the aggregator's
// format (compliant false, as the workflow's parse marks an output without
// a `Selected:` line) and the evals row's format rate is recomputed from
// those turns. This is the paper's capture (a supervisory role writing the
// dominant role's outputs), which no control arm at these settings
// produces: the early SP arm's aggregator degenerates instead (its outputs
// run to the token cap), which is what this control must tell apart. The
// log is written with the run-log writer and analysed from the folder, so
// the detector reads it as it reads any run.
func copiedCapture(t *testing.T) *analysis.RunResult {
	t.Helper()
	controlStudies(t)
	var src *runlog.Run
	for _, r := range controls.logs["steady"] {
		if r.Manifest.Condition == study.SP {
			src = r
		}
	}
	if src == nil {
		t.Fatal("arm steady has no sp run")
	}
	r := *src
	var last int64 = -1
	for _, s := range r.Samples {
		if s.Split == "val" && s.Step > last {
			last = s.Step
		}
	}
	type episode struct {
		problem string
		rollout int64
	}
	first := map[episode]runlog.SampleRow{}
	for _, s := range r.Samples {
		if s.Split == "val" && s.Step == last && s.Agent == study.Generator+"0" {
			first[episode{s.ProblemID, s.Rollout}] = s
		}
	}
	r.Samples = slices.Clone(src.Samples)
	copied := 0
	for i, s := range r.Samples {
		if s.Split != "val" || s.Step != last || s.Role != study.Aggregator {
			continue
		}
		g, ok := first[episode{s.ProblemID, s.Rollout}]
		if !ok {
			t.Fatalf("steady sp: no first candidate for the aggregator turn of problem %s rollout %d at step %d", s.ProblemID, s.Rollout, last)
		}
		s.Completion, s.Tokens, s.Finish, s.Compliant = g.Completion, g.Tokens, g.Finish, false
		r.Samples[i] = s
		copied++
	}
	if copied == 0 {
		t.Fatalf("steady sp: no aggregator turn at the last validation (step %d)", last)
	}
	r.Evals = slices.Clone(src.Evals)
	for i, e := range r.Evals {
		if e.Split == "val" && e.Step == last && e.Role == study.Aggregator {
			r.Evals[i].FormatRate = 0
		}
	}
	dir := filepath.Join(t.TempDir(), r.Manifest.Experiment+"-copied")
	if err := analysistest.WriteRuns(dir, []*runlog.Run{&r}); err != nil {
		t.Fatal(err)
	}
	st, err := analysis.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Runs) != 1 {
		t.Fatalf("the copied log gives %d run views, want 1", len(st.Runs))
	}
	t.Logf("copied %d aggregator turns at step %d from their first candidates", copied, last)
	return st.Runs[0]
}

// TestControlCapture: the aggregator of the capture control's log
// (copiedCapture: SP, its outputs at the last validation the generator's)
// is captured by the generator and does not degenerate. It must stay
// silent where the outputs did not move toward the generator's (the steady
// SP run) and where they degenerated (the early SP run: SP at a learning
// rate far too high, its aggregator's outputs at the token cap).
func TestControlCapture(t *testing.T) {
	check := func(name string, r *analysis.RunResult, want bool) {
		caps := r.CaptureAgainst(study.Generator)
		if len(caps) == 0 {
			t.Fatalf("%s: no capture comparison against the generator", name)
		}
		var got bool
		for _, c := range caps {
			logCapture(t, name, c)
			got = got || c.Captured
		}
		if got != want {
			t.Errorf("%s: captured %v, want %v", name, got, want)
		}
	}
	copied := copiedCapture(t)
	check("copied sp", copied, true)
	for _, d := range copied.Degeneration {
		logDegeneration(t, "copied sp", d)
		if d.Degenerated {
			t.Errorf("copied sp: role %s degenerated, so the capture control would not tell capture from degeneration", d.Role)
		}
	}
	check("steady sp", controlRun(t, "steady", study.SP), false)
	check("early sp", controlRun(t, "early", study.SP), false)
}

// TestControlDegeneration: a role of the late IP run (a learning rate far
// too high, each role on its own adapter) degenerates, and no role of it is
// captured by the generator (the dominant role of the arms' SP runs): the
// degeneration control must not fire capture. No role of either steady run
// degenerates.
func TestControlDegeneration(t *testing.T) {
	late := controlRun(t, "late", study.IP)
	var degenerated bool
	for _, d := range late.Degeneration {
		logDegeneration(t, "late ip", d)
		degenerated = degenerated || d.Degenerated
	}
	if !degenerated {
		t.Errorf("late ip: no role degenerated")
	}
	caps := late.CaptureAgainst(study.Generator)
	if len(caps) == 0 {
		t.Fatalf("late ip: no capture comparison against the generator")
	}
	for _, c := range caps {
		logCapture(t, "late ip", c)
		if c.Captured {
			t.Errorf("late ip: role %s captured by %s: the degeneration control fired capture", c.Role, c.Dominant)
		}
	}
	for _, cond := range []string{study.SP, study.IP} {
		for _, d := range controlRun(t, "steady", cond).Degeneration {
			logDegeneration(t, "steady "+cond, d)
			if d.Degenerated {
				t.Errorf("steady %s: role %s degenerated", cond, d.Role)
			}
		}
	}
}

func logCapture(t *testing.T, name string, c analysis.Capture) {
	t.Helper()
	t.Logf("%s %s vs %s (steps %d..%d): format %.3f -> %.3f (collapse %v), similarity %.3f -> %.3f (rise %v), length ratio %.3f -> %.3f (toward 1 %v), degenerate %v, captured %v; end example %q",
		name, c.Role, c.Dominant, c.BaseStep, c.EndStep, c.FormatBase, c.FormatEnd, c.FormatCollapse, c.SimBase, c.SimEnd, c.SimRise,
		c.LenRatioBase, c.LenRatioEnd, c.LengthToward, c.Degenerate, c.Captured, c.ExampleEnd)
}

func logDegeneration(t *testing.T, name string, d analysis.Degeneration) {
	t.Helper()
	t.Logf("%s %s (steps %d..%d): at the token cap %.3f -> %.3f, distinct %d-grams %.3f -> %.3f, degenerated %v; end example %q",
		name, d.Role, d.BaseStep, d.EndStep, d.CapBase, d.CapEnd, analysis.DegenerateNGram, d.DistinctBase, d.DistinctEnd, d.Degenerated, d.ExampleEnd)
}

// TestControlCollapse: a role of each stress run loses its format; no role
// of either steady run does.
func TestControlCollapse(t *testing.T) {
	cases := []struct {
		arm, cond string
		want      bool
	}{
		{"late", study.IP, true},
		{"early", study.SP, true},
		{"steady", study.SP, false},
		{"steady", study.IP, false},
	}
	for _, tc := range cases {
		r := controlRun(t, tc.arm, tc.cond)
		drop := controlStudies(t)[tc.arm].Params.CaptureFormatDrop
		judged, collapsed := analysis.FormatCollapsed(r, drop)
		first, last := map[string]float64{}, map[string]float64{}
		for _, e := range r.Evals() {
			if e.Role == "*" || math.IsNaN(e.FormatRate) {
				continue
			}
			if _, ok := first[e.Role]; !ok {
				first[e.Role] = e.FormatRate
			}
			last[e.Role] = e.FormatRate
		}
		for _, role := range slices.Sorted(maps.Keys(first)) {
			t.Logf("%s %s %s: format %.3f -> %.3f", tc.arm, tc.cond, role, first[role], last[role])
		}
		if !judged || collapsed != tc.want {
			t.Errorf("%s %s: judged %v collapsed %v, want collapsed %v (drop %g)", tc.arm, tc.cond, judged, collapsed, tc.want, drop)
		}
	}
}

// TestControlLateEvents: the late-event detectors (late.go) find a late
// cliff in the late IP run (it learns while the rate is small and falls
// after the midpoint, step 20 of 40: measured, a fall at step 30 from a peak
// at step 5, lasting to the end; its aggregator's format collapse comes at
// step 20, the midpoint itself, so it is early) and only early events in the
// early SP run (which breaks right after its 10-step warm-up); neither
// steady run has an event that lasts.
func TestControlLateEvents(t *testing.T) {
	cases := []struct {
		arm, cond string
		lateCliff bool // a late cliff
		late      bool // any late event
		early     bool // any early event
	}{
		{"late", study.IP, true, true, true},
		{"early", study.SP, false, false, true},
		{"steady", study.SP, false, false, false},
		{"steady", study.IP, false, false, false},
	}
	for _, tc := range cases {
		r := controlRun(t, tc.arm, tc.cond)
		ev := r.Late
		c := ev.Cliff
		t.Logf("%s %s: mid step %.0f; cliff found %v (peak %.3f@%d, threshold %.3f, fall %d at %.3f, lasting %d, late %v); collapses %+v; curve %v",
			tc.arm, tc.cond, ev.MidStep, c.Found, c.Peak, c.PeakStep, c.Threshold, c.FallStep, c.FallAcc, c.Lasting, c.Late, ev.Collapses, r.Curve)
		if c.Late != tc.lateCliff || ev.Late != tc.late || ev.Early != tc.early {
			t.Errorf("%s %s: late cliff %v, late %v, early %v; want %v, %v, %v", tc.arm, tc.cond, c.Late, ev.Late, ev.Early, tc.lateCliff, tc.late, tc.early)
		}
	}
}
