package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/analysis/analysistest"
)

// TestReadmeRoutingsAndAgentCos: the matrix names a run's declared routing
// and the amplification section places the signature on the same-role
// agents where the logs have agent_cos; a study without either prints
// neither (committed reports keep their bytes).
func TestReadmeRoutingsAndAgentCos(t *testing.T) {
	render := func(edit bool) string {
		runs := analysistest.Fixture()
		for _, r := range runs {
			if !edit || r.Manifest.RunID != "voting-ip-m-math-seed2" {
				continue
			}
			r.Manifest.Config = map[string]any{"routing": map[string]any{
				"name": "ip_frozen_eval", "from": "ip", "roles": map[string]any{"evaluator": "base"},
				"adapters": map[string]any{"generator": map[string]any{"lr_mult": 0.5}}}}
			for i := range r.Steps {
				if r.Steps[i].Role == "generator" {
					r.Steps[i].AgentCos = map[string]float64{"generator0": 0.9, "generator1": 0.8, "generator2": 0.7}
				}
			}
		}
		st, err := analysis.Analyze(runs)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		w := md(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) })
		writeMatrix(w, st)
		writeAmplification(w, st)
		return b.String()
	}
	plain, edited := render(false), render(true)
	for _, s := range []string{"Routings:", "same-role agents of the amplified roles"} {
		if strings.Contains(plain, s) {
			t.Errorf("a study without routings or agent_cos prints %q", s)
		}
	}
	for _, s := range []string{
		"| synth-math | voting | m | ip | ip_frozen_eval | from ip; evaluator -> base (frozen); generator: lr x0.5 |",
		"| voting-ip-m-math-seed2 | generator | generator | 74 | generator0 0.900, generator1 0.800, generator2 0.700 |",
	} {
		if !strings.Contains(edited, s) {
			t.Errorf("README lacks %q:\n%s", s, edited)
		}
	}
}
