package spec

import (
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/study"
)

// routingSpec is baseSpec with two declared routings: a frozen aggregator
// in the main matrix (in place of ip) and per-adapter settings in an arm.
const routingSpec = `experiment: t
master_seed: 7
seeds: [1]
matrix:
  workflows: [voting]
  tasks: [synth-math]
  scales: [s]
  conditions: [base, sp, ip_frozen_agg]
models:
  s:
    tiny: {hidden: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate: 192}
grpo:
  steps: 20
  warmup_steps: 2
routings:
  ip_frozen_agg:
    from: ip
    roles: {aggregator: base}
  rates:
    from: ip
    adapters:
      aggregator: {lr_mult: 0.25, kl_coef: 0.1}
arms:
  slow:
    matrix: {conditions: [rates]}
`

func TestPlanRoutings(t *testing.T) {
	s, err := Load(writeSpec(t, routingSpec))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Run{}
	for _, r := range runs {
		byID[r.ID] = r
	}
	cases := []struct {
		id, cond, routing string
	}{
		{"voting-base-s-synth-math-seed1", study.Base, ""},
		{"voting-sp-s-synth-math-seed1", study.SP, ""},
		{"voting-ip_frozen_agg-s-synth-math-seed1", study.IP, "ip_frozen_agg"},
		{"voting-rates-s-synth-math-slow-seed1", study.IP, "rates"},
	}
	if len(runs) != len(cases) {
		t.Errorf("planned %d runs, want %d", len(runs), len(cases))
	}
	for _, c := range cases {
		r, ok := byID[c.id]
		if !ok {
			t.Errorf("%s not planned", c.id)
			continue
		}
		if r.Condition != c.cond || r.Config.Condition != c.cond {
			t.Errorf("%s: condition %q / config %q, want %q", c.id, r.Condition, r.Config.Condition, c.cond)
		}
		got := ""
		if r.Config.Routing != nil {
			got = r.Config.Routing.Name
		}
		if got != c.routing {
			t.Errorf("%s: routing %q, want %q", c.id, got, c.routing)
		}
		if !r.Config.Train && c.cond != study.Base {
			t.Errorf("%s: a routing's run must train", c.id)
		}
	}
	// The routing is part of the config and so of the hash; the built-in
	// conditions' configs do not mention routings at all.
	b, err := CanonicalJSON(byID["voting-sp-s-synth-math-seed1"].Config)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "routing") {
		t.Errorf("an sp run's config mentions routing: %s", b)
	}
	fr := byID["voting-ip_frozen_agg-s-synth-math-seed1"].Config
	if fr.Routing.Route(study.Aggregator) != "" || fr.Routing.Route(study.Generator) != study.Generator {
		t.Errorf("frozen routing routes aggregator to %q and generator to %q", fr.Routing.Route(study.Aggregator), fr.Routing.Route(study.Generator))
	}
	if m := byID["voting-rates-s-synth-math-slow-seed1"].Config.Routing.Settings(study.Aggregator).LRMultOf(); m != 0.25 {
		t.Errorf("rates routing: aggregator lr_mult %v, want 0.25", m)
	}
}

func TestRoutingErrors(t *testing.T) {
	cases := []struct {
		name, old, new, want string
	}{
		{"unknown from", "from: ip\n    roles", "from: sa-rl\n    roles", "routings.ip_frozen_agg.from"},
		{"unknown role", "roles: {aggregator: base}", "roles: {critic: base}", `unknown role "critic"`},
		{"bad adapter name", "roles: {aggregator: base}", "roles: {aggregator: Sup-1}", "adapter name"},
		{"adapter not routed", "aggregator: {lr_mult", "judge: {lr_mult", `adapter "judge" is not one the routing trains`},
		{"zero rate", "lr_mult: 0.25", "lr_mult: 0", "lr_mult 0 must be a finite number > 0"},
		{"negative kl", "kl_coef: 0.1", "kl_coef: -1", "kl_coef -1 must be"},
		{"redeclared builtin", "  rates:\n    from: ip", "  ip:\n    from: ip", "cannot be redeclared"},
		{"unknown condition", "conditions: [base, sp, ip_frozen_agg]", "conditions: [base, sp, ip_frozen]", `"ip_frozen" is not allowed`},
		{"two ip in a grid", "conditions: [base, sp, ip_frozen_agg]", "conditions: [base, ip, ip_frozen_agg]", "both ip runs of this grid"},
		{"unused routing", "arms:\n", "  idle:\n    from: sp\narms:\n", "routing idle is named by no grid"},
		{"role no workflow calls", "roles: {aggregator: base}", "roles: {evaluator: base}", "role evaluator is called by none of the workflows"},
		{"every role frozen", "roles: {aggregator: base}", "roles: {aggregator: base, generator: base}", "would train nothing"},
		{"adapter no workflow trains", "aggregator: {lr_mult", "evaluator: {lr_mult", "adapter evaluator trains no role"},
		{"missing from", "from: ip\n    adapters", "adapters", "routings.rates.from"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := loadFails(t, routingSpec, c.old, c.new, c.want)
			if !strings.Contains(err.Error(), "spec.yaml:") {
				t.Errorf("error names no file line: %v", err)
			}
		})
	}
}
