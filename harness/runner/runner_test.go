package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

func TestRunSkipsDoneAndRefusesMismatch(t *testing.T) {
	specDir, runs := t.TempDir(), t.TempDir()
	s := writeSpecIn(t, specDir, "0.5")
	sum, err := Run(context.Background(), s, fakeOptions(runs))
	if err != nil {
		t.Fatal(err)
	}
	want := "sa-rl-s-synth-math-seed1=done\nvoting-base-s-synth-math-seed1=done\nvoting-sp-s-synth-math-seed1=done\nvoting-ip-s-synth-math-seed1=done\n"
	if got := states(sum); got != want {
		t.Fatalf("first run states:\n%s\nwant\n%s", got, want)
	}
	for _, o := range sum.Outcomes {
		m, err := runlog.ReadManifest(o.Dir)
		if err != nil {
			t.Fatal(err)
		}
		wantLast := int64(4)
		if strings.Contains(o.ID, "-base-") {
			wantLast = 0
		}
		if m.Status != runlog.StatusDone || m.LastStep != wantLast || m.TotalSteps != wantLast || m.Experiment != "fk" {
			t.Errorf("%s: manifest status %s last %d total %d experiment %q", o.ID, m.Status, m.LastStep, m.TotalSteps, m.Experiment)
		}
		if !m.Provenance.AllowDirty || m.Provenance.Files["fk.yaml"] == "" && len(m.Provenance.Files) == 0 {
			t.Errorf("%s: provenance %+v lacks allow_dirty or the spec hash", o.ID, m.Provenance)
		}
		if m.Analysis["cliff_abs"] != s.Analysis.CliffAbs {
			t.Errorf("%s: analysis %v", o.ID, m.Analysis)
		}
	}
	before := rowsText(t, sum.Outcomes[2].Dir)

	again, err := Run(context.Background(), s, fakeOptions(runs))
	if err != nil {
		t.Fatal(err)
	}
	if got := states(again); got != strings.ReplaceAll(want, "=done", "=skipped") {
		t.Fatalf("second run states:\n%s", got)
	}
	if after := rowsText(t, sum.Outcomes[2].Dir); after != before {
		t.Fatal("a skipped run's rows changed")
	}

	changed := writeSpecIn(t, specDir, "0.25")
	_, err = Run(context.Background(), changed, fakeOptions(runs))
	if !errors.Is(err, ErrConfigMismatch) {
		t.Fatalf("changed lr: err = %v, want ErrConfigMismatch", err)
	}
	for _, frag := range []string{"grpo.lr: 0.5 -> 0.25", "voting-ip-s-synth-math-seed1", "nothing was run"} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("mismatch message lacks %q:\n%v", frag, err)
		}
	}
	// 64-bit seeds read back from the manifest exactly, so an unchanged
	// seed is never listed as differing (a float64 decode would round it).
	if strings.Contains(err.Error(), "seed:") {
		t.Errorf("mismatch message lists an unchanged seed:\n%v", err)
	}
	sts, err := Status(changed, runs, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.State != StateStale || !strings.Contains(st.Error, "grpo.lr") {
			t.Errorf("status of %s under the changed spec: %s (%s)", st.ID, st.State, st.Error)
		}
	}
}

// interruptAt cancels the pool when run id reports step.
func interruptAt(opt Options, id string, step int) (Options, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	opt.Reporter = stepHook{fn: func(rid string, s int) {
		if rid == id && s == step {
			cancel()
		}
	}}
	opt.Jobs = 1
	return opt, ctx
}

