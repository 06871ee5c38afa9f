package enginecheck

import (
	"strings"
	"testing"
)

// passedRouting is the routing figures of a check that passed.
func passedRouting() Routing {
	e := RoutingEngine{Samples: 3, LRRatio: RoutingLRMult, LRResidual: 1e-5, KLChange: 0.4, KLLoss: 1}
	n, t := e, e
	n.Engine, t.Engine = "native", "torch"
	return Routing{Engines: []RoutingEngine{n, t}, KLLossRel: 1e-5}
}

func TestRoutingFailures(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Routing)
		fp32  bool
		wants []string
	}{
		{"passed", func(*Routing) {}, true, nil},
		{"not run", func(r *Routing) { *r = Routing{} }, false, []string{"routing: not checked"}},
		{"base moved", func(r *Routing) { r.Engines[1].BaseLogProb = 1e-7 }, false, []string{"routing, torch: the frozen base policy moved"}},
		{"base sampled otherwise", func(r *Routing) { r.Engines[0].BaseSamples = 1 }, true, []string{"routing, native: the frozen base policy moved"}},
		{"rate not applied", func(r *Routing) { r.Engines[0].LRRatio, r.Engines[0].LRResidual = 1, 1 }, true, []string{"the update at lr x0.5 is 1 of the plain one"}},
		{"rate judged in float32 only", func(r *Routing) { r.Engines[0].LRRatio = 1 }, false, nil},
		{"kl not applied", func(r *Routing) { r.Engines[1].KLChange = 0 }, true, []string{"a KL coefficient of 1 changed the update by 0"}},
		{"kl loss apart", func(r *Routing) { r.KLLossRel = 0.1 }, true, []string{"the KL step's loss differs by 0.1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := passedRouting()
			tc.edit(&r)
			got := r.failures(tc.fp32, DefaultStepTol)
			if len(got) != len(tc.wants) {
				t.Fatalf("failures %q, want %d", got, len(tc.wants))
			}
			for i, w := range tc.wants {
				if !strings.Contains(got[i], w) {
					t.Errorf("failure %q lacks %q", got[i], w)
				}
			}
		})
	}
}
