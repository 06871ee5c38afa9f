package native

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/keyed"
)

// testSeqs are three short supervised sequences of ids.
func testSeqs(e *Engine) []seqInput {
	var out []seqInput
	for i, s := range []string{"hello world", "abc", "the quick fox"} {
		ids, _ := e.tok.Encode(s)
		var rows, tg []int32
		for p := 1; p < len(ids); p++ {
			if p%2 == 1 || i == 1 {
				rows = append(rows, int32(p-1))
				tg = append(tg, ids[p])
			}
		}
		out = append(out, seqInput{ids: ids[:rows[len(rows)-1]+1], rows: rows, targets: tg})
	}
	return out
}

// TestSupervisedGrad checks every base tensor's gradient (embedding, norms,
// projections, q/k norms, LM head, cross-entropy) against finite differences.
func TestSupervisedGrad(t *testing.T) {
	for _, tied := range []bool{true, false} {
		t.Run(fmt.Sprintf("tied=%v", tied), func(t *testing.T) {
			e := testEngine(t, tied, 2)
			seqs := testSeqs(e)
			tokens := 0
			for _, s := range seqs {
				tokens += len(s.rows)
			}
			_, grad := e.supervisedGrad(seqs, tokens)
			loss := func() float64 {
				l, _ := e.supervisedGrad(seqs, tokens)
				return l
			}
			wt, gt := e.w.Tensors(), grad.Tensors()
			for i := range wt {
				if wt[i].Name == "model.embed_tokens.weight" || wt[i].Name == "lm_head.weight" {
					// Only rows of used tokens matter; check those.
					D := e.d.D
					for _, id := range []int32{seqs[0].ids[0], seqs[0].targets[0]} {
						fdCheck(t, fmt.Sprintf("%s[row %d]", wt[i].Name, id), wt[i].Data[int(id)*D:(int(id)+1)*D], gt[i].Data[int(id)*D:(int(id)+1)*D], loss)
					}
					continue
				}
				fdCheck(t, wt[i].Name, wt[i].Data, gt[i].Data, loss)
			}
		})
	}
}

// grpoTestTurns are turns of two roles and three agents with old log-probs
// near the current ones, so that some ratios are clipped.
func grpoTestTurns(t *testing.T, e *Engine, adapter string) []engine.Turn {
	t.Helper()
	spec := []struct {
		role, agent, prompt, completion string
		adv                             float64
	}{
		{"generator", "generator0", "2+2=", "4<|im_end|>", 1.2},
		{"generator", "generator1", "2+2=", "5", -0.7},
		{"generator", "generator0", "1+3=", "43", 0.5},
		{"aggregator", "aggregator", "pick:", "1<|im_end|>", -1.1},
		{"generator", "generator2", "9-1=", "8", 0},
	}
	var turns []engine.Turn
	for i, s := range spec {
		p, err := e.tok.Encode(s.prompt)
		if err != nil {
			t.Fatal(err)
		}
		c, err := e.tok.Encode(s.completion)
		if err != nil {
			t.Fatal(err)
		}
		old := make([]float32, len(c))
		for j := range old {
			old[j] = float32(-2 + 0.4*keyed.UniformAt(uint64(100+i), uint64(j)))
		}
		turns = append(turns, engine.Turn{Adapter: adapter, Role: s.role, Agent: s.agent, PromptIDs: p,
			CompletionIDs: c, OldLogProbs: old, Advantage: s.adv})
	}
	return turns
}

// grpoFixture is an engine with adapter "p" (random, non-zero weights) and
// the grpoTestTurns on it.
func grpoFixture(t *testing.T, threads int) (*Engine, *Adapter, []engine.Turn) {
	t.Helper()
	e := testEngine(t, true, threads)
	if err := e.NewAdapter(context.Background(), "p", adapterCfg(2)); err != nil {
		t.Fatal(err)
	}
	ad := e.adapters["p"]
	copy(ad.Data, randVec(len(ad.Data), 21, 0.3))
	return e, ad, grpoTestTurns(t, e, "p")
}

