package engine

import (
	"math"
	"strings"
	"testing"
)

func validTrainOptions() TrainOptions {
	return TrainOptions{ClipLow: 0.2, ClipHigh: 0.28, LossAgg: TokenMean, Temperature: 1, LR: 1e-3,
		Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
}

func validTurn() Turn {
	return Turn{Adapter: "a", Role: "generator", Agent: "generator1", PromptIDs: []int32{1, 2, 3},
		CompletionIDs: []int32{4, 5}, OldLogProbs: []float32{-1, -2}, Advantage: 0.5}
}

var testLimits = Limits{Adapters: []string{"a", "b"}, VocabSize: 10, MaxPositions: 8}

func wantErr(t *testing.T, name string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v", name, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: error %v, want one containing %q", name, err, want)
	}
}

func TestValidateRequests(t *testing.T) {
	ok := Request{Adapter: "a", MaxNewTokens: 4, Temperature: 0.7}
	for _, tc := range []struct {
		name string
		edit func(r *Request)
		want string
	}{
		{"valid", func(*Request) {}, ""},
		{"base policy", func(r *Request) { r.Adapter = "" }, ""},
		{"no new tokens", func(r *Request) { r.MaxNewTokens = 0 }, ""},
		{"unknown adapter", func(r *Request) { r.Adapter = "c" }, `request 1: unknown adapter "c" (have [a b])`},
		{"zero temperature", func(r *Request) { r.Temperature = 0 }, "request 1: temperature 0 must be positive and finite"},
		{"NaN temperature", func(r *Request) { r.Temperature = math.NaN() }, "request 1: temperature NaN"},
		{"infinite temperature", func(r *Request) { r.Temperature = math.Inf(1) }, "request 1: temperature +Inf"},
		{"negative max new tokens", func(r *Request) { r.MaxNewTokens = -1 }, "request 1: max new tokens -1 is negative"},
	} {
		bad := ok
		tc.edit(&bad)
		wantErr(t, tc.name, ValidateRequests([]Request{ok, bad}, testLimits), tc.want)
	}
	if err := ValidateRequests(nil, Limits{}); err != nil {
		t.Errorf("no requests: %v", err)
	}
}

func TestValidateTrainStep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		adapter string
		edit    func(t *Turn, o *TrainOptions)
		want    string
	}{
		{"valid", "a", func(*Turn, *TrainOptions) {}, ""},
		{"zero advantage", "a", func(t *Turn, _ *TrainOptions) { t.Advantage = 0 }, ""},
		{"base policy", "", func(*Turn, *TrainOptions) {}, "train step needs an adapter"},
		{"unknown adapter", "c", func(*Turn, *TrainOptions) {}, `unknown adapter "c" (have [a b])`},
		{"bad options", "a", func(_ *Turn, o *TrainOptions) { o.LossAgg = "mean" }, `unknown loss aggregation "mean"`},
		{"NaN KL coefficient", "a", func(_ *Turn, o *TrainOptions) { o.KLCoef = map[string]float64{"generator": math.NaN()} }, `KL coefficient of role "generator" is NaN`},
		{"other adapter", "a", func(t *Turn, _ *TrainOptions) { t.Adapter = "b" }, `turn 1 (agent "generator1") names adapter "b", not "a"`},
		{"empty completion", "a", func(t *Turn, _ *TrainOptions) { t.CompletionIDs, t.OldLogProbs = nil, nil }, `turn 1 (agent "generator1") has an empty completion`},
		{"empty prompt", "a", func(t *Turn, _ *TrainOptions) { t.PromptIDs = nil }, `turn 1 (agent "generator1") has an empty prompt`},
		{"too long", "a", func(t *Turn, _ *TrainOptions) { t.PromptIDs = make([]int32, 8) }, `turn 1 (agent "generator1") has 9 input tokens, more than max_position_embeddings 8`},
		{"prompt id", "a", func(t *Turn, _ *TrainOptions) { t.PromptIDs = []int32{1, 10} }, `turn 1 (agent "generator1") prompt: token 10 at index 1 is outside the vocabulary [0, 10)`},
		{"completion id", "a", func(t *Turn, _ *TrainOptions) { t.CompletionIDs = []int32{-1, 2} }, `turn 1 (agent "generator1") completion: token -1 at index 0 is outside`},
		{"old log-probs", "a", func(t *Turn, _ *TrainOptions) { t.OldLogProbs = t.OldLogProbs[:1] }, `turn 1 (agent "generator1") has 1 old log-probs for 2 completion tokens`},
		{"infinite old log-prob", "a", func(t *Turn, _ *TrainOptions) { t.OldLogProbs[1] = float32(math.Inf(-1)) }, `turn 1 (agent "generator1") has old log-prob -Inf at token 1`},
		{"NaN advantage", "a", func(t *Turn, _ *TrainOptions) { t.Advantage = math.NaN() }, `turn 1 (agent "generator1") has advantage NaN`},
	} {
		ok, bad, opt := validTurn(), validTurn(), validTrainOptions()
		tc.edit(&bad, &opt)
		wantErr(t, tc.name, ValidateTrainStep(tc.adapter, []Turn{ok, bad}, opt, testLimits), tc.want)
	}
	long := validTurn()
	long.PromptIDs = make([]int32, 100)
	long.PromptIDs[0] = 1 << 20
	if err := ValidateTrainStep("a", []Turn{long}, validTrainOptions(), Limits{Adapters: []string{"a"}}); err != nil {
		t.Errorf("zero limits check no bounds: %v", err)
	}
}

