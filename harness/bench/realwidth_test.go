package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/engine/torch"
)

// TestRealWidthWorkload: 8 rollouts of each of 8 prompts, groups on
// alternating adapters, and within every group new tokens spread over
// 24-96 (so rows stop at different steps in every wave).
func TestRealWidthWorkload(t *testing.T) {
	reqs := realGenRequests()
	if len(reqs) != 64 {
		t.Fatalf("%d requests", len(reqs))
	}
	lo, hi := 1<<30, 0
	for g := 0; g < 8; g++ {
		glo, ghi := 1<<30, 0
		for i := g * 8; i < g*8+8; i++ {
			r := reqs[i]
			if r.Messages[0].Content != reqs[g*8].Messages[0].Content || r.Adapter != []string{"", "bench"}[g%2] || !r.IgnoreEndOfTurn {
				t.Fatalf("request %d: %+v", i, r)
			}
			glo, ghi = min(glo, r.MaxNewTokens), max(ghi, r.MaxNewTokens)
		}
		if ghi-glo < 40 {
			t.Fatalf("group %d: new tokens %d-%d, want a spread", g, glo, ghi)
		}
		if g > 0 && reqs[g*8].Messages[0].Content == reqs[0].Messages[0].Content {
			t.Fatalf("group %d repeats prompt 0", g)
		}
		lo, hi = min(lo, glo), max(hi, ghi)
	}
	if lo != 24 || hi != 96 {
		t.Fatalf("new tokens %d-%d, want 24-96", lo, hi)
	}
}

func TestRealWidthReport(t *testing.T) {
	r := Result{Engine: "torch", Size: "qwen3-0.6b, 2 layers", Threads: 1, CPU: "X", GenBackend: "slots", GenWorkload: RealWidthWorkload,
		GenTokens: 3840, GenRuns: 1, GenTokS: 100, GenCores: 1, ServerPeakRSSBytes: 1 << 30,
		GenPool: &torch.GenPool{Blocks: 100, BlockTokens: 16, PoolBytes: 1 << 20, PeakBlocks: 50, Preemptions: 3, Steps: 10, RowSteps: 400, UsedTokenSteps: 8000, Prefills: 8, Requests: 64}}
	s := r.String()
	for _, want := range []string{"generation backend slots, CPU X", "8 prompts x 8 rollouts", "3840 tokens over 1 runs, 100.0 tok/s",
		"3 rows preempted, mean occupancy 50.0% of the pool", "mean batch 40.0 rows over 10 steps, 8 prefills for 64 requests", "train: not measured", "server process: 1024.0 MB"} {
		if !strings.Contains(s, want) {
			t.Fatalf("report lacks %q:\n%s", want, s)
		}
	}
	r.GenPool = nil
	if !strings.Contains(r.String(), "KV pool: none") {
		t.Fatal(r.String())
	}
}

func TestRealWidthNeedsTokenizer(t *testing.T) {
	_, err := Engine(context.Background(), nativeRegistry(t), RealWidth, Options{})
	if err == nil || !strings.Contains(err.Error(), "needs the Qwen3 tokenizer folder (--tokenizer") {
		t.Fatalf("err %v", err)
	}
}
