package grpo

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/study"
)

// routingConfig is a short ip voting run on the native test model under a
// declared routing.
func routingConfig(id string, r *study.Routing, steps int) Config {
	cfg := recipeConfig()
	cfg.RunID, cfg.Seed, cfg.Condition, cfg.Workflow = id, 11, study.IP, study.Voting
	cfg.Routing = r
	cfg.NVotes = 2
	cfg.Rollouts, cfg.ProblemsPerStep, cfg.Steps = 4, 4, steps
	cfg.LR = 1e-3
	cfg.Schedule = engine.Schedule{Kind: "constant", Total: steps}
	cfg.DefaultMaxNewTokens = 10
	cfg.EvalEvery, cfg.SaveEvery, cfg.ValSize, cfg.SamplesPerStep = steps, 1, 2, 0
	cfg.Adapter.Rank, cfg.Adapter.Alpha = 2, 4
	return cfg
}

// adapterWeights reads the LoRA tensors of every adapter of the run's
// checkpoint at step, flattened in tensor-name order, by adapter.
func adapterWeights(t *testing.T, dir string, step int64) map[string][]float64 {
	t.Helper()
	root := filepath.Join(CheckpointPath(filepath.Join(dir, "ckpt"), step), engineDir)
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float64{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		ts, err := model.ReadSafetensors(filepath.Join(root, e.Name(), "adapter_model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(ts, func(a, b model.Tensor) int {
			if a.Name < b.Name {
				return -1
			}
			if a.Name > b.Name {
				return 1
			}
			return 0
		})
		var flat []float64
		for _, x := range ts {
			for _, v := range x.Data {
				flat = append(flat, float64(v))
			}
		}
		out[e.Name()] = flat
	}
	return out
}

// update is after - before, and its ratio to another update: <d, o>/|o|^2
// and the relative residual |d - k o|/|k o|.
func updateRatio(before, after, obefore, oafter []float64, k float64) (ratio, residual float64) {
	var do, oo, rr float64
	for i := range before {
		d, o := after[i]-before[i], oafter[i]-obefore[i]
		do += d * o
		oo += o * o
		rr += (d - k*o) * (d - k*o)
	}
	return do / oo, math.Sqrt(rr) / (k * math.Sqrt(oo))
}

// baseRecorder records every request an engine samples from the base
// policy (no adapter), with its completion.
type baseRecorder struct {
	engine.Engine
	reqs  []engine.Request
	comps []engine.Completion
}