func TestValidateLogProbs(t *testing.T) {
	turn := validTurn()
	turn.OldLogProbs, turn.Advantage, turn.Adapter = nil, math.NaN(), "" // not used by scoring
	wantErr(t, "valid", ValidateLogProbs("", []Turn{turn}, 1, testLimits), "")
	wantErr(t, "adapter", ValidateLogProbs("b", []Turn{turn}, 1, testLimits), "")
	wantErr(t, "unknown adapter", ValidateLogProbs("z", []Turn{turn}, 1, testLimits), `unknown adapter "z"`)
	wantErr(t, "temperature", ValidateLogProbs("", []Turn{turn}, -1, testLimits), "temperature -1 must be positive")
	turn.CompletionIDs = []int32{3, 11}
	wantErr(t, "completion id", ValidateLogProbs("", []Turn{validTurn(), turn}, 1, testLimits), `turn 1 (agent "generator1") completion: token 11 at index 1`)
}

func TestValidateAdapterName(t *testing.T) {
	for name, want := range map[string]string{
		"a": "", "generator-1.x": "", "": "adapter name is empty", ".": "must be usable as a folder name",
		"..": "must be usable as a folder name", "a/b": `adapter name "a/b" must be usable`, `a\b`: "must be usable", "../x": "must be usable",
	} {
		wantErr(t, name, ValidateAdapterName(name), want)
	}
}

func TestValidateAdapter(t *testing.T) {
	ok := AdapterConfig{Rank: 4, Alpha: 8, Targets: []string{"q_proj", "down_proj"}}
	for _, tc := range []struct {
		name string
		edit func(c *AdapterConfig)
		want string
	}{
		{"valid", func(*AdapterConfig) {}, ""},
		{"all targets", func(c *AdapterConfig) { c.Targets = nil }, ""},
		{"rank", func(c *AdapterConfig) { c.Rank = 0 }, `adapter "a": rank 0 must be positive`},
		{"alpha", func(c *AdapterConfig) { c.Alpha = math.NaN() }, `adapter "a": alpha NaN must be positive and finite`},
		{"infinite alpha", func(c *AdapterConfig) { c.Alpha = math.Inf(1) }, `alpha +Inf`},
		{"target", func(c *AdapterConfig) { c.Targets = []string{"qproj"} }, `adapter "a": unknown LoRA target "qproj" (want one of [q_proj`},
	} {
		cfg := ok
		tc.edit(&cfg)
		wantErr(t, tc.name, ValidateAdapter("a", cfg), tc.want)
	}
	wantErr(t, "name", ValidateAdapter("a/b", ok), `adapter name "a/b" must be usable as a folder name`)
}

// TestCoherenceStepFactor: the step form's factor is the roles' factors
// weighted by their gradient shares; one role gives its own factor, and
// no defined share gives 1. Validate knows the step form and no other.
func TestCoherenceStepFactor(t *testing.T) {
	role := func(share, scale float64) RoleStats { return RoleStats{GradShare: share, CoherenceScale: scale} }
	nan := math.NaN()
	cases := []struct {
		name  string
		roles []RoleStats
		want  float64
	}{
		{"one role", []RoleStats{role(1, 0.6)}, 0.6},
		{"two roles", []RoleStats{role(0.25, 0.5), role(0.75, 1)}, 0.875},
		{"a zero gradient", []RoleStats{role(nan, 1), role(nan, 1)}, 1},
		{"no roles", nil, 1},
	}
	for _, c := range cases {
		if got := CoherenceStepFactor(c.roles); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("%s: step factor %v, want %v", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		form string
		ok   bool
	}{{"", true}, {CoherenceStep, true}, {"gradient", false}, {"update", false}} {
		err := Coherence{Lambda: 0.5, EMADecay: 0.9, Form: c.form}.Validate()
		if (err == nil) != c.ok {
			t.Errorf("form %q: error %v, want ok %v", c.form, err, c.ok)
		}
	}
}
