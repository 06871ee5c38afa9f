package pretrain

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/harness/spec"
)

// tinySpec is a spec with a very small shape and short completions, for
// tests that train and sample.
const tinySpec = `experiment: pt
master_seed: 5
seeds: [1]
matrix:
  workflows: [voting, eval-opt, orch-workers]
  tasks: [synth-math, synth-code]
  scales: [s, m]
  conditions: [base]
models:
  s:
    tiny: {hidden: 16, layers: 1, heads: 2, kv_heads: 1, head_dim: 8, intermediate: 24, max_positions: 1024}
  m:
    tiny: {hidden: 24, layers: 1, heads: 2, kv_heads: 1, head_dim: 8, intermediate: 32, max_positions: 1024}
tasks:
  synth-math:
    val_size: 3
  synth-code:
    val_size: 3
grpo:
  max_new_tokens: {default: 12}
`

// testRepo writes the tiny spec into a fresh repository layout (with an
// empty seeds/models) and loads it.
func testRepo(t *testing.T) (root string, s *spec.Spec) {
	t.Helper()
	root = t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, CommittedDir), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "seeds", "pt.yaml")
	if err := os.WriteFile(p, []byte(tinySpec), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return root, s
}

// reducedConfig is a budget of a few steps.
func reducedConfig() Config {
	c := DefaultConfig()
	c.Steps = map[string]int{"default": 3}
	c.BatchSize = 2
	c.WarmupSteps = 1
	return c
}

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// TestRebuildIsByteIdentical trains the same job twice (with different
// thread counts) and once with another seed.
func TestRebuildIsByteIdentical(t *testing.T) {
	_, s := testRepo(t)
	job, err := FromSpec(s, "s", reducedConfig())
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	a, b, c := filepath.Join(tmp, "a"), filepath.Join(tmp, "b"), filepath.Join(tmp, "c")
	ra, err := Train(context.Background(), job, a, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if _, err := Train(context.Background(), job, b, Options{Threads: 2, Progress: &log, LogEvery: 1}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "pretrain s: step "); n != 3 {
		t.Errorf("progress printed %d step lines, want 3:\n%s", n, log.String())
	}
	fa, fb := readAll(t, a), readAll(t, b)
	for _, f := range []string{model.ConfigFile, model.WeightsFile, model.TokenizerFile, LossFile, JobFile} {
		if len(fa[f]) == 0 {
			t.Fatalf("%s missing or empty", f)
		}
	}
	if len(fa) != len(fb) {
		t.Fatalf("file sets differ: %d vs %d", len(fa), len(fb))
	}
	for name, x := range fa {
		if !bytes.Equal(x, fb[name]) {
			t.Errorf("%s differs between two builds of the same job", name)
		}
	}
	other := job
	other.Pretrain = job.Pretrain.Clone()
	other.Pretrain.Seed++
	if _, err := Train(context.Background(), other, c, Options{}); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(fa[model.WeightsFile], readAll(t, c)[model.WeightsFile]) {
		t.Error("another seed gave the same weights")
	}
	if ra.Steps != 3 || ra.Tokens <= 0 || !(ra.FinalLoss > 0) || ra.Params != job.Model.NumParams() {
		t.Errorf("result %+v", ra)
	}
	// The checkpoint opens in the engine and the loss curve reads back.
	if _, err := native.Open(a, native.Options{}); err != nil {
		t.Fatalf("open checkpoint: %v", err)
	}
	rows := readLoss(t, fa[LossFile])
	if len(rows) != 3 || rows[2].Step != 2 || rows[2].Loss != ra.FinalLoss {
		t.Fatalf("loss rows %+v, final loss %v", rows, ra.FinalLoss)
	}
	if _, err := Train(context.Background(), job, a, Options{}); err == nil {
		t.Fatal("Train overwrote an existing folder")
	}
}

func readLoss(t *testing.T, b []byte) []LossRow {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if got := tbl.Schema().String(); !strings.Contains(got, "grad_norm") {
		t.Fatalf("schema %s", got)
	}
	tr := array.NewTableReader(tbl, -1)
	defer tr.Release()
	var rows []LossRow
	for tr.Next() {
		rec := tr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			rows = append(rows, LossRow{
				Step:     rec.Column(0).(*array.Int64).Value(i),
				LR:       rec.Column(1).(*array.Float64).Value(i),
				Loss:     rec.Column(2).(*array.Float64).Value(i),
				Tokens:   rec.Column(3).(*array.Int64).Value(i),
				GradNorm: rec.Column(4).(*array.Float64).Value(i),
			})
		}
	}
	return rows
}

