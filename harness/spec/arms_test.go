package spec

import (
	"slices"
	"strings"
	"testing"
)

// armsSpec is baseSpec with a second scale of the same shape, whose base
// model is pretrained on two candidate counts, and three arms.
const armsSpec = baseSpec + `  kl_coef: {}
models:
  s:
    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}
  smix:
    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}
    pretrain: {n_votes_mix: [2, 5]}
arms:
  lowlr:
    matrix: {workflows: [voting], conditions: [sp, ip]}
    grpo: {lr: 1.0e-6}
  i6:
    matrix: {conditions: [ip]}
    seeds: [3]
    grpo: {coherence: {lambda: 0.5}}
  nv5:
    matrix: {workflows: [voting], scales: [smix], conditions: [sp]}
    workflow: {n_votes: 5}
`

func armsSpecText(t *testing.T) string {
	t.Helper()
	// baseSpec's models section is replaced by armsSpec's
	return strings.Replace(armsSpec, "models:\n  s:\n    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}\ngrpo:", "grpo:", 1)
}

func TestPlanArms(t *testing.T) {
	s, err := Load(writeSpec(t, armsSpecText(t)))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Run{}
	var arms []string
	for _, r := range runs {
		byID[r.ID] = r
		if !slices.Contains(arms, r.Arm) {
			arms = append(arms, r.Arm)
		}
	}
	if want := []string{"", "i6", "lowlr", "nv5"}; !slices.Equal(arms, want) {
		t.Errorf("arms in plan order = %q, want %q", arms, want)
	}
	cases := []struct {
		id       string
		lr       float64
		nVotes   int
		coh      bool
		nvMix    []int
		notFound bool
	}{
		{id: "voting-sp-s-synth-math-seed1", lr: 2e-5, nVotes: 3},
		{id: "voting-sp-s-synth-math-lowlr-seed1", lr: 1e-6, nVotes: 3},
		{id: "voting-ip-s-synth-math-lowlr-seed2", lr: 1e-6, nVotes: 3},
		{id: "eval-opt-ip-s-synth-math-lowlr-seed1", notFound: true}, // not in the arm's workflows
		{id: "voting-base-s-synth-math-lowlr-seed1", notFound: true}, // not in the arm's conditions
		{id: "eval-opt-ip-s-synth-math-i6-seed3", lr: 2e-5, nVotes: 3, coh: true},
		{id: "eval-opt-ip-s-synth-math-i6-seed1", notFound: true}, // the arm's own seeds
		{id: "voting-sp-smix-synth-math-nv5-seed2", lr: 2e-5, nVotes: 5, nvMix: []int{2, 5}},
		{id: "voting-sp-smix-synth-math-seed1", notFound: true}, // smix is the arm's scale only
	}
	for _, c := range cases {
		r, ok := byID[c.id]
		if ok == c.notFound {
			t.Errorf("%s: planned %v, want %v", c.id, ok, !c.notFound)
			continue
		}
		if !ok {
			continue
		}
		rc := r.Config
		if rc.GRPO.LR != c.lr || rc.WorkflowSet.NVotes != c.nVotes || (rc.GRPO.Coherence != nil) != c.coh {
			t.Errorf("%s: lr %g n_votes %d coherence %v, want %g %d %v", c.id, rc.GRPO.LR, rc.WorkflowSet.NVotes, rc.GRPO.Coherence != nil, c.lr, c.nVotes, c.coh)
		}
		if !slices.Equal(rc.Model.Pretrain.NVotesMix, c.nvMix) {
			t.Errorf("%s: pretrain n_votes_mix %v, want %v", c.id, rc.Model.Pretrain.NVotesMix, c.nvMix)
		}
		if rc.Arm != r.Arm || rc.ID != r.ID {
			t.Errorf("%s: config arm %q id %q, run arm %q", c.id, rc.Arm, rc.ID, r.Arm)
		}
		// arms share the main matrix's validation draws (common random numbers)
		if rc.ValSeed != DeriveSeed(s.MasterSeed, ValKey(r.Task, r.Scale, r.SeedIndex)) {
			t.Errorf("%s: val seed is not the cell's", c.id)
		}
	}
	if got := s.Scales(); !slices.Equal(got, []string{"s", "smix"}) {
		t.Errorf("Scales() = %v, want [s smix]", got)
	}
	// the main matrix's runs are planned exactly as without arms
	plain, err := Load(writeSpec(t, baseSpec))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Plan(plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if r, ok := byID[w.ID]; !ok || r.ConfigHash != w.ConfigHash {
			t.Errorf("%s: main-matrix run changed by the arms (planned %v)", w.ID, ok)
		}
	}
}

func TestArmsMalformed(t *testing.T) {
	cases := []struct {
		name, old, new, want string
	}{
		{"bad arm name", "  lowlr:\n", "  low-lr:\n", `arms.low-lr: arm name "low-lr" must match`},
		{"unknown arm key", "    grpo: {lr: 1.0e-6}\n", "    grpo: {lr: 1.0e-6}\n    model: s\n", `arms.lowlr.model: unknown key "model"`},
		{"unknown grpo key", "grpo: {lr: 1.0e-6}", "grpo: {lrr: 1.0e-6}", `arms.lowlr.grpo.lrr: unknown key "lrr"`},
		{"bad grpo value", "grpo: {lr: 1.0e-6}", "grpo: {lr: -1}", `lr: must be in (0, 1], got -1`},
		{"unknown scale", "scales: [smix]", "scales: [smx]", `arms.nv5.matrix.scales[0]: scale "smx" has no model: did you mean "smix"?`},
		{"unknown workflow", "matrix: {workflows: [voting], conditions: [sp, ip]}", "matrix: {workflows: [debate], conditions: [sp, ip]}", `arms.lowlr.matrix.workflows[0]: "debate" is not allowed`},
		{"n_votes without a mixed base", "scales: [smix]", "scales: [s]", "arms.nv5.workflow.n_votes: 5 differs from workflow.n_votes (3), which the base model of scale s is pretrained with"},
		{"n_votes outside the mix", "n_votes: 5}", "n_votes: 4}", "arms.nv5.workflow.n_votes: 4 is not in models.smix.pretrain.n_votes_mix [2 5]"},
		{"knob of an absent workflow", "    workflow: {n_votes: 5}\n", "    workflow: {n_votes: 5, max_iterations: 2}\n", "arms.nv5.workflow.max_iterations: only used by workflow eval-opt, which is not in this arm's workflows (voting)"},
		{"duplicate arm seed", "seeds: [3]", "seeds: [3, 3]", "arms.i6.seeds[1]: duplicate seed 3"},
		{"pretrain of a checkpoint model", "    pretrain: {n_votes_mix: [2, 5]}\n", "    pretrain: {n_votes_mix: [2, 5]}\n  ck:\n    checkpoint: /m\n    pretrain: {lr: 0.1}\n", "models.ck.pretrain: only a tiny shape is pretrained"},
		{"bad pretrain override", "pretrain: {n_votes_mix: [2, 5]}", "pretrain: {batch_size: 0, n_votes_mix: [2, 5]}", "models.smix.pretrain.batch_size: must be in [1, 4096], got 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loadFails(t, armsSpecText(t), c.old, c.new, c.want)
		})
	}
}
