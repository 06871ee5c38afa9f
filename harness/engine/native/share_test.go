package native

import (
	"context"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/keyed"
)

// shareRequests are requests with identical prompts, prompts sharing a long
// prefix, a prompt shared across adapters, and finished-at-once requests.
func shareRequests() []engine.Request {
	long := "the same long instruction text, then a problem: "
	var reqs []engine.Request
	for i, c := range []struct {
		ad, msg string
		n       int
	}{
		{"a", long + "1+2", 10}, {"a", long + "1+2", 7}, {"", long + "1+2", 9}, {"a", long + "3+4+5", 12},
		{"", long + "1+2", 0}, {"a", long + "1+2", 11}, {"b", long + "3+4+5", 8}, {"a", "short", 6},
		{"a", long + "3+4+5", 12}, {"b", long + "3+4", 5}, {"a", long, 4},
	} {
		reqs = append(reqs, engine.Request{Adapter: c.ad, Messages: chat(c.msg), MaxNewTokens: c.n, Temperature: 0.9, Seed: uint64(i + 1)})
	}
	return reqs
}

// TestSharedPrefill: prefilling shared prompt prefixes once gives the
// same tokens and log-probs, bit for bit, as prefilling every prompt, for
// any thread count.
func TestSharedPrefill(t *testing.T) {
	reqs := shareRequests()
	var want []engine.Completion
	for _, threads := range []int{1, 3} {
		for _, noShare := range []bool{true, false} {
			e := testEngine(t, false, threads)
			for i, name := range []string{"a", "b"} {
				if err := e.NewAdapter(context.Background(), name, adapterCfg(4)); err != nil {
					t.Fatal(err)
				}
				copy(e.adapters[name].Data, randVec(len(e.adapters[name].Data), uint64(40+i), 0.3))
			}
			e.noShare = noShare
			if !noShare {
				// The plan must share: identical prompts and the common instruction.
				var seqs []genSeq
				order := make([]int, len(reqs))
				for i, r := range reqs {
					p, err := e.tok.EncodeChat(r.Messages, true)
					if err != nil {
						t.Fatal(err)
					}
					ad := e.adapters[r.Adapter]
					seqs = append(seqs, genSeq{prompt: p, ad: ad})
					order[i] = i
				}
				plan := e.planPrefill(seqs, order)
				if plan[1].donor != 0 || plan[1].shared != len(seqs[1].prompt)-1 || plan[3].donor != 0 || plan[2].donor != -1 || plan[6].donor != -1 || plan[9].donor != 6 {
					t.Fatalf("unexpected plan %+v", plan)
				}
			}
			got, err := e.Generate(context.Background(), reqs)
			if err != nil {
				t.Fatal(err)
			}
			if want == nil {
				want = got
				continue
			}
			for i := range want {
				if !slices.Equal(got[i].IDs, want[i].IDs) || !slices.Equal(got[i].LogProbs, want[i].LogProbs) || got[i].Finish != want[i].Finish {
					t.Errorf("threads %d share %v request %d: got %v %v, want %v %v", threads, !noShare, i, got[i].IDs, got[i].LogProbs, want[i].IDs, want[i].LogProbs)
				}
			}
		}
	}
}