// TestGRPOGrad checks the whole GRPO loss gradient (each aggregation mode,
// with a KL penalty on one role) and that each role's gradient is the
// gradient of its share of the loss, and the shares sum to the total.
func TestGRPOGrad(t *testing.T) {
	for _, agg := range []string{engine.TokenMean, engine.SeqMeanTokenMean, engine.SeqMeanTokenSum} {
		t.Run(agg, func(t *testing.T) {
			e, ad, turns := grpoFixture(t, 2)
			opt := defaultTrainOptions()
			// Old log-probs: current ones shifted, so ratios spread over and
			// beyond the clip range.
			cur, err := e.LogProbs(context.Background(), "p", turns, opt.Temperature)
			if err != nil {
				t.Fatal(err)
			}
			for i := range turns {
				for j := range turns[i].OldLogProbs {
					turns[i].OldLogProbs[j] = cur[i][j] + float32(0.4*keyed.UniformAt(uint64(200+i), uint64(j)))
				}
			}
			opt.LossAgg = agg
			opt.KLCoef = map[string]float64{"aggregator": 0.5}
			ctx := context.Background()
			st, gg, err := e.grpoStep(ctx, "p", turns, opt, false)
			if err != nil {
				t.Fatal(err)
			}
			if st.SkippedTurns != 1 {
				t.Errorf("skipped %d turns, want 1", st.SkippedTurns)
			}
			sum := 0.0
			for _, r := range st.Roles {
				sum += r.Loss
			}
			if math.Abs(sum-st.Total.Loss) > 1e-12*math.Max(1, math.Abs(sum)) {
				t.Errorf("role losses sum to %v, total %v", sum, st.Total.Loss)
			}
			lossOf := func(role string) func() float64 {
				return func() float64 {
					s, _, err := e.grpoStep(ctx, "p", turns, opt, false)
					if err != nil {
						t.Fatal(err)
					}
					if role == "*" {
						return s.Total.Loss
					}
					for _, r := range s.Roles {
						if r.Role == role {
							return r.Loss
						}
					}
					t.Fatalf("role %q missing", role)
					return 0
				}
			}
			fdCheck(t, "total", ad.Data, gg.total, lossOf("*"))
			for r, role := range gg.roles {
				fdCheck(t, role, ad.Data, gg.roleGrad[r], lossOf(role))
			}
			// Role gradients sum to the total, agents to their role.
			acc := make([]float32, len(ad.Data))
			for _, g := range gg.roleGrad {
				axpy(1, g, acc)
			}
			for i := range acc {
				if acc[i] != gg.total[i] {
					t.Fatalf("role gradients do not sum to the total at %d", i)
				}
			}
			gen := make([]float32, len(ad.Data))
			for a, name := range gg.agents {
				if name != "aggregator" {
					axpy(1, gg.agent[a], gen)
				}
			}
			for i := range gen {
				if math.Abs(float64(gen[i]-gg.roleGrad[1][i])) > 1e-7 {
					t.Fatalf("generator agents do not sum to the generator role at %d", i)
				}
			}
			if gg.roles[1] != "generator" || len(gg.agents) != 3 {
				t.Fatalf("roles %v agents %v", gg.roles, gg.agents)
			}
			g := st.Roles[1]
			if math.IsNaN(g.AgentCosMean) || g.AgentCosMin > g.AgentCosMean || !math.IsNaN(st.Roles[0].AgentCosMean) || st.Roles[0].Role != "aggregator" {
				t.Errorf("agent cosines: generator mean %v min %v; aggregator mean %v", g.AgentCosMean, g.AgentCosMin, st.Roles[0].AgentCosMean)
			}
			if sh := st.Roles[0].GradShare + st.Roles[1].GradShare; math.Abs(sh-1) > 1e-12 {
				t.Errorf("grad shares sum to %v", sh)
			}
			if st.Total.Tokens != 2+1+2+2 || st.Total.Seqs != 4 || st.Roles[1].Tokens != 5 {
				t.Errorf("token counts: total %d seqs %d generator %d", st.Total.Tokens, st.Total.Seqs, st.Roles[1].Tokens)
			}
		})
	}
}
