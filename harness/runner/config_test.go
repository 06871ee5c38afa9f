package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/datasets/dapo"
	"github.com/marlowlab/marlow/datasets/datasetstest"
	"github.com/marlowlab/marlow/datasets/synthcode"
	"github.com/marlowlab/marlow/datasets/synthmath"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

const knobSpec = `experiment: knobs
master_seed: 3
seeds: [1]
matrix:
  workflows: [voting]
  tasks: [synth-math, synth-code]
  scales: [s]
  conditions: [sp]
models:
  s:
    engine: native
    tiny: {hidden: 16, layers: 1, heads: 2, kv_heads: 1, head_dim: 8, intermediate: 32, rope_theta: 10000, max_positions: 512}
tasks:
  synth-math: {val_size: 8, train_size: 5}
  synth-code: {val_size: 8}
grpo:
  max_new_tokens: {default: 48, aggregator: 16}
  kl_coef: {generator: 0.1}
  coherence: {lambda: 0.5, ema_decay: 0.8}
`

func loadText(t *testing.T, name, text string) *spec.Spec {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// effective is everything a run config reaches: the trainer config, the
// task's own config (or the error building it), the manifest's identity
// and analysis fields, and the model config handed to the base-model and
// engine functions.
func effective(rc spec.RunConfig) string {
	task, err := OpenTask(rc.Data, TaskOptions{})
	var taskCfg any
	switch tk := task.(type) {
	case *synthmath.Task:
		taskCfg = tk.Config()
	case *synthcode.Task:
		taskCfg = tk.Config()
	case *pool:
		taskCfg = fmt.Sprintf("pool %d of %T", tk.n, tk.Task)
		if inner, ok := tk.Task.(*synthmath.Task); ok {
			taskCfg = []any{tk.n, tk.seed, inner.Config()}
		}
	}
	b, _ := json.Marshal(map[string]any{
		"trainer": TrainerConfig(rc), "task": taskCfg, "task_err": fmt.Sprint(err),
		"manifest": []any{rc.ID, rc.Task, rc.Scale, rc.SeedIndex, rc.Condition, rc.Workflow, rc.EvalWorkflows, AnalysisParams(rc.Analysis)},
		"model":    rc.Model,
	})
	return string(b)
}

// exempt are run-config keys that intentionally reach nothing but the
// config hash: what derives the others, or what only file sources use.
var exempt = map[string]string{
	"seed_version":     "names the seed derivation; the seed itself is used",
	"data.kind":        "derived from data.source",
	"data.source":      "selects the constructor; tested by TestOpenTask",
	"data.task":        "the task's name; rc.task is the same and is recorded",
	"train":            "derived from condition; a base run's steps are zeroed, tested separately",
	"model.scale":      "rc.scale is the same and is recorded",
	"model.engine":     "selects the engine; tested by TestNativeEngineRefusesOthers",
	"data.split_seed":  "", // must reach: listed to document the check below
	"data.answer_mode": "dapo only",
	"data.path":        "file sources only",
}

// TestEveryKnobReachesTheRun changes each leaf of a run config in turn and
// checks that what the run uses changes: no key is accepted and ignored.
func TestEveryKnobReachesTheRun(t *testing.T) {
	s := loadText(t, "knobs.yaml", knobSpec)
	runs, err := spec.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, run := range runs {
		rc := run.Config
		base := effective(rc)
		leaves, err := runlog.ConfigLeaves(rc)
		if err != nil {
			t.Fatal(err)
		}
		for path := range leaves {
			if why, ok := exempt[path]; ok && why != "" {
				continue
			}
			mut, err := mutate(rc, path)
			if err != nil {
				t.Fatalf("%s: mutate %s: %v", run.ID, path, err)
			}
			if effective(mut) == base {
				t.Errorf("%s: changing %s changes nothing the run uses", run.ID, path)
			}
			checked++
		}
	}
	if checked < 60 {
		t.Fatalf("only %d knobs checked; the walk is broken", checked)
	}
}

// mutate returns rc with the leaf at path changed.
func mutate(rc spec.RunConfig, path string) (spec.RunConfig, error) {
	raw, err := json.Marshal(rc)
	if err != nil {
		return rc, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return rc, err
	}
	if !setLeaf(&root, splitPath(path)) {
		return rc, fmt.Errorf("no leaf %s", path)
	}
	b, err := json.Marshal(root)
	if err != nil {
		return rc, err
	}
	var out spec.RunConfig
	err = json.Unmarshal(b, &out)
	return out, err
}

func splitPath(p string) []string {
	p = strings.ReplaceAll(p, "[", ".[")
	return strings.Split(p, ".")
}

func setLeaf(node *any, parts []string) bool {
	if len(parts) == 0 {
		switch v := (*node).(type) {
		case json.Number:
			if strings.ContainsAny(v.String(), ".eE") {
				f, _ := v.Float64()
				*node = json.Number(fmt.Sprint(f*1.5 + 0.125))
			} else if u, err := strconv.ParseUint(v.String(), 10, 64); err == nil {
				*node = json.Number(strconv.FormatUint(u^1, 10))
			} else {
				i, _ := strconv.ParseInt(v.String(), 10, 64)
				*node = json.Number(strconv.FormatInt(i-1, 10))
			}
		case bool:
			*node = !v
		case string:
			*node = v + "x"
		case map[string]any:
			(*node).(map[string]any)["generator"] = json.Number("7")
		case []any:
			*node = append(v, "q")
		default:
			return false
		}
		return true
	}
	switch v := (*node).(type) {
	case map[string]any:
		child, ok := v[parts[0]]
		if !ok {
			return false
		}
		if !setLeaf(&child, parts[1:]) {
			return false
		}
		v[parts[0]] = child
		return true
	case []any:
		var i int
		if _, err := fmt.Sscanf(parts[0], "[%d]", &i); err != nil || i >= len(v) {
			return false
		}
		return setLeaf(&v[i], parts[1:])
	}
	return false
}

func TestTrainerConfigMapping(t *testing.T) {
	s := loadText(t, "knobs.yaml", knobSpec)
	runs, err := spec.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	rc := runs[0].Config
	c := TrainerConfig(rc)
	if err := c.Validate(); err != nil {
		t.Fatalf("mapped config does not validate: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"default max new tokens", c.DefaultMaxNewTokens, 48},
		{"per-role max new tokens", c.MaxNewTokens, map[string]int{"aggregator": 16}},
		{"schedule", c.Schedule.Kind, rc.GRPO.Schedule},
		{"schedule total", c.Schedule.Total, rc.GRPO.Steps},
		{"warmup", c.Schedule.Warmup, rc.GRPO.WarmupSteps},
		{"adapter targets", c.Adapter.Targets, rc.GRPO.Lora.Targets},
		{"kl", c.KLCoef, map[string]float64{"generator": 0.1}},
		{"coherence", c.Coherence, &engine.Coherence{Lambda: 0.5, EMADecay: 0.8}},
		{"save every", c.SaveEvery, rc.Checkpoint.Every},
		{"eval workflows", c.EvalWorkflows, rc.EvalWorkflows},
	}
	for _, ck := range checks {
		if !reflect.DeepEqual(ck.got, ck.want) {
			t.Errorf("%s: got %v, want %v", ck.name, ck.got, ck.want)
		}
	}
	rc.Train = false
	if got := TrainerConfig(rc).Steps; got != 0 {
		t.Errorf("an evaluation-only run trains %d steps", got)
	}
}

func TestOpenTask(t *testing.T) {
	sm := &spec.SynthMath{OperandsMin: 2, OperandsMax: 3, ValueMax: 9, Operators: []string{"+", "*"}}
	sc := &spec.SynthCode{StagesMin: 1, StagesMax: 2, ReduceProb: 0.5, ValueMax: 9, ListMin: 2, ListMax: 4, ShownExamples: 2, HiddenTests: 3}
	dcRoot := t.TempDir()
	datasetstest.WriteDeepCoder(t, filepath.Join(dcRoot, "primeintellect", "train-00000-of-00001.parquet"),
		[]datasetstest.CodeRow{{Problem: "p", Tests: `[{"input": "", "output": "1"}]`}})
	dapoFile := filepath.Join(t.TempDir(), "dapo.parquet")
	var rows []datasetstest.MathRow
	for _, q := range []string{"Compute 1+1.", "Compute 2+2.", "Compute 3+3.", "计算 1+1。"} {
		rows = append(rows, datasetstest.MathRow{Prompt: dapo.WrapperPrefix + q + dapo.WrapperSuffix, Truth: "2"})
	}
	datasetstest.WriteDAPO(t, dapoFile, rows)
	cases := []struct {
		name    string
		d       spec.DataConfig
		wantErr string
		check   func(t *testing.T, d spec.DataConfig)
	}{
		{name: "synth-math", d: spec.DataConfig{Task: "m", Source: "synth-math", ValSize: 5, SplitSeed: 4, SynthMath: sm},
			check: func(t *testing.T, d spec.DataConfig) {
				tk, _ := OpenTask(d, TaskOptions{})
				got := tk.(*synthmath.Task).Config()
				want := synthmath.Config{Seed: 4, ValSize: 5, OperandsMin: 2, OperandsMax: 3, ValueMax: 9, Ops: "+*"}
				if got != want {
					t.Fatalf("config %+v, want %+v", got, want)
				}
			}},
		{name: "synth-code", d: spec.DataConfig{Task: "c", Source: "synth-code", ValSize: 5, SplitSeed: 4, SynthCode: sc},
			check: func(t *testing.T, d spec.DataConfig) {
				tk, _ := OpenTask(d, TaskOptions{})
				got := tk.(*synthcode.Task).Config()
				want := synthcode.Config{Seed: 4, ValSize: 5, StagesMin: 1, StagesMax: 2, ReduceProb: 0.5, ValueMax: 9, ListMin: 2, ListMax: 4, Examples: 2, Hidden: 3}
				if got != want {
					t.Fatalf("config %+v, want %+v", got, want)
				}
			}},
		{name: "train pool", d: spec.DataConfig{Task: "m", Source: "synth-math", ValSize: 5, SplitSeed: 4, SynthMath: sm, TrainSize: 3},
			check: func(t *testing.T, d spec.DataConfig) {
				tk, _ := OpenTask(d, TaskOptions{})
				seen := map[string]int{}
				for i := int64(0); i < 30; i++ {
					p, err := tk.Train(i)
					if err != nil {
						t.Fatal(err)
					}
					seen[p.ID]++
				}
				if len(seen) != 3 {
					t.Fatalf("a pool of 3 visited %d distinct problems: %v", len(seen), seen)
				}
				for id, n := range seen {
					if n != 10 {
						t.Fatalf("problem %s visited %d times in 10 epochs", id, n)
					}
				}
				if _, err := tk.Train(-1); err == nil {
					t.Fatal("negative cursor accepted")
				}
			}},
		{name: "bad synth knob", d: spec.DataConfig{Task: "m", Source: "synth-math", ValSize: 5, SynthMath: &spec.SynthMath{OperandsMin: 2, OperandsMax: 3, ValueMax: 9, Operators: []string{"/"}}},
			wantErr: "task m (source synth-math): synthmath: Ops"},
		{name: "missing settings", d: spec.DataConfig{Task: "m", Source: "synth-math", ValSize: 5}, wantErr: "no synth_math settings"},
		{name: "unknown source", d: spec.DataConfig{Task: "q", Source: "quiz"}, wantErr: `unknown source "quiz"`},
		{name: "dapo file missing", d: spec.DataConfig{Task: "d", Source: "dapo-math", Path: "/nonexistent/dapo.parquet"}, wantErr: "task d (source dapo-math)"},
		{name: "deepcoder folder missing", d: spec.DataConfig{Task: "c", Source: "deepcoder", Path: "/nonexistent/deepcoder"}, wantErr: "task c (source deepcoder)"},
		{name: "deepcoder empty folder", d: spec.DataConfig{Task: "c", Source: "deepcoder", Path: t.TempDir()}, wantErr: "holds no .parquet shards"},
		{name: "deepcoder subset without test shards", d: spec.DataConfig{Task: "c", Source: "deepcoder", Path: dcRoot, Subsets: []string{"primeintellect"}, TestPath: dcRoot},
			wantErr: "task c (source deepcoder): deepcoder: subset primeintellect has no test-*.parquet shards"},
		{name: "deepcoder unchosen subset", d: spec.DataConfig{Task: "c", Source: "deepcoder", Path: dcRoot, Subsets: []string{"taco"}},
			wantErr: "subset taco: no folder"},
		{name: "dapo language", d: spec.DataConfig{Task: "d", Source: "dapo-math", Path: dapoFile, Language: "en", ValFrac: 0.1},
			check: func(t *testing.T, d spec.DataConfig) {
				tk, _ := OpenTask(d, TaskOptions{})
				st := tk.(*dapo.Task).Stats()
				if st.OtherLanguage != 1 || st.Problems != 3 || st.Stripped != 4 {
					t.Fatalf("stats %+v", st)
				}
				val, _ := tk.Validation()
				for i := 0; i < tk.(*dapo.Task).TrainSize(); i++ {
					p, _ := tk.Train(int64(i))
					val = append(val, p)
				}
				for _, p := range val {
					if strings.Contains(p.Prompt, "Solve the following") {
						t.Fatalf("wrapper reached the task: %q", p.Prompt)
					}
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := OpenTask(c.d, TaskOptions{})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, c.d)
		})
	}
}

func TestNativeEngineRefusesOthers(t *testing.T) {
	_, _, err := nativeEngines().Open(context.Background(), "torch", t.TempDir(), engine.Options{Threads: 1})
	if err == nil || !strings.Contains(err.Error(), `engine "torch"`) {
		t.Fatalf("err %v", err)
	}
	_, _, err = nativeEngines().Open(context.Background(), "native", filepath.Join(t.TempDir(), "none"), engine.Options{Threads: 1})
	if err == nil {
		t.Fatal("a missing checkpoint folder opened")
	}
}

func TestSelect(t *testing.T) {
	runs := []spec.Run{{ID: "voting-sp-s-m-seed1"}, {ID: "voting-ip-s-m-seed1"}, {ID: "sa-rl-s-m-seed1"}}
	cases := []struct {
		only, want, err string
	}{
		{"", "voting-sp-s-m-seed1 voting-ip-s-m-seed1 sa-rl-s-m-seed1", ""},
		{"voting-*", "voting-sp-s-m-seed1 voting-ip-s-m-seed1", ""},
		{"*-ip-*", "voting-ip-s-m-seed1", ""},
		{"eval-*", "", "matches none of the 3 planned runs"},
		{"[", "", "--only \"[\""},
	}
	for _, c := range cases {
		got, err := Select(runs, c.only)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.only, err, c.err)
			}
			continue
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		if strings.Join(ids, " ") != c.want || err != nil {
			t.Errorf("%q: %v (%v), want %s", c.only, ids, err, c.want)
		}
	}
}