func TestInterruptResumeGivesSameRows(t *testing.T) {
	s := writeSpec(t, "0.5")
	ref := t.TempDir()
	if _, err := Run(context.Background(), s, fakeOptions(ref)); err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir()
	const id = "voting-sp-s-synth-math-seed1"
	opt, ctx := interruptAt(fakeOptions(runs), id, 1)
	sum, err := Run(ctx, s, opt)
	if err != nil {
		t.Fatal(err)
	}
	want := "sa-rl-s-synth-math-seed1=done\nvoting-base-s-synth-math-seed1=done\nvoting-sp-s-synth-math-seed1=interrupted\nvoting-ip-s-synth-math-seed1=not-started\n"
	if got := states(sum); got != want {
		t.Fatalf("interrupted pool:\n%s\nwant\n%s", got, want)
	}
	o := sum.Outcomes[2]
	if !errors.Is(o.Err, grpo.ErrInterrupted) || o.LastStep != 1 {
		t.Fatalf("interrupted run: err %v, last step %d (want ErrInterrupted after step 1)", o.Err, o.LastStep)
	}
	if m, _ := runlog.ReadManifest(o.Dir); m.Status != runlog.StatusInterrupted || m.LastStep != 1 {
		t.Fatalf("manifest after interrupt: status %s last %d", m.Status, m.LastStep)
	}
	sts, err := Status(s, runs, "voting-*")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range sts {
		got = append(got, st.ID+"="+st.State)
	}
	if strings.Join(got, " ") != "voting-base-s-synth-math-seed1=done voting-sp-s-synth-math-seed1=interrupted voting-ip-s-synth-math-seed1=pending" {
		t.Fatalf("status: %v", got)
	}

	sum, err = Run(context.Background(), s, fakeOptions(runs))
	if err != nil {
		t.Fatal(err)
	}
	if got := states(sum); got != "sa-rl-s-synth-math-seed1=skipped\nvoting-base-s-synth-math-seed1=skipped\nvoting-sp-s-synth-math-seed1=done\nvoting-ip-s-synth-math-seed1=done\n" {
		t.Fatalf("resumed pool:\n%s", got)
	}
	for _, id := range []string{"voting-sp-s-synth-math-seed1", "voting-ip-s-synth-math-seed1"} {
		a := rowsText(t, filepath.Join(runs, "fk", id))
		b := rowsText(t, filepath.Join(ref, "fk", id))
		if a != b {
			t.Errorf("%s: rows after interrupt and resume differ from an uninterrupted run", id)
		}
	}
}

// TestCorruptCheckpointOrLogFailsNamed damages a run interrupted at step
// 2 (checkpoints of steps 0 and 2 kept): damage after the checkpoint of
// step 0 rolls the log back to it, saying so, and the resumed run's rows
// equal an uninterrupted run's; damage no kept checkpoint precedes (the
// manifest, step 0's segment, both checkpoints) fails the run, named.
func TestCorruptCheckpointOrLogFailsNamed(t *testing.T) {
	const id = "voting-sp-s-synth-math-seed1"
	truncate := func(t *testing.T, p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, string(b[:len(b)/2]))
	}
	cases := []struct {
		name    string
		corrupt func(t *testing.T, dir string)
		want    error // nil: rolled back to step 0 and finished
	}{
		{"checkpoint state", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(grpo.CheckpointPath(filepath.Join(dir, "ckpt"), 2), "state.json"), "{not json")
		}, nil},
		{"checkpoint missing", func(t *testing.T, dir string) {
			if err := os.RemoveAll(grpo.CheckpointPath(filepath.Join(dir, "ckpt"), 2)); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"steps segment truncated", func(t *testing.T, dir string) {
			truncate(t, filepath.Join(dir, "steps", "000002.parquet"))
		}, nil},
		{"both checkpoints damaged", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(grpo.CheckpointPath(filepath.Join(dir, "ckpt"), 2), "state.json"), "{not json")
			if err := os.RemoveAll(grpo.CheckpointPath(filepath.Join(dir, "ckpt"), 0)); err != nil {
				t.Fatal(err)
			}
		}, runlog.ErrFileSize},
		{"step 0's segment truncated", func(t *testing.T, dir string) {
			truncate(t, filepath.Join(dir, "evals", "000000.parquet"))
		}, runlog.ErrTruncated},
		{"manifest", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, runlog.ManifestFile), `{"run_id": `)
		}, runlog.ErrBadManifest},
	}
	s := writeSpec(t, "0.5")
	ref := t.TempDir()
	if _, err := Run(context.Background(), s, fakeOptions(ref)); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runs := t.TempDir()
			opt, ctx := interruptAt(fakeOptions(runs), id, 2)
			if _, err := Run(ctx, s, opt); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(runs, "fk", id)
			if m, err := runlog.ReadManifest(dir); err != nil || m.LastStep != 2 || m.Status != runlog.StatusInterrupted {
				t.Fatalf("setup: status %s last step %d, err %v; want interrupted at step 2", m.Status, m.LastStep, err)
			}
			if got, err := grpo.CheckpointSteps(filepath.Join(dir, "ckpt")); err != nil || !slices.Equal(got, []int64{0, 2}) {
				t.Fatalf("kept checkpoints %v (%v), want [0 2]", got, err)
			}
			c.corrupt(t, dir)
			notes := &noteLog{}
			opt = fakeOptions(runs)
			opt.Reporter = notes
			sum, err := Run(context.Background(), s, opt)
			if err != nil {
				t.Fatal(err)
			}
			var o Outcome
			for _, x := range sum.Outcomes {
				if x.ID == id {
					o = x
				} else if x.State != StateDone && x.State != StateSkipped {
					t.Errorf("%s: %s (%v); other runs must continue", x.ID, x.State, x.Err)
				}
			}
			if c.want != nil {
				if o.State != StateFailed || !errors.Is(o.Err, c.want) {
					t.Fatalf("%s: state %s, err %v; want failed with %v", id, o.State, o.Err, c.want)
				}
				if c.want != runlog.ErrBadManifest && !strings.Contains(o.Err.Error(), "no roll-back") {
					t.Errorf("the refusal does not say why there is no roll-back: %v", o.Err)
				}
				return
			}
			if o.State != StateDone {
				t.Fatalf("%s: state %s, err %v; want done after rolling back", id, o.State, o.Err)
			}
			if note := notes.String(); !strings.Contains(note, "run "+id+": ") || !strings.Contains(note, "rolled back to the checkpoint of step 0") {
				t.Errorf("no note of the roll-back:\n%s", note)
			}
			if rowsText(t, dir) != rowsText(t, filepath.Join(ref, "fk", id)) {
				t.Errorf("rows after the roll-back differ from an uninterrupted run")
			}
		})
	}
}

