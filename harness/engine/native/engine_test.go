package native

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/model"
)

func chat(s string) []engine.Message { return []engine.Message{{Role: "user", Content: s}} }

// TestKVCacheMatchesFullForward: logits of every decode step equal the
// logits of a full forward over prompt + generated tokens, bit for bit.
func TestKVCacheMatchesFullForward(t *testing.T) {
	for _, adapter := range []string{"", "a"} {
		e := testEngine(t, false, 2)
		if err := e.NewAdapter(context.Background(), "a", adapterCfg(4)); err != nil {
			t.Fatal(err)
		}
		copy(e.adapters["a"].Data, randVec(len(e.adapters["a"].Data), 31, 0.3))
		reqs := []engine.Request{
			{Adapter: adapter, Messages: chat("hi"), MaxNewTokens: 12, Temperature: 1, Seed: 1},
			{Adapter: adapter, Messages: chat("a longer prompt"), MaxNewTokens: 9, Temperature: 0.5, Seed: 2},
		}
		comps, err := e.Generate(context.Background(), reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range comps {
			turn := engine.Turn{PromptIDs: c.PromptIDs, CompletionIDs: c.IDs}
			lps, err := e.LogProbs(context.Background(), adapter, []engine.Turn{turn}, reqs[i].Temperature)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(lps[0], c.LogProbs) {
				t.Errorf("adapter %q request %d: decode log-probs %v, full forward %v", adapter, i, c.LogProbs, lps[0])
			}
		}
	}
}

// TestFreshAdapterIsBase: a new adapter (B = 0) gives exactly the base
// policy's tokens and log-probs.
func TestFreshAdapterIsBase(t *testing.T) {
	e := testEngine(t, true, 2)
	if err := e.NewAdapter(context.Background(), "fresh", adapterCfg(8)); err != nil {
		t.Fatal(err)
	}
	var reqs []engine.Request
	for i, a := range []string{"", "fresh", "", "fresh"} {
		reqs = append(reqs, engine.Request{Adapter: a, Messages: chat("same prompt"), MaxNewTokens: 16, Temperature: 0.8, Seed: uint64(i / 2)})
	}
	comps, err := e.Generate(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i += 2 {
		if !slices.Equal(comps[i].IDs, comps[i+1].IDs) || !slices.Equal(comps[i].LogProbs, comps[i+1].LogProbs) {
			t.Errorf("seed %d: base %v %v, fresh adapter %v %v", i/2, comps[i].IDs, comps[i].LogProbs, comps[i+1].IDs, comps[i+1].LogProbs)
		}
	}
}

// TestBatchIndependence: a request gives the same completion alone, in a
// batch, in another order, mixed with other adapters, and for any Threads.
func TestBatchIndependence(t *testing.T) {
	e := testEngine(t, true, 1)
	if err := e.NewAdapter(context.Background(), "x", adapterCfg(2)); err != nil {
		t.Fatal(err)
	}
	copy(e.adapters["x"].Data, randVec(len(e.adapters["x"].Data), 41, 0.3))
	target := engine.Request{Adapter: "x", Messages: chat("target"), MaxNewTokens: 20, Temperature: 1, Seed: 99}
	alone, err := e.Generate(context.Background(), []engine.Request{target})
	if err != nil {
		t.Fatal(err)
	}
	others := []engine.Request{
		{Messages: chat("other one"), MaxNewTokens: 5, Temperature: 0.7, Seed: 1},
		{Adapter: "x", Messages: chat("z"), MaxNewTokens: 30, Temperature: 1.3, Seed: 2},
	}
	e2 := testEngine(t, true, 3)
	e2.adapters["x"] = e.adapters["x"]
	for _, batch := range [][]engine.Request{{others[0], target, others[1]}, {others[1], others[0], target}} {
		for _, eng := range []*Engine{e, e2} {
			comps, err := eng.Generate(context.Background(), batch)
			if err != nil {
				t.Fatal(err)
			}
			k := slices.IndexFunc(batch, func(r engine.Request) bool { return r.Seed == 99 })
			if !slices.Equal(comps[k].IDs, alone[0].IDs) || !slices.Equal(comps[k].LogProbs, alone[0].LogProbs) {
				t.Errorf("threads %d: in a batch %v, alone %v", eng.pool.threads, comps[k].IDs, alone[0].IDs)
			}
		}
	}
}

// runScenario generates, trains two GRPO steps and one supervised step and
// returns everything observable, for determinism checks.
func runScenario(t *testing.T, threads int) (comps []engine.Completion, stats []engine.StepStats, sup SupervisedStats, w []float32, ad []float32) {
	e := testEngine(t, true, threads)
	if err := e.NewAdapter(context.Background(), "p", adapterCfg(4)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var reqs []engine.Request
	for i := 0; i < 6; i++ {
		reqs = append(reqs, engine.Request{Adapter: "p", Messages: chat("q" + string(rune('a'+i))), MaxNewTokens: 10, Temperature: 0.7, Seed: uint64(i)})
	}
	comps, err := e.Generate(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	var turns []engine.Turn
	for i, c := range comps {
		turns = append(turns, engine.Turn{Adapter: "p", Role: []string{"gen", "agg"}[i%2], Agent: []string{"gen0", "agg", "gen1"}[i%3],
			PromptIDs: c.PromptIDs, CompletionIDs: c.IDs, OldLogProbs: c.LogProbs, Advantage: float64(i%3) - 1})
	}
	opt := defaultTrainOptions()
	for step := 0; step < 2; step++ {
		st, err := e.TrainStep(ctx, "p", turns, opt)
		if err != nil {
			t.Fatal(err)
		}
		stats = append(stats, st)
	}
	sup, err = e.Supervised(ctx, []Example{{IDs: comps[0].PromptIDs, LossMask: mask(len(comps[0].PromptIDs))}}, opt)
	if err != nil {
		t.Fatal(err)
	}
	return comps, stats, sup, append([]float32(nil), e.w.Data...), append([]float32(nil), e.adapters["p"].Data...)
}

func mask(n int) []bool {
	m := make([]bool, n)
	for i := 1; i < n; i++ {
		m[i] = true
	}
	return m
}

// TestDeterminism: same seeds give identical tokens, log-probs, statistics
// and weights across runs, Threads 1/2 and GOMAXPROCS 1/2.
func TestDeterminism(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	type result struct {
		comps []engine.Completion
		stats []engine.StepStats
		sup   SupervisedStats
		w, ad []float32
	}
	var ref *result
	for _, procs := range []int{1, 2} {
		for _, threads := range []int{1, 2} {
			runtime.GOMAXPROCS(procs)
			var r result
			r.comps, r.stats, r.sup, r.w, r.ad = runScenario(t, threads)
			if ref == nil {
				ref = &r
				continue
			}
			for i := range r.comps {
				if !slices.Equal(r.comps[i].IDs, ref.comps[i].IDs) || !slices.Equal(r.comps[i].LogProbs, ref.comps[i].LogProbs) {
					t.Errorf("GOMAXPROCS %d threads %d: completion %d differs", procs, threads, i)
				}
			}
			for i := range r.stats {
				a, b := r.stats[i], ref.stats[i]
				if a.Total.Loss != b.Total.Loss || a.GradNormPre != b.GradNormPre || a.Total.KL != b.Total.KL || !sameFloat(a.Roles[0].AgentCosMean, b.Roles[0].AgentCosMean) {
					t.Errorf("GOMAXPROCS %d threads %d: step %d stats differ: %+v vs %+v", procs, threads, i, a.Total, b.Total)
				}
			}
			if r.sup != ref.sup || !slices.Equal(r.w, ref.w) || !slices.Equal(r.ad, ref.ad) {
				t.Errorf("GOMAXPROCS %d threads %d: weights or supervised stats differ", procs, threads)
			}
		}
	}
	// Old log-probs are stored as float32, so the first ratio is 1 up to
	// float32 rounding of the log-prob.
	if ref.stats[0].SkippedTurns != 2 || math.Abs(ref.stats[0].Total.RatioMean-1) > 1e-6 {
		t.Errorf("first step: skipped %d (want 2), ratio mean %v (want 1: generation and training agree)", ref.stats[0].SkippedTurns, ref.stats[0].Total.RatioMean)
	}
}

func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// TestSaveLoad: Save -> Load in a fresh engine gives identical logits and
// an identical next train step, bit for bit.
func TestSaveLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := testEngine(t, false, 2)
	if err := e.NewAdapter(ctx, "gen", engine.AdapterConfig{Rank: 3, Alpha: 6, Targets: []string{"v_proj", "q_proj", "down_proj"}, Seed: 8}); err != nil {
		t.Fatal(err)
	}
	if err := e.NewAdapter(ctx, "agg", adapterCfg(2)); err != nil {
		t.Fatal(err)
	}
	turns := grpoTestTurns(t, e, "gen")
	opt := defaultTrainOptions()
	if _, err := e.TrainStep(ctx, "gen", turns, opt); err != nil {
		t.Fatal(err)
	}
	if err := e.SaveBase(filepath.Join(dir, "base")); err != nil {
		t.Fatal(err)
	}
	if err := e.Save(ctx, filepath.Join(dir, "ckpt")); err != nil {
		t.Fatal(err)
	}
	e2, err := Open(filepath.Join(dir, "base"), Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.Load(ctx, filepath.Join(dir, "ckpt")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e2.Adapters(), []string{"agg", "gen"}) {
		t.Fatalf("loaded adapters %v", e2.Adapters())
	}
	lp1, err := e.LogProbs(ctx, "gen", turns, 0.7)
	if err != nil {
		t.Fatal(err)
	}
	lp2, err := e2.LogProbs(ctx, "gen", turns, 0.7)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lp1 {
		if !slices.Equal(lp1[i], lp2[i]) {
			t.Fatalf("turn %d: log-probs before save %v, after load %v", i, lp1[i], lp2[i])
		}
	}
	s1, err := e.TrainStep(ctx, "gen", turns, opt)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := e2.TrainStep(ctx, "gen", turns, opt)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Total.Loss != s2.Total.Loss || s1.GradNormPre != s2.GradNormPre || !slices.Equal(e.adapters["gen"].Data, e2.adapters["gen"].Data) ||
		e.adapters["gen"].opt.Step != 2 || e2.adapters["gen"].opt.Step != 2 {
		t.Fatalf("next step differs after load: loss %v vs %v", s1.Total.Loss, s2.Total.Loss)
	}
	// Saving twice gives the same bytes.
	if err := e.SaveBase(filepath.Join(dir, "base2")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{model.WeightsFile, model.ConfigFile, model.TokenizerFile} {
		a, _ := os.ReadFile(filepath.Join(dir, "base", f))
		b, _ := os.ReadFile(filepath.Join(dir, "base2", f))
		if len(a) == 0 || string(a) != string(b) {
			t.Errorf("%s differs between two saves", f)
		}
	}
}

// TestCheckpointErrors: corrupt or mismatched checkpoints give errors naming
// the tensor and its expected shape.
func TestCheckpointErrors(t *testing.T) {
	e := testEngine(t, true, 1)
	cfg := e.cfg
	good := e.w.Tensors()
	cases := []struct {
		name string
		edit func([]model.Tensor) []model.Tensor
		want []string
	}{
		{"wrong shape", func(ts []model.Tensor) []model.Tensor {
			ts[2].Shape = []int{8, 16}
			ts[2].Data = ts[2].Data[:128]
			return ts
		}, []string{"model.layers.0.self_attn.q_proj.weight", "[16 16]"}},
		{"missing", func(ts []model.Tensor) []model.Tensor { return ts[1:] }, []string{"model.embed_tokens.weight", "[99 16]"}},
		{"unexpected", func(ts []model.Tensor) []model.Tensor {
			return append(ts, model.Tensor{Name: "lm_head.weight", Shape: []int{99, 16}, Data: make([]float32, 99*16)})
		}, []string{"lm_head.weight"}},
		{"non-finite", func(ts []model.Tensor) []model.Tensor {
			ts[3].Data = append([]float32(nil), ts[3].Data...)
			ts[3].Data[5] = float32(math.NaN())
			return ts
		}, []string{"model.layers.0.self_attn.k_proj.weight", "non-finite"}},
	}
	for _, tc := range cases {
		ts := tc.edit(slices.Clone(good))
		_, err := WeightsFromTensors(cfg, ts)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, w)
			}
		}
	}
	// A checkpoint whose config disagrees with its tensors.
	dir := t.TempDir()
	if err := e.SaveBase(dir); err != nil {
		t.Fatal(err)
	}
	bad := cfg
	bad.IntermediateSize = 32
	if err := model.WriteConfig(filepath.Join(dir, model.ConfigFile), bad); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "mlp.gate_proj.weight") || !strings.Contains(err.Error(), "[32 16]") {
		t.Errorf("mismatched config: %v", err)
	}
	// A truncated weights file.
	if err := e.SaveBase(dir); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, model.WeightsFile)
	raw, _ := os.ReadFile(p)
	if err := os.WriteFile(p, raw[:len(raw)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); err == nil {
		t.Error("truncated safetensors: no error")
	}
	// An adapter checkpoint with a wrong-shaped factor.
	if err := e.NewAdapter(context.Background(), "a", adapterCfg(2)); err != nil {
		t.Fatal(err)
	}
	ad := t.TempDir()
	if err := e.Save(context.Background(), ad); err != nil {
		t.Fatal(err)
	}
	other := testEngine(t, true, 1)
	other.d.L = 1 // a model with fewer layers expects fewer tensors
	other.cfg.NumHiddenLayers = 1
	if err := other.Load(context.Background(), ad); err == nil || !strings.Contains(err.Error(), "layers.1") {
		t.Errorf("adapter for a different model: %v", err)
	}
}

func TestRequestErrors(t *testing.T) {
	e := testEngine(t, true, 1)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  engine.Request
		want string
	}{
		{"unknown adapter", engine.Request{Adapter: "nope", Messages: chat("x"), MaxNewTokens: 2, Temperature: 1}, "unknown adapter"},
		{"temperature", engine.Request{Messages: chat("x"), MaxNewTokens: 2, Temperature: 0}, "temperature"},
		{"too long", engine.Request{Messages: chat("x"), MaxNewTokens: 90, Temperature: 1}, "max_position_embeddings"},
		{"unknown character", engine.Request{Messages: chat("é"), MaxNewTokens: 2, Temperature: 1}, "unknown character"},
	} {
		_, err := e.Generate(ctx, []engine.Request{tc.req})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want mention of %q", tc.name, err, tc.want)
		}
	}
	if err := e.NewAdapter(ctx, "a", engine.AdapterConfig{Rank: 2, Alpha: 4, Targets: []string{"qproj"}}); err == nil || !strings.Contains(err.Error(), "qproj") {
		t.Errorf("bad target: %v", err)
	}
	if err := e.NewAdapter(ctx, "a", adapterCfg(2)); err != nil {
		t.Fatal(err)
	}
	turns := grpoTestTurns(t, e, "a")
	opt := defaultTrainOptions()
	opt.LossAgg = "mean"
	if _, err := e.TrainStep(ctx, "a", turns, opt); err == nil || !strings.Contains(err.Error(), "loss aggregation") {
		t.Errorf("bad aggregation: %v", err)
	}
	turns[2].OldLogProbs[0] = float32(math.Inf(-1))
	if _, err := e.TrainStep(ctx, "a", turns, defaultTrainOptions()); err == nil || !strings.Contains(err.Error(), "turn 2") {
		t.Errorf("infinite old log-prob: %v", err)
	}
	turns[1].OldLogProbs = turns[1].OldLogProbs[:0]
	if _, err := e.TrainStep(ctx, "a", turns, defaultTrainOptions()); err == nil || !strings.Contains(err.Error(), "turn 1") {
		t.Errorf("bad old log-probs: %v", err)
	}
}

