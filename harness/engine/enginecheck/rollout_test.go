package enginecheck

import (
	"math"
	"strings"
	"testing"
)

// TestRolloutFigures checks the quantiles, the share outside the clip band
// and the judgement of the rollout agreement, in float32 and in bfloat16.
func TestRolloutFigures(t *testing.T) {
	band := func() Rollout { return Rollout{Low: math.Log(0.8), High: math.Log(1.28)} }
	// 200 tokens: |Δ| = 0.0001 i for i = 1..200, alternating sign; the
	// last two are outside the band, one on each side.
	var d []float64
	for i := 1; i <= 200; i++ {
		d = append(d, math.Copysign(0.0001*float64(i), float64(2*(i%2)-1)))
	}
	d[198], d[199] = -0.3, 0.3
	r := band()
	if err := r.add(d); err != nil {
		t.Fatal(err)
	}
	if r.Tokens != 200 || r.Outside != 2 || r.Share() != 0.01 {
		t.Errorf("tokens %d, outside %d, share %v; want 200, 2, 0.01", r.Tokens, r.Outside, r.Share())
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	if !near(r.P50, 0.01) || !near(r.P90, 0.018) || !near(r.P99, 0.0198) || r.Max != 0.3 {
		t.Errorf("|Δ| p50 %v p90 %v p99 %v max %v; want 0.01, 0.018, 0.0198, 0.3", r.P50, r.P90, r.P99, r.Max)
	}
	nan := band()
	if err := nan.add([]float64{0.1, math.NaN()}); err == nil || !strings.Contains(err.Error(), "token 1") {
		t.Errorf("a NaN Δ: error %v, want one naming token 1", err)
	}
	tests := []struct {
		name  string
		r     Rollout
		fp32  bool
		wants []string
	}{
		{"fp32 within", Rollout{Tokens: 10, Max: 5e-5}, true, nil},
		{"fp32 beyond", Rollout{Tokens: 10, Max: 2e-4}, true, []string{"max |training − rollout log-prob| 0.0002 > 0.0001"}},
		{"nothing compared", Rollout{}, true, []string{"no sampled tokens"}},
		{"bf16 within", Rollout{Tokens: 1000, Outside: 5, P99: 0.04, Max: 0.3, Low: math.Log(0.8), High: math.Log(1.28)}, false, nil},
		{"bf16 clipped", Rollout{Tokens: 1000, Outside: 6, P99: 0.04, Low: math.Log(0.8), High: math.Log(1.28)}, false,
			[]string{"6 of 1000 tokens (0.006) have a step-0 ratio outside the clip band (0.800, 1.280), more than 0.005"}},
		{"bf16 wide", Rollout{Tokens: 1000, P99: 0.12}, false, []string{"99th percentile of |training − rollout log-prob| 0.12 > 0.11"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := rolloutFailures(tc.r, tc.fp32, DefaultLogProbTol, DefaultRolloutShare, DefaultRolloutP99)
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
	// A bfloat16 report judges the rollout agreement, not the figures
	// against native.
	rep := Report{DType: "bfloat16", LogProbTol: DefaultLogProbTol, StepTol: DefaultStepTol, UpdateTol: DefaultUpdateTol,
		RolloutShare: DefaultRolloutShare, RolloutP99: DefaultRolloutP99, FreshTensors: 1, CoherenceRoles: 2, CoherenceMinScale: 0.6, History: History{Roles: 2, StepFactor: 0.6},
		LogProbBase: 0.02, LogProbAdapter: 0.03, LossRel: 0.025, Rollout: Rollout{Tokens: 100, P99: 0.01}, Routing: passedRouting(), AgentCosN: 2}
	if f := rep.Failures(); len(f) != 0 {
		t.Errorf("bfloat16 report: failures %q, want none", f)
	}
	rep.DType = "float32"
	if f := rep.Failures(); len(f) < 3 {
		t.Errorf("the same figures in float32: failures %q, want the log-probs and the loss at least", f)
	}
}
