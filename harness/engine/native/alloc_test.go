package native

import (
	"context"
	"math"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
)

// TestDecodeAllocs: decoding allocates nothing per token (activation and
// cache buffers are reused; both batch sizes are large enough for every
// loop to use all threads); what remains per step are the closures and
// goroutines of the fixed work partition.
func TestDecodeAllocs(t *testing.T) {
	for _, threads := range []int{1, 2} {
		e := testEngine(t, true, threads)
		perStep := func(batch int) float64 {
			run := func(n int) float64 {
				var reqs []engine.Request
				for i := 0; i < batch; i++ {
					reqs = append(reqs, engine.Request{Messages: chat("abc"), MaxNewTokens: n, Temperature: 1, Seed: uint64(i), IgnoreEndOfTurn: true})
				}
				// Warm the buffers, then count.
				if _, err := e.Generate(context.Background(), reqs); err != nil {
					t.Fatal(err)
				}
				return testing.AllocsPerRun(3, func() {
					if _, err := e.Generate(context.Background(), reqs); err != nil {
						t.Fatal(err)
					}
				})
			}
			return (run(20) - run(5)) / 15
		}
		small, large := perStep(64), perStep(128)
		t.Logf("threads %d: %.1f allocations per decode step with 64 sequences, %.1f with 128", threads, small, large)
		// 64 more sequences per step: a per-token allocation would add 64.
		// What grows is the completions' text (a strings.Builder per
		// sequence grows a few times as tokens are decoded).
		if perTok := (large - small) / 64; math.Abs(perTok) > 0.25 {
			t.Errorf("threads %d: %.2f allocations per decoded token (%.1f per step at 64 sequences, %.1f at 128)", threads, perTok, small, large)
		}
	}
}
