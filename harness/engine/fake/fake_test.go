package fake

import (
	"context"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
)

func echo(r engine.Request, skill float64) string {
	if skill > 0 {
		return "trained"
	}
	return r.Messages[0].Content
}

func TestGenerate(t *testing.T) {
	e := New(echo)
	ctx := context.Background()
	msgs := []engine.Message{{Role: "user", Content: "hello world"}}
	cases := []struct {
		name   string
		req    engine.Request
		text   string
		finish string
		ids    int
		err    string
	}{
		{"stops", engine.Request{Messages: msgs, MaxNewTokens: 20, Temperature: 1, Seed: 1}, "hello world", engine.FinishStop, 12, ""},
		{"truncated", engine.Request{Messages: msgs, MaxNewTokens: 5, Temperature: 1, Seed: 1}, "hello", engine.FinishLength, 5, ""},
		{"unknown adapter", engine.Request{Adapter: "x", Messages: msgs, MaxNewTokens: 5, Temperature: 1}, "", "", 0, "unknown adapter"},
		{"zero temperature", engine.Request{Messages: msgs, MaxNewTokens: 5}, "", "", 0, "temperature"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := e.Generate(ctx, []engine.Request{c.req})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := out[0]
			if got.Text != c.text || got.Finish != c.finish || len(got.IDs) != c.ids || len(got.LogProbs) != c.ids {
				t.Errorf("got %q %s ids=%d lps=%d", got.Text, got.Finish, len(got.IDs), len(got.LogProbs))
			}
			for _, lp := range got.LogProbs {
				if !(lp < 0) {
					t.Errorf("log-prob %v not negative", lp)
				}
			}
		})
	}
}

func TestTrainSaveLoad(t *testing.T) {
	ctx := context.Background()
	e := New(echo)
	if err := e.NewAdapter(ctx, "a", engine.AdapterConfig{Rank: 1, Alpha: 1}); err != nil {
		t.Fatal(err)
	}
	if err := e.NewAdapter(ctx, "a", engine.AdapterConfig{Rank: 1, Alpha: 1}); err == nil {
		t.Error("duplicate adapter accepted")
	}
	turn := func(agent string, adv float64) engine.Turn {
		return engine.Turn{Adapter: "a", Role: "generator", Agent: agent, PromptIDs: []int32{1, 2},
			CompletionIDs: []int32{3, 4, 5}, OldLogProbs: []float32{-1, -1, -1}, Advantage: adv}
	}
	opt := engine.TrainOptions{LossAgg: engine.TokenMean, Temperature: 1, LR: 0.5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	st, err := e.TrainStep(ctx, "a", []engine.Turn{turn("generator0", 1), turn("generator1", -1), turn("generator2", 0)}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if st.SkippedTurns != 1 || st.Total.Seqs != 2 || len(st.Roles) != 1 || st.Roles[0].Tokens != 6 || st.Roles[0].Entropy != 1 {
		t.Errorf("stats %+v", st)
	}
	if got := e.Skill("a"); got != 0.25 {
		t.Errorf("skill %v, want 0.5 x mean(max(adv,0)) = 0.25", got)
	}
	other := turn("generator0", 1)
	other.Adapter = "b"
	if _, err := e.TrainStep(ctx, "a", []engine.Turn{other}, opt); err == nil || !strings.Contains(err.Error(), `turn 0 (agent "generator0") names adapter "b", not "a"`) {
		t.Errorf("turn of another adapter: %v", err)
	}
	if _, err := e.TrainStep(ctx, "a", []engine.Turn{turn("generator0", 1)}, engine.TrainOptions{LR: 0.5}); err == nil || !strings.Contains(err.Error(), "loss aggregation") {
		t.Errorf("invalid options: %v", err)
	}
	lps, err := e.LogProbs(ctx, "a", []engine.Turn{turn("generator0", 1), turn("generator1", 1)}, 1)
	if err != nil || len(lps) != 2 || len(lps[0]) != 3 || lps[0][0] != lps[1][0] || !(lps[0][0] < 0) {
		t.Errorf("log-probs of two turns with the same tokens: %v %v", lps, err)
	}
	if _, err := e.LogProbs(ctx, "b", nil, 1); err == nil || !strings.Contains(err.Error(), `unknown adapter "b"`) {
		t.Errorf("log-probs under an unknown adapter: %v", err)
	}
	dir := t.TempDir()
	if err := e.Save(ctx, dir); err != nil {
		t.Fatal(err)
	}
	f := New(echo)
	if err := f.NewAdapter(ctx, "a", engine.AdapterConfig{Rank: 1, Alpha: 1}); err != nil {
		t.Fatal(err)
	}
	if err := f.Load(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if f.Skill("a") != 0.25 {
		t.Errorf("loaded skill %v", f.Skill("a"))
	}
	out, err := f.Generate(ctx, []engine.Request{{Adapter: "a", Messages: []engine.Message{{Content: "x"}}, MaxNewTokens: 50, Temperature: 1}})
	if err != nil || out[0].Text != "trained" {
		t.Errorf("responder did not see the loaded skill: %v %v", out, err)
	}
	if err := f.Load(ctx, t.TempDir()); err == nil {
		t.Error("load of an empty folder succeeded")
	}
}
