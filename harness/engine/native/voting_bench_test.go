package native

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/internal/procstat"
	"github.com/marlowlab/marlow/keyed"
)

// The shape of one mini step of voting-sp-l-synth-math: 8 problems, 8
// rollouts, 3 generators answering one shared prompt (~205 tokens) and one
// aggregator per rollout with its own prompt (~273 tokens: the problem's
// text, then the rollout's candidates).
const (
	vsProblems, vsRollouts, vsVotes = 8, 8, 3
	vsGenPrompt, vsAggPrompt        = 190, 258 // message characters (the chat template adds ~15 tokens)
	vsAggCandidates                 = 110      // characters of the aggregator prompt after the problem
	vsGenNew, vsAggNew              = 30, 12
)

// votingEngine opens the committed scale-l base model of seeds/mini.yaml
// with one adapter "policy".
func votingEngine(tb testing.TB, threads int) *Engine {
	tb.Helper()
	dirs, _ := filepath.Glob("../../../seeds/models/l-*")
	if len(dirs) == 0 {
		tb.Skip("no scale-l model under seeds/models")
	}
	e, err := Open(dirs[0], Options{Threads: threads})
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.NewAdapter(context.Background(), "policy", engine.AdapterConfig{Rank: 8, Alpha: 16, Seed: 1}); err != nil {
		tb.Fatal(err)
	}
	// A trained-looking adapter: B non-zero so that the policy differs from the base.
	for i := range e.adapters["policy"].Data {
		e.adapters["policy"].Data[i] += float32(0.02 * keyed.UniformAt(99, uint64(i)))
	}
	return e
}

func randText(rng *rand.Rand, n int) string {
	const chars = "0123456789+= abcdefghijklmnopqrstuvwxyz.:\n"
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[rng.IntN(len(chars))]
	}
	return string(b)
}

// votingRequests are the generator requests (vsVotes x vsRollouts per
// problem on one prompt) and the aggregator requests of one step.
func votingRequests() (gen, agg []engine.Request) {
	rng := rand.New(rand.NewPCG(17, 1))
	for p := 0; p < vsProblems; p++ {
		prompt := randText(rng, vsGenPrompt)
		problem := randText(rng, vsAggPrompt-vsAggCandidates)
		for r := 0; r < vsRollouts; r++ {
			for v := 0; v < vsVotes; v++ {
				gen = append(gen, engine.Request{Adapter: "policy", Messages: []engine.Message{{Role: "user", Content: prompt}},
					MaxNewTokens: vsGenNew - 4 + (p+r+v)%8, Temperature: 0.7, Seed: uint64(len(gen)), IgnoreEndOfTurn: true})
			}
			agg = append(agg, engine.Request{Adapter: "policy", Messages: []engine.Message{{Role: "user", Content: problem + randText(rng, vsAggCandidates)}},
				MaxNewTokens: vsAggNew, Temperature: 0.7, Seed: uint64(1000 + len(agg)), IgnoreEndOfTurn: true})
		}
	}
	return gen, agg
}

// votingTurns turns the completions of one step into its train batch.
func votingTurns(gen, agg []engine.Request, gc, ac []engine.Completion) []engine.Turn {
	var turns []engine.Turn
	for i, c := range gc {
		turns = append(turns, engine.Turn{Adapter: "policy", Role: "generator", Agent: fmt.Sprintf("generator%d", i%vsVotes),
			PromptIDs: c.PromptIDs, CompletionIDs: c.IDs, OldLogProbs: c.LogProbs, Advantage: float64((i/vsVotes)%3) - 0.9})
	}
	for i, c := range ac {
		turns = append(turns, engine.Turn{Adapter: "policy", Role: "aggregator", Agent: "aggregator",
			PromptIDs: c.PromptIDs, CompletionIDs: c.IDs, OldLogProbs: c.LogProbs, Advantage: float64(i%3) - 1.1})
	}
	return turns
}

func votingTrainOptions() engine.TrainOptions {
	return engine.TrainOptions{ClipLow: 0.2, ClipHigh: 0.28, LossAgg: engine.SeqMeanTokenMean, Temperature: 0.7,
		LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, GradClip: 1, KLCoef: map[string]float64{}}
}

// BenchmarkVotingStep measures one voting step at scale l: the generator
// and aggregator rollouts, and the train step (base forward for the KL
// estimate, policy forward, backward; no optimizer update), in CPU time.
func BenchmarkVotingStep(b *testing.B) {
	e := votingEngine(b, 1)
	ctx := context.Background()
	gen, agg := votingRequests()
	gc, err := e.Generate(ctx, gen)
	if err != nil {
		b.Fatal(err)
	}
	ac, err := e.Generate(ctx, agg)
	if err != nil {
		b.Fatal(err)
	}
	turns := votingTurns(gen, agg, gc, ac)
	opt := votingTrainOptions()
	for _, mode := range []string{"unshared", "shared"} {
		e.noShare = mode == "unshared"
		b.Run("rollouts/"+mode, func(b *testing.B) {
			c0 := procstat.CPUTime()
			for i := 0; i < b.N; i++ {
				if _, err := e.Generate(ctx, gen); err != nil {
					b.Fatal(err)
				}
				if _, err := e.Generate(ctx, agg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((procstat.CPUTime()-c0)/float64(b.N), "cpu-s/op")
		})
		b.Run("train/"+mode, func(b *testing.B) {
			c0 := procstat.CPUTime()
			for i := 0; i < b.N; i++ {
				if _, _, err := e.grpoStep(ctx, "policy", turns, opt, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((procstat.CPUTime()-c0)/float64(b.N), "cpu-s/op")
		})
	}
}