// TestResumeRollsBackPastDamagedSegment: a run interrupted after step 3
// (checkpoints at 0, 2 and 3; the last two kept) whose segment after its
// second checkpoint (steps/000003) is truncated resumes from the checkpoint
// of step 2, saying so, and its logs are byte-identical with an
// uninterrupted run's, segment by segment (timing/ holds wall-clock
// seconds and is the one table that never is; runlog/SCHEMA.md).
func TestResumeRollsBackPastDamagedSegment(t *testing.T) {
	const id = "voting-ip-s-synth-math-seed1"
	s := writeSpec(t, "0.5")
	ref, runs := t.TempDir(), t.TempDir()
	if _, err := Run(context.Background(), s, fakeOptions(ref)); err != nil {
		t.Fatal(err)
	}
	iopt, ctx := interruptAt(fakeOptions(runs), id, 3)
	if _, err := Run(ctx, s, iopt); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(runs, "fk", id)
	if m, err := runlog.ReadManifest(dir); err != nil || m.LastStep != 3 || m.Status != runlog.StatusInterrupted {
		t.Fatalf("setup: status %s last step %d, err %v; want interrupted at step 3", m.Status, m.LastStep, err)
	}
	if got, err := grpo.CheckpointSteps(filepath.Join(dir, "ckpt")); err != nil || !slices.Equal(got, []int64{2, 3}) {
		t.Fatalf("kept checkpoints %v (%v), want [2 3]", got, err)
	}
	p := filepath.Join(dir, "steps", "000003.parquet")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, string(b[:len(b)-len(b)/3]))
	notes := &noteLog{}
	opt := fakeOptions(runs)
	opt.Reporter = notes
	sum, err := Run(context.Background(), s, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range sum.Outcomes {
		if o.State != StateDone && o.State != StateSkipped || o.ID == id && o.State != StateDone {
			t.Errorf("%s: %s (%v)", o.ID, o.State, o.Err)
		}
	}
	note := notes.String()
	for _, w := range []string{"run " + id + ": 1 damaged file:", "steps/000003.parquet", "rolled back to the checkpoint of step 2, the newest kept one before the damage; steps 3 to 3 run again"} {
		if !strings.Contains(note, w) {
			t.Errorf("the note lacks %q:\n%s", w, note)
		}
	}
	refDir := filepath.Join(ref, "fk", id)
	for _, tb := range runlog.Tables {
		if tb == runlog.TableTiming {
			continue
		}
		want, err := filepath.Glob(filepath.Join(refDir, tb, "*.parquet"))
		if err != nil || len(want) == 0 && tb == runlog.TableSteps {
			t.Fatalf("%s: reference segments %v (%v)", tb, want, err)
		}
		got, _ := filepath.Glob(filepath.Join(dir, tb, "*.parquet"))
		if len(got) != len(want) {
			t.Errorf("%s: %d segments, want %d", tb, len(got), len(want))
			continue
		}
		for i, w := range want {
			a, errA := os.ReadFile(got[i])
			b, errB := os.ReadFile(w)
			if errA != nil || errB != nil || filepath.Base(got[i]) != filepath.Base(w) || !bytes.Equal(a, b) {
				t.Errorf("%s differs from the uninterrupted run's %s (%v %v)", got[i], w, errA, errB)
			}
		}
	}
	if probs := runlog.CheckWith(dir, runlog.CheckOptions{ConfigHash: spec.StoredConfigHash}); len(probs) > 0 {
		t.Errorf("the resumed run's log has problems: %v", probs)
	}
}

