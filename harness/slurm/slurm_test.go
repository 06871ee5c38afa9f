package slurm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/pin"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/spec"
)

func TestParseTime(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "30", want: 30 * time.Minute},
		{in: "5:30", want: 5*time.Minute + 30*time.Second},
		{in: "02:00:00", want: 2 * time.Hour},
		{in: "1-00:00:00", want: 24 * time.Hour},
		{in: "2-12", want: 60 * time.Hour},
		{in: "0-01:30", want: 90 * time.Minute},
		{in: "1-2:3:4", want: 26*time.Hour + 3*time.Minute + 4*time.Second},
		{in: "", bad: true},
		{in: "1h", bad: true},
		{in: "1:2:3:4", bad: true},
		{in: "-1", bad: true},
		{in: "1-", bad: true},
		{in: "a-01:00:00", bad: true},
		{in: "01::00", bad: true},
	}
	for _, c := range cases {
		got, err := ParseTime(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("ParseTime(%q) = %v, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestQueueStates(t *testing.T) {
	out := "12|0|RUNNING|0|None|\n12|1|PENDING|1|BeginTime|\n12|2|PENDING|0|Resources|\n13|N/A|PENDING|0|Dependency|\n" +
		"9|0|RUNNING|0|None|\n12|3|COMPLETING|2|None|\n"
	jobs, err := parseQueue(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 6 || jobs[3].Task != "" || jobs[1].Restarts != 1 {
		t.Fatalf("parseQueue = %+v", jobs)
	}
	recs := []Record{
		{ArrayJob: "5", Runs: []string{"a", "b"}}, // an old submission no longer queued
		{ArrayJob: "12", ReportJob: "13", Runs: []string{"a", "b", "c", "d", "e"}},
	}
	got := RunStates(recs, jobs)
	want := map[string]string{"a": "running", "b": "requeued (restart 1)", "c": "pending", "d": "completing (restart 2)"}
	if len(got) != len(want) {
		t.Errorf("RunStates = %v, want %v", got, want)
	}
	for id, w := range want {
		if l := got[id].Label(); l != w {
			t.Errorf("run %s: %q, want %q", id, l, w)
		}
	}
	if (Job{State: "REQUEUE_HOLD"}).Label() != "requeued" {
		t.Errorf("REQUEUE_HOLD is not shown as requeued")
	}
	for _, bad := range []string{"12|0|RUNNING\n", "12|0|RUNNING|x|None|\n"} {
		if _, err := parseQueue(bad); err == nil {
			t.Errorf("parseQueue(%q) accepted it", bad)
		}
	}
}

func TestLookSbatchWithoutSlurm(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := LookSbatch()
	if !errors.Is(err, ErrNoSbatch) || !strings.Contains(err.Error(), "no sbatch found") {
		t.Errorf("LookSbatch on an empty PATH: %v", err)
	}
	if Available() {
		t.Errorf("squeue found on an empty PATH")
	}
}

func nativeEngines(t *testing.T) *engine.Registry {
	t.Helper()
	reg := &engine.Registry{}
	if err := reg.Register(native.Driver()); err != nil {
		t.Fatal(err)
	}
	return reg
}

// smallSpec is a one-cell experiment of four runs; nothing here runs it.
const smallSpec = `experiment: sm
master_seed: 3
seeds: [1]
matrix:
  workflows: [voting]
  tasks: [synth-math]
  scales: [s]
  conditions: [base, sa-rl, sp, ip]
models:
  s:
    engine: native
    tiny: {hidden: 16, layers: 1, heads: 2, kv_heads: 1, head_dim: 8, intermediate: 32, rope_theta: 10000, max_positions: 512}
tasks:
  synth-math: {val_size: 4}
grpo:
  rollouts: 2
  problems_per_step: 1
  steps: 2
  warmup_steps: 0
  max_new_tokens: {default: 16}
eval: {every: 1, val_size: 4}
checkpoint: {every: 1}
`

// gitSpec commits smallSpec into a new repository and loads it.
func gitSpec(t *testing.T) (*spec.Spec, string) {
	t.Helper()
	return gitSpecText(t, smallSpec)
}

// gitSpecText commits text as sm.yaml into a new repository and loads it.
func gitSpecText(t *testing.T, text string) (*spec.Spec, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not on PATH")
	}
	repo := t.TempDir()
	p := filepath.Join(repo, "sm.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "sm.yaml"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "spec"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	s, err := spec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return s, repo
}

// finish writes a manifest for a run as runner would, with status.
func finish(t *testing.T, dir string, r spec.Run, hash, status string) {
	t.Helper()
	w, _, err := runlog.Open(dir, runlog.Manifest{RunID: r.ID, Experiment: "sm", ConfigHash: hash, Config: r.Config})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.SetStatus(status, ""); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPlanAndWrite(t *testing.T) {
	s, repo := gitSpec(t)
	runs := filepath.Join(t.TempDir(), "runs")
	opt := Options{Runner: runner.Options{RunsDir: runs, Engines: nativeEngines(t)}, Marlow: "/usr/local/bin/marlow", WorkDir: repo, Mem: "1G", CPUsPerTask: 1, MaxParallel: 2, Time: "00:10:00"}
	planned, err := spec.Plan(s)
	if err != nil {
		t.Fatal(err)
	}

	// One run is done with the plan's config: it is left out.
	done := planned[1]
	finish(t, filepath.Join(runs, "sm", done.ID), done, done.ConfigHash, runlog.StatusDone)
	// One run is interrupted: it is submitted to resume.
	half := planned[2]
	finish(t, filepath.Join(runs, "sm", half.ID), half, half.ConfigHash, runlog.StatusInterrupted)

	b, err := Plan(context.Background(), s, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Tasks) != len(planned)-1 || len(b.Done) != 1 || b.Done[0] != done.ID {
		t.Fatalf("tasks %+v, done %v; want all but %s", b.Tasks, b.Done, done.ID)
	}
	if b.Name != "submit-001" || b.Root != filepath.Join(runs, "sm") {
		t.Errorf("name %s root %s", b.Name, b.Root)
	}
	if b.Script.WarnSeconds != 120 || !strings.Contains(b.Script.Text(), "#SBATCH --array=0-2%2\n") {
		t.Errorf("warn %d; script:\n%s", b.Script.WarnSeconds, b.Script.Text())
	}
	if b.Report.Out != filepath.Join(repo, "reports", "sm") || b.Report.Spec != s.File || b.Report.RunsRoot != runs {
		t.Errorf("report %+v", b.Report)
	}
	if err := b.Write(); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(b.MapPath())
	if err != nil {
		t.Fatal(err)
	}
	ids, err := ParseMap(string(text))
	if err != nil {
		t.Fatal(err)
	}
	for i, task := range b.Tasks {
		if ids[i] != task.ID || task.Index != i {
			t.Errorf("map index %d: %s, task %+v", i, ids[i], task)
		}
		// The job log exists before submission, and Slurm's output link
		// of the task's index leads to it.
		logPath := filepath.Join(task.Dir, runlog.JobLogFile)
		if _, err := os.Stat(logPath); err != nil {
			t.Errorf("run %s: %v", task.ID, err)
		}
		link := strings.Replace(b.Script.Output, "%a", strconv.Itoa(i), 1)
		f, err := os.OpenFile(link, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatalf("output of index %d: %v", i, err)
		}
		f.WriteString("slurm says hello\n")
		f.Close()
		if data, _ := os.ReadFile(logPath); string(data) != "slurm says hello\n" {
			t.Errorf("run %s: job log holds %q", task.ID, data)
		}
	}
	// A run folder holding only its job log opens as a new run.
	fresh := b.Tasks[0]
	w, last, err := runlog.Open(fresh.Dir, runlog.Manifest{RunID: fresh.ID, Experiment: "sm", ConfigHash: "h"})
	if err != nil || last != -1 {
		t.Fatalf("open a run folder holding its job log: %v (last %d)", err, last)
	}
	w.Close()
	os.RemoveAll(fresh.Dir)

	// The next submission gets the next name; earlier scripts stay.
	b2, err := Plan(context.Background(), s, opt)
	if err != nil {
		t.Fatal(err)
	}
	if b2.Name != "submit-002" {
		t.Errorf("second submission named %s", b2.Name)
	}
}

func TestPlanRefuses(t *testing.T) {
	s, repo := gitSpec(t)
	runs := filepath.Join(t.TempDir(), "runs")
	opt := Options{Runner: runner.Options{RunsDir: runs, Engines: nativeEngines(t)}, Marlow: "marlow"}

	planned, err := spec.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	// The folder holds the run trained with another learning rate.
	r := planned[0]
	r.Config.GRPO.LR *= 2
	other, err := spec.ConfigHash(r.Config)
	if err != nil {
		t.Fatal(err)
	}
	finish(t, filepath.Join(runs, "sm", r.ID), r, other, runlog.StatusDone)
	if _, err := Plan(context.Background(), s, opt); !errors.Is(err, runner.ErrConfigMismatch) {
		t.Errorf("a folder holding another config: %v, want ErrConfigMismatch", err)
	}
	os.RemoveAll(runs)

	// A damaged folder (its config does not hash to its config_hash) is
	// refused too, naming the run.
	finish(t, filepath.Join(runs, "sm", planned[0].ID), planned[0], "not-the-hash", runlog.StatusDone)
	if _, err := Plan(context.Background(), s, opt); err == nil || !strings.Contains(err.Error(), "do not match their manifests") || !strings.Contains(err.Error(), planned[0].ID) {
		t.Errorf("a damaged run folder: %v", err)
	}
	os.RemoveAll(runs)

	if err := os.WriteFile(filepath.Join(repo, "sm.yaml"), []byte(smallSpec+"# edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Plan(context.Background(), s, opt); !errors.Is(err, pin.ErrDirty) {
		t.Errorf("a dirty tree: %v, want ErrDirty", err)
	}
	opt.Runner.AllowDirty = true
	b, err := Plan(context.Background(), s, opt)
	if err != nil || !b.Script.AllowDirty {
		t.Fatalf("--allow-dirty: %v", err)
	}
	// The engine check of marlow run applies too.
	noEngines := opt
	noEngines.Runner.Engines = &engine.Registry{}
	if _, err := Plan(context.Background(), s, noEngines); err == nil || !strings.Contains(err.Error(), `engine "native" is not registered`) {
		t.Errorf("an unregistered engine: %v", err)
	}
	opt.Runner.Only = "nothing-*"
	if _, err := Plan(context.Background(), s, opt); err == nil || !strings.Contains(err.Error(), "matches none") {
		t.Errorf("--only matching nothing: %v", err)
	}
	opt.Runner.Only = ""
	for _, o := range []Options{
		{Runner: opt.Runner, Marlow: "marlow", Time: "1h"},
		{Runner: opt.Runner, Marlow: "marlow", SbatchArgs: []string{"constraint=a100"}},
		{Runner: opt.Runner, Marlow: "marlow", CPUsPerTask: -1},
	} {
		if _, err := Plan(context.Background(), s, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	// The warning never takes more than half of a short time limit.
	b, err = Plan(context.Background(), s, Options{Runner: opt.Runner, Marlow: "marlow", Time: "1"})
	if err != nil || b.Script.WarnSeconds != 30 {
		t.Fatalf("--time 1: warn %d s, %v; want 30 s", b.Script.WarnSeconds, err)
	}
}

// TestCUDATasksGetOneGPU: a plan on cuda gets --gres=gpu:1 per task unless
// --gres names its own one GPU, and --gres asking for more is refused; a
// plan on the CPU asks for no GPU. Each task runs one run (--jobs 1), which
// marlow run pins to the GPU the task was given.
func TestCUDATasksGetOneGPU(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	os.Mkdir(ckpt, 0o755)
	for _, f := range []string{"config.json", "tokenizer.json", "model.safetensors"} {
		os.WriteFile(filepath.Join(ckpt, f), []byte("{}"), 0o644)
	}
	text := strings.Replace(smallSpec, "    engine: native\n    tiny: {hidden: 16, layers: 1, heads: 2, kv_heads: 1, head_dim: 8, intermediate: 32, rope_theta: 10000, max_positions: 512}\n",
		"    engine: torch\n    checkpoint: "+ckpt+"\n    device: cuda\n", 1)
	if text == smallSpec {
		t.Fatal("smallSpec has no model section to switch to torch")
	}
	s, repo := gitSpecText(t, text)
	// A stand-in torch driver: the submitting machine needs no GPU.
	reg := &engine.Registry{}
	if err := reg.Register(engine.Driver{Name: "torch", Open: func(context.Context, string, engine.Options) (engine.Engine, error) {
		return nil, errors.New("not opened here")
	}}); err != nil {
		t.Fatal(err)
	}
	cpu, _ := gitSpec(t)
	for _, tc := range []struct {
		s             *spec.Spec
		reg           *engine.Registry
		gres, want    string
		wantErr       string
		wantNoGPULine bool
	}{
		{s: s, reg: reg, want: "#SBATCH --gres=gpu:1\n"},
		{s: s, reg: reg, gres: "gpu:h200:1", want: "#SBATCH --gres=gpu:h200:1\n"},
		{s: s, reg: reg, gres: "gpu:2", wantErr: `--gres "gpu:2" asks for 2 GPUs per task`},
		{s: s, reg: reg, gres: "gpu:a100:4,shard:1", wantErr: "asks for 4 GPUs"},
		{s: cpu, reg: nativeEngines(t), wantNoGPULine: true},
	} {
		opt := Options{Runner: runner.Options{RunsDir: filepath.Join(t.TempDir(), "runs"), Engines: tc.reg}, Marlow: "/usr/local/bin/marlow", WorkDir: repo, Gres: tc.gres}
		b, err := Plan(context.Background(), tc.s, opt)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("gres %q: %v, want an error with %q", tc.gres, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("gres %q: %v", tc.gres, err)
		}
		text := b.Script.Text()
		if tc.wantNoGPULine {
			if strings.Contains(text, "--gres") {
				t.Errorf("a CPU plan asks for a GPU:\n%s", text)
			}
			continue
		}
		if !strings.Contains(text, tc.want) || !strings.Contains(text, `--only "$run" --jobs 1 `) {
			t.Errorf("gres %q: script lacks %q or --jobs 1:\n%s", tc.gres, tc.want, text)
		}
	}
}