// The manifest's analysis map is the only interface between the spec and
// the analysis package (which must not import the spec): the spec's
// defaults, written by AnalysisParams, must read back through
// analysis.ParamsFromMap as analysis's own defaults.
func TestAnalysisParamsReadByAnalysis(t *testing.T) {
	s, err := spec.Load("../../seeds/demo.yaml") // no analysis section: every default
	if err != nil {
		t.Fatal(err)
	}
	got, err := analysis.ParamsFromMap(AnalysisParams(s.Analysis))
	if err != nil {
		t.Fatalf("analysis rejects the runner's parameter map: %v", err)
	}
	if want := analysis.DefaultParams(); !reflect.DeepEqual(got, want) {
		t.Errorf("spec defaults read by analysis = %+v, want analysis defaults %+v", got, want)
	}
}

// TestCoherenceDefaultDecay: a spec that turns the regularizer on without
// ema_decay gets the decay of the measuring-only EMA every run keeps
// (engine.DefaultCoherenceEMADecay), so the documented default is one number.
func TestCoherenceDefaultDecay(t *testing.T) {
	s := loadText(t, "coh.yaml", strings.Replace(knobSpec, "coherence: {lambda: 0.5, ema_decay: 0.8}", "coherence: {lambda: 0.5}", 1))
	if s.GRPO.Coherence == nil || s.GRPO.Coherence.EMADecay != engine.DefaultCoherenceEMADecay {
		t.Fatalf("coherence %+v, want ema_decay %v by default", s.GRPO.Coherence, engine.DefaultCoherenceEMADecay)
	}
	if c := engine.CoherenceMonitor(); c.Lambda != 0 || c.EMADecay != engine.DefaultCoherenceEMADecay || c.Validate() != nil {
		t.Errorf("monitor %+v: want lambda 0 and the default decay, valid", c)
	}
}