// noteLog is a Reporter that keeps the notes.
type noteLog struct {
	nopReporter
	mu    sync.Mutex
	lines []string
}

func (n *noteLog) Note(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lines = append(n.lines, fmt.Sprintf(format, args...))
}

func (n *noteLog) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.lines, "\n")
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPerRoleColumnsFilledForSPAsForIP(t *testing.T) {
	s := writeSpec(t, "0.5")
	runs := t.TempDir()
	opt := fakeOptions(runs)
	opt.Only = "voting-[si]p-*"
	sum, err := Run(context.Background(), s, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Outcomes) != 2 || sum.Count(StateDone) != 2 {
		t.Fatalf("outcomes: %s", states(sum))
	}
	filled := map[string]map[string]bool{} // condition -> role/column -> filled at some step
	for _, o := range sum.Outcomes {
		r, err := runlog.ReadRun(o.Dir)
		if err != nil {
			t.Fatal(err)
		}
		cond := r.Manifest.Condition
		filled[cond] = map[string]bool{}
		for _, row := range r.Steps {
			if row.Role == "*" {
				continue
			}
			for col, v := range roleColumns(row) {
				if !isNaN(v) {
					filled[cond][row.Role+"."+col] = true
				}
			}
		}
	}
	for _, role := range []string{"generator", "aggregator"} {
		for col := range roleColumns(runlog.StepRow{}) {
			k := role + "." + col
			if !filled["ip"][k] || !filled["sp"][k] {
				t.Errorf("%s: filled under ip %v, under sp %v", k, filled["ip"][k], filled["sp"][k])
			}
		}
	}
}

// roleColumns are the per-role statistics of a steps row that every role
// with trained turns must fill.
func roleColumns(r runlog.StepRow) map[string]float64 {
	return map[string]float64{
		"loss": r.Loss, "grad_norm": r.GradNorm, "grad_share": r.GradShare,
		"tokens": float64(r.Tokens), "seqs": float64(r.Seqs), "mean_len": r.MeanLen,
		"entropy": r.Entropy, "perplexity": r.Perplexity, "ratio_mean": r.RatioMean, "ratio_max": r.RatioMax,
		"clip_frac": r.ClipFrac, "kl": r.KL, "reward_mean": r.RewardMean, "reward_std": r.RewardStd,
		"zero_var_frac": r.ZeroVarFrac, "lr": r.LR,
	}
}