// TestCommittedCheckpointFound is the fresh-clone path: a checkpoint
// committed under seeds/models is found without building, the cache is
// used next, and a damaged committed copy is not trusted.
func TestCommittedCheckpointFound(t *testing.T) {
	root, s := testRepo(t)
	job, err := FromSpec(s, "s", reducedConfig())
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	l := Locator{RepoRoot: RepoRootOf(s.File), CacheRoot: cache}
	if l.RepoRoot != root {
		t.Fatalf("RepoRootOf = %q, want %q", l.RepoRoot, root)
	}
	if dir, _, err := l.Find(job); err != nil || dir != "" {
		t.Fatalf("empty repo: Find = %q, %v", dir, err)
	}
	noBuild := l
	noBuild.NoBuild = true
	if _, _, err := noBuild.Ensure(context.Background(), job); err == nil || !strings.Contains(err.Error(), "marlow pretrain") {
		t.Fatalf("NoBuild Ensure on an empty repo: err = %v", err)
	}
	built, err := Build(context.Background(), l, []Job{job}, true)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := job.DirName()
	want := filepath.Join(root, CommittedDir, name)
	if built[0].Dir != want || built[0].Where != FromBuild {
		t.Fatalf("Build --commit = %+v, want a build into %s", built[0], want)
	}
	// A fresh clone: a new, empty cache, and building switched off.
	fresh := Locator{RepoRoot: root, CacheRoot: t.TempDir(), NoBuild: true}
	dir, where, err := fresh.Ensure(context.Background(), job)
	if err != nil || dir != want || where != FromCommitted {
		t.Fatalf("fresh clone: Ensure = %q, %q, %v; want %s from the repository", dir, where, err, want)
	}
	// Ensure on the spec finds the same folder.
	t.Setenv(CacheEnv, t.TempDir())
	t.Setenv("HOME", t.TempDir())
	// The spec's own configuration differs from reducedConfig, so its key
	// differs: build nothing, just compare keys.
	specJob, err := FromSpec(s, "s", ConfigOf(s, "s"))
	if err != nil {
		t.Fatal(err)
	}
	k1, _ := job.Key()
	k2, _ := specJob.Key()
	if k1 == k2 {
		t.Fatal("a different budget gave the same key")
	}
	// Damage the committed copy: it is no longer trusted; the cache path
	// builds a fresh one.
	if err := os.WriteFile(filepath.Join(want, JobFile), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fresh.Ensure(context.Background(), job); err == nil {
		t.Fatal("a damaged committed checkpoint was accepted")
	}
	dir, where, err = l.Ensure(context.Background(), job)
	if err != nil || where != FromBuild || !strings.HasPrefix(dir, cache) {
		t.Fatalf("Ensure after damage = %q, %q, %v; want a build in the cache", dir, where, err)
	}
	dir2, where, err := l.Ensure(context.Background(), job)
	if err != nil || where != FromCache || dir2 != dir {
		t.Fatalf("second Ensure = %q, %q, %v; want the cached %s", dir2, where, err, dir)
	}
}

func TestKeyCoversWhatDeterminesTheCheckpoint(t *testing.T) {
	_, s := testRepo(t)
	base, err := FromSpec(s, "s", reducedConfig())
	if err != nil {
		t.Fatal(err)
	}
	key := func(j Job) string {
		k, err := j.Key()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key(base)
	cases := []struct {
		name  string
		edit  func(*Job)
		equal bool
	}{
		{"other scale's budget", func(j *Job) { j.Pretrain.Steps["m"] = 99 }, true},
		{"validation size", func(j *Job) { c := *j.Tasks[1].SynthMath; c.ValSize = 77; j.Tasks[1].SynthMath = &c }, true},
		{"scale name", func(j *Job) { j.Scale = "x" }, true},
		{"own budget", func(j *Job) { j.Pretrain.Steps["s"] = 4 }, false},
		{"seed", func(j *Job) { j.Pretrain.Seed = 9 }, false},
		{"noise", func(j *Job) { j.Pretrain.Noise.Slip = 0.5 }, false},
		{"shape", func(j *Job) { j.Model.HiddenSize = 32 }, false},
		{"alphabet", func(j *Job) { j.Alphabet = "\nab" }, false},
		{"task knob", func(j *Job) { c := *j.Tasks[1].SynthMath; c.ValueMax = 5; j.Tasks[1].SynthMath = &c }, false},
		{"votes", func(j *Job) { j.NVotes = 5 }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := base
			j.Pretrain = base.Pretrain.Clone()
			j.Tasks = append([]TaskConfig(nil), base.Tasks...)
			tc.edit(&j)
			if got := key(j) == k0; got != tc.equal {
				t.Fatalf("key unchanged = %v, want %v", got, tc.equal)
			}
		})
	}
}

func TestFromSpec(t *testing.T) {
	_, s := testRepo(t)
	j, err := FromSpec(s, "m", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Tasks) != 2 || j.Tasks[0].Source != "synth-code" || j.Tasks[1].Source != "synth-math" {
		t.Fatalf("tasks %+v", j.Tasks)
	}
	if j.Model.HiddenSize != 24 || !j.Model.TieWordEmbeddings || j.Model.VocabSize != 99 || j.NVotes != 3 {
		t.Fatalf("model %+v", j.Model)
	}
	// The spec's own synth-math knobs reach the task configuration.
	if got := j.Tasks[1].SynthMath.ValueMax; got != s.Tasks["synth-math"].SynthMath.ValueMax {
		t.Fatalf("ValueMax %d, want the spec's %d", got, s.Tasks["synth-math"].SynthMath.ValueMax)
	}
	for _, tc := range []struct{ scale, want string }{{"xl", "no model"}} {
		if _, err := FromSpec(s, tc.scale, DefaultConfig()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("scale %s: err = %v", tc.scale, err)
		}
	}
	bad := DefaultConfig()
	bad.BatchSize = 0
	if _, err := FromSpec(s, "s", bad); err == nil || !strings.Contains(err.Error(), "batch_size") {
		t.Errorf("bad config: err = %v", err)
	}
	if got, err := Scales(s, ""); err != nil || strings.Join(got, ",") != "s,m" {
		t.Errorf("Scales = %v, %v", got, err)
	}
	if _, err := Scales(s, "l"); err == nil {
		t.Error("Scales accepted an unknown scale")
	}
}

// TestCalibrateRunsEveryWorkflow calibrates a barely trained model on a few
// problems: the table has every task and workflow with each workflow's
// roles, and rates inside [0, 1].
func TestCalibrateRunsEveryWorkflow(t *testing.T) {
	_, s := testRepo(t)
	job, err := FromSpec(s, "s", reducedConfig())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ck")
	if _, err := Train(context.Background(), job, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	eng, err := native.Open(dir, native.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	cal, err := Calibrate(context.Background(), s, job, eng, CalibrateOptions{ValSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(cal.Rows) != 8 {
		t.Fatalf("%d rows, want 2 tasks x 4 workflows", len(cal.Rows))
	}
	for _, r := range cal.Rows {
		if r.Problems != 2 || r.Accuracy() < 0 || r.Accuracy() > 1 || len(r.Roles) == 0 {
			t.Errorf("row %+v", r)
		}
		for _, rr := range r.Roles {
			if rr.Turns == 0 && rr.Role != "worker" && rr.Role != "synthesizer" {
				t.Errorf("%s %s: role %s has no turns", r.Task, r.Workflow, rr.Role)
			}
		}
	}
	md := cal.Markdown()
	for _, want := range []string{"| synth-math | voting | 2 |", "aggregator", "orchestrator"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestSpecPretrainSection reads the spec's pretrain section: overrides
// merge into the defaults, and bad values are strict errors naming the key.
func TestSpecPretrainSection(t *testing.T) {
	cases := []struct {
		name, section, want string // want "" = valid
	}{
		{"defaults", "", ""},
		{"override", "pretrain:\n  seed: 9\n  steps: {s: 7}\n  noise: {slip: 0.3}\n  roles: {worker: 0}\n", ""},
		{"unknown key", "pretrain:\n  epochs: 3\n", "pretrain.epochs"},
		{"bad rate", "pretrain:\n  noise: {malformed: 1.5}\n", "pretrain.noise.malformed"},
		{"bad steps", "pretrain:\n  steps: {m: 0}\n", "pretrain.steps.m"},
		{"bad lr", "pretrain:\n  lr: 0\n", "pretrain.lr"},
		{"no roles", "pretrain:\n  roles: {generator: 0, reviser: 0, evaluator: 0, aggregator: 0, orchestrator: 0, worker: 0, synthesizer: 0}\n", "pretrain.roles"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "spec.yaml")
			if err := os.WriteFile(p, []byte(tinySpec+tc.section), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := spec.Load(p)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want one naming %s", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg := ConfigOf(s, "s")
			if err := cfg.Validate(); err != nil {
				t.Fatalf("spec config invalid: %v", err)
			}
			def := DefaultConfig()
			if tc.name == "defaults" {
				if cfg.String() != def.String() || cfg.Noise != def.Noise || cfg.Roles != def.Roles {
					t.Fatalf("defaults differ: %+v vs %+v", cfg, def)
				}
				return
			}
			if cfg.Seed != 9 || cfg.StepsFor("s") != 7 || cfg.StepsFor("m") != def.StepsFor("m") ||
				cfg.Noise.Slip != 0.3 || cfg.Noise.Malformed != def.Noise.Malformed || cfg.Roles.Worker != 0 {
				t.Fatalf("override not applied: %+v", cfg)
			}
			// The resolved spec shows the section.
			y, err := s.ResolvedYAML()
			if err != nil || !strings.Contains(string(y), "pretrain:") || !strings.Contains(string(y), "too_many_strategies") {
				t.Fatalf("resolved YAML lacks the pretrain section (%v):\n%s", err, y)
			}
		})
	}
}

// TestSeedSpecsFindCommittedCheckpoints is the fresh-clone path for the
// repository's own experiment files: every tiny scale of demo, smoke,
// mini, supervisors and supervisors-compact has its checkpoint committed
// under seeds/models, so no run of them pretrains (demo, smoke and mini
// share the checkpoints of equal shapes).
func TestSeedSpecsFindCommittedCheckpoints(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	empty := Locator{RepoRoot: root, CacheRoot: t.TempDir(), NoBuild: true}
	for _, name := range []string{"demo", "smoke", "mini", "supervisors", "supervisors-compact"} {
		s, err := spec.Load(filepath.Join(root, "seeds", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		scales, err := Scales(s, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range scales {
			job, err := FromSpec(s, sc, ConfigOf(s, sc))
			if err != nil {
				t.Fatal(err)
			}
			dir, where, err := empty.Find(job)
			if err != nil || where != FromCommitted {
				dn, _ := job.DirName()
				t.Errorf("%s scale %s: checkpoint %s/%s not committed (found %q, %q, %v); run `marlow pretrain seeds/%s.yaml --commit`",
					name, sc, CommittedDir, dn, dir, where, err, name)
				continue
			}
			if _, err := native.Open(dir, native.Options{}); err != nil {
				t.Errorf("%s scale %s: %v", name, sc, err)
			}
		}
	}
}