// TestCoherenceStepForm: grpo.coherence.form step reaches the trainer's
// config and its train options, and changes the config hash; without the
// key the trainer's coherence has no form (the paper's form), so the
// configs of runs planned before the key existed hash as they did.
func TestCoherenceStepForm(t *testing.T) {
	trainer := func(text string) grpo.Config {
		t.Helper()
		runs, err := spec.Plan(loadText(t, "coh.yaml", text))
		if err != nil {
			t.Fatal(err)
		}
		return TrainerConfig(runs[0].Config)
	}
	paper := trainer(knobSpec)
	step := trainer(strings.Replace(knobSpec, "coherence: {lambda: 0.5, ema_decay: 0.8}", "coherence: {lambda: 0.5, ema_decay: 0.8, form: step}", 1))
	if paper.Coherence == nil || paper.Coherence.Form != "" {
		t.Fatalf("paper's form: coherence %+v, want no form", paper.Coherence)
	}
	if step.Coherence == nil || *step.Coherence != (engine.Coherence{Lambda: 0.5, EMADecay: 0.8, Form: engine.CoherenceStep}) {
		t.Fatalf("step form: coherence %+v", step.Coherence)
	}
	if err := step.Validate(); err != nil {
		t.Fatal(err)
	}
	if paper.Hash() == step.Hash() {
		t.Error("the step form's config hashes as the paper's form's")
	}
	b, err := json.Marshal(paper)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "Form") {
		t.Errorf("the paper's form encodes a form: %s", b)
	}
}
