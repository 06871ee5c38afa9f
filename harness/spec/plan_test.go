package spec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Test vectors of DeriveSeed, computed independently with Python:
// int.from_bytes(hashlib.sha256(b"marlow/seed/v1\0" + str(m).encode() + b"\0" + k.encode()).digest()[:8], "big").
func TestDeriveSeedVectors(t *testing.T) {
	cases := []struct {
		master uint64
		key    string
		want   uint64
	}{
		{0, "", 1642531772222678641},
		{1, "sa-rl-s-synth-math-seed1", 10941130563709686289},
		{20260101, "voting-ip-s-synth-math-seed1", 13812459312681727063},
		{18446744073709551615, "x", 17077758736525600778},
	}
	for _, c := range cases {
		if got := DeriveSeed(c.master, c.key); got != c.want {
			t.Errorf("DeriveSeed(%d, %q) = %d, want %d", c.master, c.key, got, c.want)
		}
	}
}

func TestCanonicalJSON(t *testing.T) {
	cases := []struct {
		in   any
		want string
	}{
		{map[string]any{"b": 1, "a": []int{2, 1}}, `{"a":[2,1],"b":1}`},
		{struct {
			Z string  `json:"z"`
			A float64 `json:"a"`
		}{"<&>", 2e-5}, `{"a":0.00002,"z":"<&>"}`},
		{struct {
			S uint64 `json:"s"`
		}{18446744073709551615}, `{"s":18446744073709551615}`},
		{[]any{map[string]int{"y": 1, "x": 2}}, `[{"x":2,"y":1}]`},
	}
	for _, c := range cases {
		got, err := CanonicalJSON(c.in)
		if err != nil || string(got) != c.want {
			t.Errorf("CanonicalJSON(%v) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
}

func TestRunID(t *testing.T) {
	cases := []struct {
		wf, cond, task, scale, arm string
		seed                       int
		want                       string
	}{
		{"voting", "ip", "synth-math", "s", "", 1, "voting-ip-s-synth-math-seed1"},
		{"single", "sa-rl", "synth-math", "s", "", 1, "sa-rl-s-synth-math-seed1"},
		{"orch-workers", "base", "deepcoder", "l", "", 3, "orch-workers-base-l-deepcoder-seed3"},
		{"voting", "sp", "synth-code", "smix", "nv5", 2, "voting-sp-smix-synth-code-nv5-seed2"},
		{"single", "sa-rl", "synth-code", "s", "lowlr", 1, "sa-rl-s-synth-code-lowlr-seed1"},
	}
	for _, c := range cases {
		if got := RunID(c.wf, c.cond, c.task, c.scale, c.arm, c.seed); got != c.want {
			t.Errorf("RunID = %q, want %q", got, c.want)
		}
	}
}

func loadSeed(t *testing.T, name string) *Spec {
	t.Helper()
	s, err := Load(filepath.Join("..", "..", "seeds", name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

func TestPlanPaper(t *testing.T) {
	t.Setenv("MARLOW_MODELS", "/models")
	t.Setenv("MARLOW_DATA", "/data")
	s := loadSeed(t, "paper.yaml")
	runs, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range s.Seeds {
		n := map[string]int{}
		for _, r := range runs {
			if r.SeedIndex == seed {
				n[r.Condition]++
				n["*"]++
			}
		}
		want := map[string]int{"*": 60, "base": 18, "sa-rl": 6, "sp": 18, "ip": 18}
		for k, v := range want {
			if n[k] != v {
				t.Errorf("seed %d: %s runs = %d, want %d", seed, k, n[k], v)
			}
		}
	}
	byID := map[string]Run{}
	hashes := map[string]bool{}
	for _, r := range runs {
		if _, dup := byID[r.ID]; dup {
			t.Fatalf("duplicate id %s", r.ID)
		}
		byID[r.ID] = r
		if hashes[r.ConfigHash] {
			t.Fatalf("duplicate config hash %s", r.ConfigHash)
		}
		hashes[r.ConfigHash] = true
		if r.Condition == "sa-rl" {
			if r.Workflow != "single" || !slices.Equal(r.EvalWorkflows, []string{"eval-opt", "orch-workers", "single", "voting"}) {
				t.Errorf("%s: workflow %s eval %v", r.ID, r.Workflow, r.EvalWorkflows)
			}
		} else if !slices.Equal(r.EvalWorkflows, []string{r.Workflow}) {
			t.Errorf("%s: eval %v", r.ID, r.EvalWorkflows)
		}
		if r.Config.Train != (r.Condition != "base") {
			t.Errorf("%s: train = %v", r.ID, r.Config.Train)
		}
	}
	m := byID["voting-ip-m-dapo-math-seed2"].Config
	if m.GRPO.MaxNewTokensFor("generator") != 5120 || m.WorkflowSet.MaxIterations != 3 ||
		m.Model.Checkpoint != "/models/Qwen3-1.7B" || m.Data.Path != "/data/DAPO-Math-17k-Processed/en/train-00000-of-00001.parquet" || m.Data.AnswerMode != "answer" ||
		m.Data.Language != "en" || m.Data.ValSize != 500 {
		t.Errorf("dapo-math config not resolved: %+v", m)
	}
	c := byID["eval-opt-sp-l-deepcoder-seed3"].Config
	if c.GRPO.MaxNewTokensFor("evaluator") != 2048 || c.WorkflowSet.MaxIterations != 2 || c.Data.Kind != "code" ||
		c.Data.Path != "/data/DeepCoder-Preview-Dataset" || !slices.Equal(c.Data.Subsets, []string{"primeintellect"}) || c.Data.ValSize != 1000 || c.Data.TestPath != "" {
		t.Errorf("deepcoder config not resolved: %+v", c)
	}
	if c.GRPO.LR != 2e-5 || c.GRPO.Lora.Rank != 64 || c.GRPO.Lora.Alpha != 32 || len(c.GRPO.KLCoef) != 0 ||
		c.GRPO.ProblemsPerStep != 64 || c.GRPO.Steps != 500 || c.Eval.Every != 10 || c.Checkpoint.Every != 5 {
		t.Errorf("reference recipe not resolved: %+v", c.GRPO)
	}
	// The overrides of one task must not leak into the other or the spec.
	if s.GRPO.MaxNewTokensFor("generator") != 1024 {
		t.Errorf("override mutated the spec: %v", s.GRPO.MaxNewTokens)
	}
	for _, r := range runs {
		h, err := ConfigHash(r.Config)
		if err != nil || h != r.ConfigHash {
			t.Fatalf("%s: hash %s, recomputed %s %v", r.ID, r.ConfigHash, h, err)
		}
		if r.Seed != DeriveSeed(s.MasterSeed, r.ID) {
			t.Fatalf("%s: seed not derived from its id", r.ID)
		}
	}
}

func TestSeedFilesPlan(t *testing.T) {
	cases := []struct {
		file  string
		runs  int
		conds map[string]int
	}{
		// smoke: 2 tasks; per task: 1 sa-rl, base x 4 workflows, sp/ip x 3 multi-agent workflows.
		{"smoke.yaml", 22, map[string]int{"base": 8, "sa-rl": 2, "sp": 6, "ip": 6}},
		{"demo.yaml", 4, map[string]int{"base": 1, "sa-rl": 1, "sp": 1, "ip": 1}},
		{"mini.yaml", 180, map[string]int{"base": 54, "sa-rl": 18, "sp": 54, "ip": 54}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			runs, err := Plan(loadSeed(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != c.runs {
				t.Errorf("%d runs, want %d", len(runs), c.runs)
			}
			for _, cc := range Counts(runs) {
				if c.conds[cc.Condition] != cc.Runs {
					t.Errorf("%s: %d runs, want %d", cc.Condition, cc.Runs, c.conds[cc.Condition])
				}
			}
		})
	}
	// smoke exercises every workflow and every condition.
	runs, _ := Plan(loadSeed(t, "smoke.yaml"))
	wfs, conds := map[string]bool{}, map[string]bool{}
	for _, r := range runs {
		for _, w := range r.EvalWorkflows {
			wfs[w] = true
		}
		conds[r.Condition] = true
	}
	if len(wfs) != len(Workflows) || len(conds) != len(Conditions) {
		t.Errorf("smoke covers workflows %v conditions %v", wfs, conds)
	}
}

func TestTinyScaleRatio(t *testing.T) {
	s := loadSeed(t, "mini.yaml")
	const vocab = 100
	base := float64(s.Models["s"].Tiny.Params(vocab))
	for scale, want := range map[string]float64{"s": 0.6, "m": 1.7, "l": 4.0} {
		got := 0.6 * float64(s.Models[scale].Tiny.Params(vocab)) / base
		if got < want*0.9 || got > want*1.1 {
			t.Errorf("scale %s: relative size %.2f, want %.1f +-10%%", scale, got, want)
		}
	}
	// The shape of s counted by hand: embeddings 100*64, per layer q/o 64*64,
	// k/v 64*32, q/k norms 2*16, MLP 3*64*192, two norms 2*64; final norm 64.
	hand := int64(100*64 + 2*(2*64*64+2*64*32+2*16+3*64*192+2*64) + 64)
	if got := s.Models["s"].Tiny.Params(vocab); got != hand {
		t.Errorf("Params = %d, want %d", got, hand)
	}
}

func TestPlanDeterministicAndSensitive(t *testing.T) {
	p := writeSpec(t, baseSpec)
	a, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	ra, _ := Plan(a)
	b, _ := Load(p)
	rb, _ := Plan(b)
	ja, _ := json.Marshal(ra)
	jb, _ := json.Marshal(rb)
	if string(ja) != string(jb) {
		t.Fatal("two plans of the same spec differ")
	}
	// Changing a knob changes every hash; changing only the experiment
	// name changes none.
	c, err := Load(writeSpec(t, edit(t, baseSpec, "steps: 20", "steps: 21")))
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := Plan(c)
	d, err := Load(writeSpec(t, edit(t, baseSpec, "experiment: t", "experiment: other")))
	if err != nil {
		t.Fatal(err)
	}
	rd, _ := Plan(d)
	for i := range ra {
		if ra[i].ConfigHash == rc[i].ConfigHash {
			t.Errorf("%s: hash unchanged after steps 20 -> 21", ra[i].ID)
		}
		if ra[i].ConfigHash != rd[i].ConfigHash {
			t.Errorf("%s: hash changed with the experiment name", ra[i].ID)
		}
	}
}

func TestResolvedRoundTrip(t *testing.T) {
	t.Setenv("MARLOW_MODELS", "/models")
	t.Setenv("MARLOW_DATA", "/data")
	for _, name := range []string{"smoke.yaml", "paper.yaml"} {
		s := loadSeed(t, name)
		y, err := s.ResolvedYAML()
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"clip_high: 0.28", "bootstrap_seed: 1", "beta2: 0.999", "before_training: true"} {
			if !strings.Contains(string(y), key) {
				t.Errorf("%s: resolved YAML lacks %q", name, key)
			}
		}
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, y, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Load(p)
		if err != nil {
			t.Fatalf("%s: resolved spec does not load: %v\n%s", name, err, y)
		}
		r1, _ := Plan(s)
		r2, err := Plan(r)
		if err != nil || len(r1) != len(r2) {
			t.Fatalf("%s: replan: %v", name, err)
		}
		for i := range r1 {
			if r1[i].ConfigHash != r2[i].ConfigHash {
				t.Fatalf("%s: %s hash differs after round trip", name, r1[i].ID)
			}
		}
	}
}

func TestConfigHashIgnoresAnalysisAndDirectories(t *testing.T) {
	base := RunConfig{ID: "x", Model: ModelConfig{Checkpoint: "/a/models/Qwen3-0.6B"}, Data: DataConfig{Path: "/a/data/dapo.parquet"}}
	h0, err := ConfigHash(base)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(*RunConfig)
		same bool
	}{
		{"analysis threshold", func(c *RunConfig) { c.Analysis.CliffAbs = 0.3 }, true},
		{"moved checkout", func(c *RunConfig) {
			c.Model.Checkpoint = "/b/models/Qwen3-0.6B"
			c.Data.Path = "/b/data/dapo.parquet"
		}, true},
		{"other checkpoint", func(c *RunConfig) { c.Model.Checkpoint = "/a/models/Qwen3-1.7B" }, false},
		{"other data file", func(c *RunConfig) { c.Data.Path = "/a/data/aime.parquet" }, false},
		{"seed", func(c *RunConfig) { c.Seed = 7 }, false},
	}
	for _, tc := range cases {
		c := base
		tc.edit(&c)
		h, err := ConfigHash(c)
		if err != nil {
			t.Fatal(err)
		}
		if (h == h0) != tc.same {
			t.Errorf("%s: hash equal = %v, want %v", tc.name, h == h0, tc.same)
		}
	}
}

func TestValSeedSharedWithinCell(t *testing.T) {
	s, err := Load("../../seeds/smoke.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	byCell := map[string]uint64{}
	seen := map[uint64]string{}
	for _, r := range runs {
		key := ValKey(r.Task, r.Scale, r.SeedIndex)
		if r.Config.ValSeed == 0 {
			t.Fatalf("%s: zero val seed", r.ID)
		}
		if v, ok := byCell[key]; ok && v != r.Config.ValSeed {
			t.Errorf("%s: val seed %d differs from %d of the same (task, scale, seed)", r.ID, r.Config.ValSeed, v)
		}
		byCell[key] = r.Config.ValSeed
		if k, ok := seen[r.Config.ValSeed]; ok && k != key {
			t.Errorf("val seed shared by %s and %s", k, key)
		}
		seen[r.Config.ValSeed] = key
	}
	if len(byCell) < 2 {
		t.Fatalf("smoke plan has %d (task, scale, seed) groups, want >= 2", len(byCell))
	}
}