func TestGenerateEdgeCases(t *testing.T) {
	e := testEngine(t, true, 2)
	ctx := context.Background()
	comps, err := e.Generate(ctx, nil)
	if err != nil || len(comps) != 0 {
		t.Fatalf("empty batch: %v %v", comps, err)
	}
	comps, err = e.Generate(ctx, []engine.Request{
		{Messages: chat("zero"), MaxNewTokens: 0, Temperature: 1},
		{Messages: chat("one"), MaxNewTokens: 1, Temperature: 1, Seed: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(comps[0].IDs) != 0 || comps[0].Finish != engine.FinishLength || len(comps[1].IDs) != 1 || len(comps[1].LogProbs) != 1 {
		t.Errorf("max-new 0/1: %+v %+v", comps[0], comps[1])
	}
	if comps[1].Finish == engine.FinishStop && comps[1].Text != "" {
		t.Errorf("stop token leaked into text %q", comps[1].Text)
	}
	if err := e.NewAdapter(ctx, "../x", adapterCfg(2)); err == nil {
		t.Error("adapter name with a path separator accepted")
	}
	// Close makes later calls fail instead of panicking.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Generate(ctx, []engine.Request{{Messages: chat("x"), MaxNewTokens: 1, Temperature: 1}}); err == nil {
		t.Error("generate after close succeeded")
	}
}

// TestStopToken: with attention and MLP outputs zeroed, the residual
// stream is the embedding; every embedding is e0 and only <|im_end|>'s LM
// head row sees e0, so every request stops at its first token, which is in
// IDs but not in Text.
func TestStopToken(t *testing.T) {
	e := testEngine(t, false, 1)
	D := e.d.D
	for _, lw := range e.w.Layers {
		zero(lw.Lin[modO])
		zero(lw.Lin[modDown])
	}
	zero(e.w.Embed)
	zero(e.w.LMHead)
	for v := 0; v < e.d.V; v++ {
		e.w.Embed[v*D] = 1
	}
	for i := range e.w.Norm {
		e.w.Norm[i] = 1
	}
	e.w.LMHead[int(e.imEnd)*D] = 10
	var reqs []engine.Request
	for s := 0; s < 4; s++ {
		reqs = append(reqs, engine.Request{Messages: chat("stop"), MaxNewTokens: 5, Temperature: 1, Seed: uint64(s)})
	}
	comps, err := e.Generate(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range comps {
		if c.Finish != engine.FinishStop || !slices.Equal(c.IDs, []int32{e.imEnd}) || c.Text != "" || len(c.LogProbs) != 1 {
			t.Errorf("want an immediate stop, got %+v", c)
		}
	}
}

// TestSupervisedResume: saving the base and its optimizer state mid-run and
// resuming in a new engine gives the same weights as running on.
func TestSupervisedResume(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := testEngine(t, true, 2)
	ids, _ := e.tok.Encode("resume me please")
	batch := []Example{{IDs: ids, LossMask: mask(len(ids))}}
	opt := defaultTrainOptions()
	for i := 0; i < 2; i++ {
		if _, err := e.Supervised(ctx, batch, opt); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.SaveBase(dir); err != nil {
		t.Fatal(err)
	}
	if err := e.SaveBaseOptimizer(filepath.Join(dir, "optimizer.safetensors")); err != nil {
		t.Fatal(err)
	}
	e2, err := Open(dir, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.LoadBaseOptimizer(filepath.Join(dir, "optimizer.safetensors")); err != nil {
		t.Fatal(err)
	}
	s1, err := e.Supervised(ctx, batch, opt)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := e2.Supervised(ctx, batch, opt)
	if err != nil {
		t.Fatal(err)
	}
	if s1 != s2 || !slices.Equal(e.w.Data, e2.w.Data) || e2.baseOpt.Step != 3 {
		t.Fatalf("resumed step differs: %+v vs %+v (step %d)", s1, s2, e2.baseOpt.Step)
	}
}