func TestJobsRunConcurrentlyWithoutSharing(t *testing.T) {
	s := writeSpec(t, "0.5")
	a, b := t.TempDir(), t.TempDir()
	optA := fakeOptions(a)
	optA.Jobs = 1
	optB := fakeOptions(b)
	optB.Jobs = 4
	var mu sync.Mutex
	active, peak := 0, 0
	optB.Reporter = &countingReporter{mu: &mu, active: &active, peak: &peak}
	for _, o := range []Options{optA, optB} {
		if _, err := Run(context.Background(), s, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"sa-rl-s-synth-math-seed1", "voting-base-s-synth-math-seed1", "voting-sp-s-synth-math-seed1", "voting-ip-s-synth-math-seed1"} {
		if rowsText(t, filepath.Join(a, "fk", id)) != rowsText(t, filepath.Join(b, "fk", id)) {
			t.Errorf("%s: rows depend on --jobs", id)
		}
	}
	if peak < 1 || peak > 4 {
		t.Errorf("peak concurrent runs %d, want 1..4", peak)
	}
}

type countingReporter struct {
	nopReporter
	mu           *sync.Mutex
	active, peak *int
}

func (c *countingReporter) Started(string, int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.active++
	*c.peak = max(*c.peak, *c.active)
}

func (c *countingReporter) Finished(string, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.active--
}

func TestSetupFailuresAndInterruptions(t *testing.T) {
	s := writeSpec(t, "0.5")
	t.Run("base model fails: every run fails and says why", func(t *testing.T) {
		opt := fakeOptions(t.TempDir())
		opt.BaseModel = func(context.Context, spec.ModelConfig) (string, error) {
			return "", errors.New("no such model")
		}
		sum, err := Run(context.Background(), s, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range sum.Outcomes {
			if o.State != StateFailed || !strings.Contains(o.Err.Error(), "base model of scale s: no such model") {
				t.Errorf("%s: %s %v", o.ID, o.State, o.Err)
			}
			if m, err := runlog.ReadManifest(o.Dir); err != nil || m.Status != runlog.StatusFailed || !strings.Contains(m.Error, "no such model") {
				t.Errorf("%s: manifest %s %q (%v)", o.ID, m.Status, m.Error, err)
			}
		}
	})
	t.Run("signal while the base model is built: interrupted, not failed", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		opt := fakeOptions(t.TempDir())
		opt.Jobs = 1
		opt.BaseModel = func(ctx context.Context, _ spec.ModelConfig) (string, error) {
			cancel()
			<-ctx.Done()
			return "", ctx.Err()
		}
		sum, err := Run(ctx, s, opt)
		if err != nil {
			t.Fatal(err)
		}
		if got := states(sum); got != "sa-rl-s-synth-math-seed1=interrupted\nvoting-base-s-synth-math-seed1=not-started\nvoting-sp-s-synth-math-seed1=not-started\nvoting-ip-s-synth-math-seed1=not-started\n" {
			t.Fatalf("states:\n%s", got)
		}
	})
	t.Run("engine cannot open the base checkpoint", func(t *testing.T) {
		opt := fakeOptions(t.TempDir())
		opt.Engines = nativeEngines()
		opt.Only = "voting-base-*"
		opt.BaseModel = func(context.Context, spec.ModelConfig) (string, error) { return t.TempDir(), nil }
		sum, err := Run(context.Background(), s, opt)
		if err != nil {
			t.Fatal(err)
		}
		if o := sum.Outcomes[0]; o.State != StateFailed || !strings.Contains(o.Err.Error(), "open engine native") {
			t.Fatalf("%s %v", o.State, o.Err)
		}
	})
}

// TestPreflightRefusesMissingEngines: an engine the plan names that is not
// registered, or lacks a prerequisite, stops the invocation before any run
// folder or lock exists, naming every problem at once.
func TestPreflightRefusesMissingEngines(t *testing.T) {
	s := writeSpec(t, "1.0e-3")
	runs := t.TempDir()
	opt := fakeOptions(runs)
	opt.Engines = &engine.Registry{}
	err := opt.Engines.Register(engine.Driver{Name: "native", Version: "lacking",
		Check: func(context.Context, engine.Options) []error {
			return []error{errors.New("no python3"), errors.New("no torch package")}
		},
		Open: func(context.Context, string, engine.Options) (engine.Engine, error) {
			t.Error("an engine was opened despite missing prerequisites")
			return nil, errors.New("unreachable")
		}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), s, opt)
	if !errors.Is(err, engine.ErrUnavailable) || !strings.Contains(err.Error(), "engine native (models.s): no python3") || !strings.Contains(err.Error(), "engine native (models.s): no torch package") {
		t.Fatalf("err %v", err)
	}
	opt.Engines = &engine.Registry{}
	if _, err = Run(context.Background(), s, opt); !errors.Is(err, engine.ErrUnavailable) || !strings.Contains(err.Error(), `engine "native" is not registered`) {
		t.Fatalf("err %v", err)
	}
	if ents, err := os.ReadDir(runs); err != nil || len(ents) != 0 {
		t.Fatalf("runs folder holds %v (%v) after a refused preflight", ents, err)
	}
}