// shareTurns is a train batch in which the agents of two roles answer
// shared prompts: generator0/1 eight times each on two prompts (with
// completions of one token among them), the aggregator on its own prompts
// and once on a generator prompt, and a skipped turn.
func shareTurns(t *testing.T, e *Engine) []engine.Turn {
	t.Helper()
	enc := func(s string) []int32 {
		p, err := e.tok.EncodeChat(chat(s), true)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	prompts := [][]int32{enc("problem one, a statement long enough for two tiles of rows: 1+2+3"), enc("problem two: 4+4")}
	var turns []engine.Turn
	add := func(role, agent string, p []int32, n int, adv float64) {
		k := len(turns)
		c := make([]int32, n)
		old := make([]float32, n)
		for j := range c {
			c[j] = int32(3 + (k*7+j*5)%40)
			old[j] = float32(-3 + 0.5*keyed.UniformAt(uint64(300+k), uint64(j)))
		}
		turns = append(turns, engine.Turn{Adapter: "p", Role: role, Agent: agent, PromptIDs: p, CompletionIDs: c, OldLogProbs: old, Advantage: adv})
	}
	for r := 0; r < 8; r++ {
		for v, agent := range []string{"generator0", "generator1"} {
			add("generator", agent, prompts[r%2], 1+(r*3+v)%9, float64(r%3)-0.8)
		}
		agg := []string{"problem one: 1+2+3. candidates: ", "problem two: 4+4. candidates: "}[r%2] + strconv.Itoa(r)
		add("aggregator", "aggregator", enc(agg), 2+r%4, 0.7-float64(r%2))
	}
	add("aggregator", "aggregator", prompts[0], 3, 1.2)
	add("generator", "generator0", prompts[0], 4, 0) // skipped
	// Two identical turns: they share their whole inputs.
	add("generator", "generator1", prompts[1], 5, 0.4)
	turns = append(turns, turns[len(turns)-1])
	return turns
}

// TestSharedTrainStep: a train step that forwards each shared prompt once
// gives the log-probs, losses and token statistics of the step that
// forwards every turn on its own, bit for bit, and the same per-agent,
// per-role and total gradients within fp32 rounding; the shared step is
// the same bits for any thread count.
func TestSharedTrainStep(t *testing.T) {
	for _, agg := range []string{engine.TokenMean, engine.SeqMeanTokenMean} {
		var ref *grpoGrads
		var refSt engine.StepStats
		var shared []*grpoGrads
		for _, c := range []struct {
			threads int
			noShare bool
		}{{2, true}, {1, false}, {3, false}} {
			e := testEngine(t, false, c.threads)
			if err := e.NewAdapter(context.Background(), "p", adapterCfg(4)); err != nil {
				t.Fatal(err)
			}
			copy(e.adapters["p"].Data, randVec(len(e.adapters["p"].Data), 21, 0.3))
			e.noShare = c.noShare
			turns := shareTurns(t, e)
			opt := defaultTrainOptions()
			opt.LossAgg = agg
			opt.KLCoef = map[string]float64{"generator": 0.3}
			st, gg, err := e.grpoStep(context.Background(), "p", turns, opt, false)
			if err != nil {
				t.Fatal(err)
			}
			if !c.noShare {
				var kept []int
				for i := range turns {
					if turns[i].Advantage != 0 {
						kept = append(kept, i)
					}
				}
				// The generators share whole prompts, the aggregator the
				// text of each problem before the candidates.
				b := packGRPO(turns, kept, true)
				whole, part := 0, 0
				for _, g := range b.groups {
					p := len(b.turns[g.members[0]].t.PromptIDs)
					switch {
					case g.pre >= p:
						whole++
					case g.pre > 0:
						part++
					}
				}
				if len(b.groups) > 8 || whole < 4 || part < 2 {
					t.Fatalf("%d groups, %d sharing whole prompts, %d part of them", len(b.groups), whole, part)
				}
			}
			if ref == nil {
				ref, refSt = gg, st
				continue
			}
			shared = append(shared, gg)
			for r := range st.Roles {
				a, w := st.Roles[r], refSt.Roles[r]
				if a.Loss != w.Loss || a.Entropy != w.Entropy || a.Perplexity != w.Perplexity || a.RatioMean != w.RatioMean || a.KL != w.KL || a.Tokens != w.Tokens || a.ClipFrac != w.ClipFrac {
					t.Errorf("%s threads %d role %s: shared stats %+v, unshared %+v", agg, c.threads, a.Role, a, w)
				}
				if math.Abs(a.GradNorm-w.GradNorm) > 1e-5*w.GradNorm || math.Abs(a.AgentCosMean-w.AgentCosMean) > 1e-5 {
					t.Errorf("%s role %s: grad norm %v cos %v, unshared %v %v", agg, a.Role, a.GradNorm, a.AgentCosMean, w.GradNorm, w.AgentCosMean)
				}
			}
			if !slices.Equal(gg.agents, ref.agents) || !slices.Equal(gg.roles, ref.roles) {
				t.Fatalf("agents %v roles %v, unshared %v %v", gg.agents, gg.roles, ref.agents, ref.roles)
			}
			cmp := func(what string, got, want []float32) {
				var diff, norm float64
				for i := range want {
					diff = max(diff, math.Abs(float64(got[i]-want[i])))
					norm = max(norm, math.Abs(float64(want[i])))
				}
				if !(diff <= 2e-6*norm) || norm == 0 {
					t.Errorf("%s %s: max |shared - unshared| %g, max |unshared| %g", agg, what, diff, norm)
				}
			}
			for a := range ref.agent {
				cmp("agent "+ref.agents[a], gg.agent[a], ref.agent[a])
			}
			for r := range ref.roleGrad {
				cmp("role "+ref.roles[r], gg.roleGrad[r], ref.roleGrad[r])
			}
			cmp("total", gg.total, ref.total)
		}
		for a := range shared[0].agent {
			if !slices.Equal(shared[0].agent[a], shared[1].agent[a]) {
				t.Errorf("%s: shared gradient of agent %s differs between 1 and 3 threads", agg, shared[0].agents[a])
			}
		}
	}
}

// TestAgentCos: each same-role agent's cosine is the mean of its pairwise
// cosines with the others, their mean is the role's agent_cos_mean, and a
// role with one agent has none.
func TestAgentCos(t *testing.T) {
	e := testEngine(t, false, 1)
	if err := e.NewAdapter(context.Background(), "p", adapterCfg(4)); err != nil {
		t.Fatal(err)
	}
	copy(e.adapters["p"].Data, randVec(len(e.adapters["p"].Data), 21, 0.3))
	turns := shareTurns(t, e)
	// a third generator, so each agent's mean differs from its one cosine
	for _, tr := range slices.Clone(turns) {
		if tr.Agent == "generator1" {
			tr.Agent = "generator2"
			tr.Advantage = -tr.Advantage + 0.3
			turns = append(turns, tr)
		}
	}
	st, gg, err := e.grpoStep(context.Background(), "p", turns, defaultTrainOptions(), false)
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]int{}
	for a, name := range gg.agents {
		idx[name] = a
	}
	pair := func(a, b string) float64 { return cosine(gg.agent[idx[a]], gg.agent[idx[b]]) }
	for _, rs := range st.Roles {
		switch rs.Role {
		case "aggregator":
			if rs.AgentCos != nil {
				t.Errorf("aggregator (one agent) has agent cosines %v", rs.AgentCos)
			}
		case "generator":
			want := map[string]float64{
				"generator0": (pair("generator0", "generator1") + pair("generator0", "generator2")) / 2,
				"generator1": (pair("generator1", "generator0") + pair("generator1", "generator2")) / 2,
				"generator2": (pair("generator2", "generator0") + pair("generator2", "generator1")) / 2,
			}
			if len(rs.AgentCos) != 3 {
				t.Fatalf("generator agent cosines %v, want three", rs.AgentCos)
			}
			var mean float64
			for a, w := range want {
				if math.Abs(rs.AgentCos[a]-w) > 1e-12 {
					t.Errorf("%s: %v, want %v", a, rs.AgentCos[a], w)
				}
				mean += rs.AgentCos[a] / 3
			}
			if math.Abs(mean-rs.AgentCosMean) > 1e-12 {
				t.Errorf("mean of the agents' cosines %v, agent_cos_mean %v", mean, rs.AgentCosMean)
			}
			if w0, w1 := want["generator0"], want["generator1"]; w0 == w1 {
				t.Fatal("test shows nothing: two agents have the same mean")
			}
		}
	}
	if st.Total.AgentCos != nil {
		t.Errorf("the total row has agent cosines %v", st.Total.AgentCos)
	}
}