func (b *baseRecorder) Generate(ctx context.Context, reqs []engine.Request) ([]engine.Completion, error) {
	comps, err := b.Engine.Generate(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for i, r := range reqs {
		if r.Adapter == "" {
			b.reqs = append(b.reqs, r)
			b.comps = append(b.comps, comps[i])
		}
	}
	return comps, nil
}

// TestNativeRoutingFrozenRole: a role routed to the frozen base model has
// no adapter, no step rows, and its turns sample the base policy, whose
// weights and outputs do not change however long the other roles train:
// every one of its turns, those of the last validation included, is what
// an untrained engine gives for the same request, byte for byte.
func TestNativeRoutingFrozenRole(t *testing.T) {
	if testing.Short() {
		t.Skip("native engine loop in -short mode")
	}
	r := &study.Routing{Name: "ip_frozen_agg", From: study.IP, Roles: map[string]string{study.Aggregator: study.FrozenBase}}
	cfg := routingConfig("native-voting-frozen", r, 3)
	dir := t.TempDir()
	tr, w, last := nativeLoop(t, cfg)(dir)
	ne := tr.Engine.(*native.Engine)
	rec := &baseRecorder{Engine: ne}
	tr.Engine = rec
	if err := tr.Run(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got := ne.Adapters(); !slices.Equal(got, []string{study.Generator}) {
		t.Fatalf("adapters %v, want only the generator's", got)
	}
	if _, err := os.Stat(filepath.Join(CheckpointPath(filepath.Join(dir, "ckpt"), 3), engineDir, study.Aggregator)); !os.IsNotExist(err) {
		t.Errorf("the frozen aggregator has an adapter checkpoint (stat: %v)", err)
	}
	run, err := runlog.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range run.Steps {
		if s.Role == study.Aggregator || s.Policy != study.Generator {
			t.Fatalf("step row of policy %q role %q; only the generator trains", s.Policy, s.Role)
		}
	}
	gen := adapterWeights(t, dir, 3)[study.Generator]
	if init := adapterWeights(t, dir, 2)[study.Generator]; slices.Equal(gen, init) {
		t.Fatal("the generator did not train between steps 2 and 3: the test shows nothing")
	}
	aggTurns := 0
	for _, s := range run.Samples {
		if s.Role == study.Aggregator {
			aggTurns++
			if s.Policy != "" {
				t.Fatalf("aggregator turn at step %d sampled policy %q, want the base model", s.Step, s.Policy)
			}
		}
	}
	if aggTurns == 0 {
		t.Fatal("no aggregator turns were validated")
	}
	// Every aggregator request of the run (the last validation's are the
	// last ones), given again to a fresh, untrained engine: the same
	// completions, bit for bit.
	// one aggregator turn per episode: the validations' (aggTurns, from the
	// samples) and every training rollout's
	if want := aggTurns + cfg.Steps*cfg.Rollouts*cfg.ProblemsPerStep; len(rec.reqs) != want {
		t.Fatalf("%d base-policy requests recorded, want the run's %d aggregator turns", len(rec.reqs), want)
	}
	fresh, _, _ := nativeLoop(t, cfg)(t.TempDir())
	base, err := fresh.Engine.Generate(context.Background(), rec.reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rec.reqs {
		a, b := rec.comps[i], base[i]
		if a.Text != b.Text || !slices.Equal(a.IDs, b.IDs) || !slices.Equal(a.LogProbs, b.LogProbs) {
			t.Fatalf("base-policy request %d of %d: %q after training, %q from an untrained engine", i, len(rec.reqs), a.Text, b.Text)
		}
	}
}

// TestNativeRoutingAdapterSettings: an adapter's lr_mult scales its first
// update exactly (AdamW's first step is linear in the rate) and leaves the
// other adapter's alone; a kl_coef changes its adapter's later update.
func TestNativeRoutingAdapterSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("native engine loop in -short mode")
	}
	half := 0.5
	kl := 1.0
	run := func(id string, r *study.Routing, steps int) string {
		dir := t.TempDir()
		runNative(t, nativeLoop(t, routingConfig(id, r, steps)), dir)
		return dir
	}
	plainDir := run("plain", &study.Routing{Name: "plain", From: study.IP}, 2)
	slowDir := run("slow", &study.Routing{Name: "slow", From: study.IP,
		Adapters: map[string]study.AdapterSettings{study.Generator: {LRMult: &half}}}, 1)
	klDir := run("kl", &study.Routing{Name: "kl", From: study.IP,
		Adapters: map[string]study.AdapterSettings{study.Generator: {KLCoef: &kl}}}, 2)

	// A run keeps its last two checkpoints: the 1-step run holds the
	// adapters' initial weights (the same in every run of the seed).
	p1, p2 := adapterWeights(t, plainDir, 1), adapterWeights(t, plainDir, 2)
	s0, s1 := adapterWeights(t, slowDir, 0), adapterWeights(t, slowDir, 1)
	if slices.Equal(s0[study.Generator], p1[study.Generator]) {
		t.Fatal("the plain generator did not train at step 1: the test shows nothing")
	}
	ratio, resid := updateRatio(s0[study.Generator], s1[study.Generator], s0[study.Generator], p1[study.Generator], half)
	t.Logf("lr_mult 0.5: generator update ratio %.9f, residual %.2e", ratio, resid)
	if math.Abs(ratio-half) > 1e-4 || !(resid < 1e-4) {
		t.Errorf("generator update with lr_mult 0.5 is %v of the plain one (residual %v), want 0.5", ratio, resid)
	}
	if !slices.Equal(s1[study.Aggregator], p1[study.Aggregator]) {
		t.Error("the generator's lr_mult changed the aggregator's update")
	}
	runSlow, err := runlog.ReadRun(slowDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range runSlow.Steps {
		want := 1e-3
		if s.Policy == study.Generator {
			want = 0.5e-3
		}
		if s.LR != want {
			t.Errorf("steps row %s/%s logs lr %v, want %v", s.Policy, s.Role, s.LR, want)
		}
	}

	k1, k2 := adapterWeights(t, klDir, 1), adapterWeights(t, klDir, 2)
	// At step 1 every adapter is the base policy, where the KL term's
	// gradient is zero; from step 2 it acts.
	if !slices.Equal(k1[study.Generator], p1[study.Generator]) {
		t.Error("kl_coef changed the first update, taken at the base policy")
	}
	if slices.Equal(k2[study.Generator], p2[study.Generator]) {
		t.Error("kl_coef 1 did not change the generator's second update")
	}
	runKL, err := runlog.ReadRun(klDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range runKL.Steps {
		if s.Step == 2 && s.Role == study.Generator && !(s.KL > 0) {
			t.Errorf("step 2 generator KL %v, want > 0", s.KL)
		}
	}
}
