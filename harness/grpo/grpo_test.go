package grpo

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

func TestRoute(t *testing.T) {
	cases := []struct {
		cond, role, want string
		err              string
	}{
		{study.Base, study.Generator, "", ""},
		{study.Base, study.Aggregator, "", ""},
		{study.SARL, study.Generator, PolicyAdapter, ""},
		{study.SARL, study.Evaluator, PolicyAdapter, ""},
		{study.SP, study.Generator, SharedAdapter, ""},
		{study.SP, study.Synthesizer, SharedAdapter, ""},
		{study.IP, study.Generator, "generator", ""},
		{study.IP, study.Worker, "worker", ""},
		{study.IP, study.Orchestrator, "orchestrator", ""},
		{"marl", study.Generator, "", "unknown condition"},
		{study.SP, "critic", "", "unknown role"},
	}
	for _, c := range cases {
		got, err := Route(c.cond, nil, c.role)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Route(%q, %q) err = %v, want %q", c.cond, c.role, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Route(%q, %q) = %q, %v; want %q", c.cond, c.role, got, err, c.want)
		}
	}
	adapters := []struct {
		cond string
		wfs  []string
		want []string
	}{
		{study.Base, []string{study.Voting}, nil},
		{study.SARL, []string{study.Single, study.Voting, study.OrchWorkers}, []string{"policy"}},
		{study.SP, []string{study.OrchWorkers}, []string{"shared"}},
		{study.IP, []string{study.Voting}, []string{"aggregator", "generator"}},
		{study.IP, []string{study.OrchWorkers}, []string{"orchestrator", "synthesizer", "worker"}},
		{study.IP, []string{study.EvalOpt, study.Voting}, []string{"aggregator", "evaluator", "generator"}},
	}
	for _, c := range adapters {
		got, err := Adapters(c.cond, nil, c.wfs...)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Adapters(%s, %v) = %v, %v; want %v", c.cond, c.wfs, got, err, c.want)
		}
	}
	if _, err := Adapters(study.SP, nil, "debate"); err == nil {
		t.Error("Adapters accepted an unknown workflow")
	}
}

func f64(v float64) *float64 { return &v }

// TestRouteDeclared routes roles by declared routings: a frozen role has no
// adapter, grouped roles share one, unlisted roles go where From sends them.
func TestRouteDeclared(t *testing.T) {
	frozen := &study.Routing{Name: "ip_frozen_agg", From: study.IP, Roles: map[string]string{study.Aggregator: study.FrozenBase}}
	grouped := &study.Routing{Name: "supervisors", From: study.IP, Roles: map[string]string{study.Aggregator: "sup", study.Evaluator: "sup"}}
	spFrozen := &study.Routing{Name: "sp_frozen_eval", From: study.SP, Roles: map[string]string{study.Evaluator: study.FrozenBase}}
	cases := []struct {
		r    *study.Routing
		cond string
		wfs  []string
		want []string
		err  string
	}{
		{frozen, study.IP, []string{study.Voting}, []string{"generator"}, ""},
		{frozen, study.IP, []string{study.EvalOpt}, []string{"evaluator", "generator"}, ""},
		{grouped, study.IP, []string{study.EvalOpt, study.Voting}, []string{"generator", "sup"}, ""},
		{spFrozen, study.SP, []string{study.EvalOpt}, []string{"shared"}, ""},
		{frozen, study.SP, []string{study.Voting}, nil, "starts from"},
	}
	for _, c := range cases {
		got, err := Adapters(c.cond, c.r, c.wfs...)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Adapters(%s, %s, %v) err = %v, want %q", c.cond, c.r.Name, c.wfs, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Adapters(%s, %s, %v) = %v, %v; want %v", c.cond, c.r.Name, c.wfs, got, err, c.want)
		}
	}
	if a, _ := Route(study.IP, frozen, study.Aggregator); a != "" {
		t.Errorf("frozen aggregator routed to %q, want the base model", a)
	}
}

// TestTrainOptionsAdapterSettings: a routing's lr_mult scales the adapter's
// scheduled rate and its kl_coef becomes that of the adapter's roles only.
func TestTrainOptionsAdapterSettings(t *testing.T) {
	c := Config{LR: 1e-3, Steps: 10, Schedule: engine.Schedule{Kind: "constant"}, KLCoef: map[string]float64{study.Generator: 0.5}}
	c.Condition = study.IP
	c.Routing = &study.Routing{Name: "slow_agg", From: study.IP, Adapters: map[string]study.AdapterSettings{
		study.Aggregator: {LRMult: f64(0.25), KLCoef: f64(0.1)}}}
	agg := c.trainOptions(1, study.Aggregator, []string{study.Aggregator})
	gen := c.trainOptions(1, study.Generator, []string{study.Generator})
	if agg.LR != 0.25e-3 || gen.LR != 1e-3 {
		t.Errorf("lr: aggregator %v generator %v, want 2.5e-4 and 1e-3", agg.LR, gen.LR)
	}
	if agg.KLCoef[study.Aggregator] != 0.1 || gen.KLCoef[study.Aggregator] != 0 || gen.KLCoef[study.Generator] != 0.5 {
		t.Errorf("kl: aggregator adapter %v generator adapter %v", agg.KLCoef, gen.KLCoef)
	}
	if c.KLCoef[study.Aggregator] != 0 {
		t.Errorf("trainOptions wrote into the config's kl_coef: %v", c.KLCoef)
	}
}

// ep builds an episode of agents (all correct or all wrong as the reward).
func ep(problem int64, rollout int, reward float64, agents ...string) *workflow.Episode {
	e := &workflow.Episode{ProblemIndex: problem, Rollout: rollout, FinalVerdict: datasets.Verdict{Correct: reward == 1}}
	for _, a := range agents {
		role := strings.TrimRight(a, "0123456789")
		e.Turns = append(e.Turns, workflow.Turn{Agent: a, Role: role})
	}
	return e
}

func TestAdvantages(t *testing.T) {
	// Problem 0: rewards 1, 0, 0, 1 over four rollouts of a voting episode;
	// problem 1: all 0 (zero variance); problem 2: one rollout reaches a
	// second eval-opt round (a group of one).
	eps := []*workflow.Episode{
		ep(0, 0, 1, "generator0", "generator1", "aggregator"),
		ep(0, 1, 0, "generator0", "generator1", "aggregator"),
		ep(0, 2, 0, "generator0", "generator1", "aggregator"),
		ep(0, 3, 1, "generator0", "generator1", "aggregator"),
		ep(1, 0, 0, "generator0", "generator1", "aggregator"),
		ep(1, 1, 0, "generator0", "generator1", "aggregator"),
	}
	const e = 1e-6
	adv, stats := Advantages(eps, e)
	// mean 0.5, sample std sqrt(1/3).
	a := 0.5 / (math.Sqrt(1.0/3) + e)
	want := [][]float64{{a, a, a}, {-a, -a, -a}, {-a, -a, -a}, {a, a, a}, {0, 0, 0}, {0, 0, 0}}
	for i := range want {
		for k := range want[i] {
			if math.Abs(adv[i][k]-want[i][k]) > 1e-12 {
				t.Errorf("adv[%d][%d] = %v, want %v", i, k, adv[i][k], want[i][k])
			}
		}
	}
	wantStats := []GroupStats{{Role: "aggregator", Groups: 2, ZeroVar: 1}, {Role: "generator", Groups: 4, ZeroVar: 2}}
	if !reflect.DeepEqual(stats, wantStats) {
		t.Errorf("stats = %+v, want %+v", stats, wantStats)
	}
	if f := wantStats[1].ZeroVarFrac(); f != 0.5 {
		t.Errorf("ZeroVarFrac = %v", f)
	}

	// Groups are keyed by agent name: generator1 of rollout 1 only exists
	// once, so it is a zero-variance group of one.
	eps = []*workflow.Episode{
		ep(5, 0, 1, "generator0", "evaluator0"),
		ep(5, 1, 0, "generator0", "evaluator0", "generator1", "evaluator1"),
	}
	adv, stats = Advantages(eps, e)
	b := 0.5 / (math.Sqrt(0.5) + e)
	if math.Abs(adv[0][0]-b) > 1e-12 || math.Abs(adv[1][1]+b) > 1e-12 || adv[1][2] != 0 || adv[1][3] != 0 {
		t.Errorf("eval-opt advantages %v, want ±%v on round 0 and 0 on the lone round 1", adv, b)
	}
	wantStats = []GroupStats{{Role: "evaluator", Groups: 2, ZeroVar: 1}, {Role: "generator", Groups: 2, ZeroVar: 1}}
	if !reflect.DeepEqual(stats, wantStats) {
		t.Errorf("stats = %+v, want %+v", stats, wantStats)
	}
	if f := (GroupStats{}).ZeroVarFrac(); !math.IsNaN(f) {
		t.Errorf("ZeroVarFrac without groups = %v, want NaN", f)
	}
}

func TestEvalRows(t *testing.T) {
	turn := func(agent string, graded, correct, compliant bool, tokens int) workflow.Turn {
		return workflow.Turn{Agent: agent, Role: strings.TrimRight(agent, "0123456789"), Graded: graded,
			Verdict: datasets.Verdict{Correct: correct}, Compliant: compliant,
			Completion: engine.Completion{IDs: make([]int32, tokens)}}
	}
	eps := []*workflow.Episode{
		// one correct candidate, aggregator picked it
		{Turns: []workflow.Turn{turn("generator0", true, false, true, 4), turn("generator1", true, true, true, 6), turn("aggregator", true, true, true, 2)},
			FinalVerdict: datasets.Verdict{Correct: true}},
		// one correct candidate, aggregator missed it (and was not compliant)
		{Turns: []workflow.Turn{turn("generator0", true, true, true, 4), turn("generator1", true, false, false, 2), turn("aggregator", true, false, false, 2)}},
		// no correct candidate
		{Turns: []workflow.Turn{turn("generator0", true, false, true, 4), turn("generator1", true, false, true, 4), turn("aggregator", true, false, true, 2)}},
	}
	rows := EvalRows("r", 3, study.Voting, eps)
	if len(rows) != 3 || rows[0].Role != "aggregator" || rows[1].Role != "generator" || rows[2].Role != "*" {
		t.Fatalf("rows %+v", rows)
	}
	check := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-12 && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	agg, gen, all := rows[0], rows[1], rows[2]
	check("aggregator accuracy", agg.Accuracy, 1.0/3)
	check("aggregator selection", agg.SelectionAcc, 0.5)
	check("aggregator format", agg.FormatRate, 2.0/3)
	check("generator accuracy", gen.Accuracy, 2.0/6)
	check("generator any-correct", gen.AnyCorrect, 2.0/3)
	check("generator selection", gen.SelectionAcc, math.NaN())
	check("generator mean len", gen.MeanLen, 24.0/6)
	check("workflow accuracy", all.Accuracy, 1.0/3)
	check("workflow any-correct", all.AnyCorrect, 2.0/3)
	check("workflow format", all.FormatRate, 7.0/9)
	if all.Problems != 3 || all.Turns != 9 || gen.Turns != 6 || gen.Problems != 3 || all.Step != 3 || all.Workflow != study.Voting {
		t.Errorf("counts: %+v", all)
	}
	// An orchestrator gives no answer: its accuracy is undefined.
	orch := EvalRows("r", 0, study.OrchWorkers, []*workflow.Episode{{Turns: []workflow.Turn{turn("orchestrator", false, false, false, 3)}}})
	check("orchestrator accuracy", orch[0].Accuracy, math.NaN())
	check("orchestrator any-correct", orch[0].AnyCorrect, math.NaN())
	check("orchestrator format", orch[0].FormatRate, 0)
}

// TestEvalRowsStrict checks strict accuracy and fallback rates, read from
// the flows' Readings: a correct final answer that a fallback chose counts
// for the lenient accuracy only.
func TestEvalRowsStrict(t *testing.T) {
	turn := func(agent string, compliant bool) workflow.Turn {
		return workflow.Turn{Agent: agent, Role: strings.TrimRight(agent, "0123456789"), Compliant: compliant}
	}
	voting := func(correct bool, agg workflow.Reading) *workflow.Episode {
		return &workflow.Episode{Turns: []workflow.Turn{turn("generator0", true), turn("generator1", true), turn("aggregator", agg.Parsed)},
			FinalVerdict: datasets.Verdict{Correct: correct}, Flow: fixedReadings{agg}}
	}
	parsed := workflow.Reading{Turn: 2, Role: study.Aggregator, Parsed: true}
	digit := workflow.Reading{Turn: 2, Role: study.Aggregator, Fallback: workflow.FallbackFirstDigit}
	first := workflow.Reading{Turn: 2, Role: study.Aggregator, Fallback: workflow.FallbackFirstCandidate}
	cases := []struct {
		name           string
		eps            []*workflow.Episode
		lenient        float64
		strict         float64
		aggFallbacks   map[string]float64
		generatorsNull bool
	}{
		{"all parsed", []*workflow.Episode{voting(true, parsed), voting(false, parsed)}, 0.5, 0.5, map[string]float64{}, true},
		{"correct by fallback", []*workflow.Episode{voting(true, digit), voting(true, first), voting(true, parsed), voting(false, first)},
			0.75, 0.25, map[string]float64{"first-digit": 0.25, "candidate-1": 0.5}, true},
		{"wrong either way", []*workflow.Episode{voting(false, digit)}, 0, 0, map[string]float64{"first-digit": 1}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rows := EvalRows("r", 1, study.Voting, tc.eps)
			agg, gen, all := rows[0], rows[1], rows[2]
			if all.Accuracy != tc.lenient || all.StrictAccuracy != tc.strict {
				t.Errorf("accuracy lenient %v strict %v, want %v and %v", all.Accuracy, all.StrictAccuracy, tc.lenient, tc.strict)
			}
			if !reflect.DeepEqual(agg.FallbackRate, tc.aggFallbacks) {
				t.Errorf("aggregator fallback_rate %v, want %v", agg.FallbackRate, tc.aggFallbacks)
			}
			if gen.FallbackRate != nil || all.FallbackRate != nil || !math.IsNaN(agg.StrictAccuracy) {
				t.Errorf("generator %v / * %v fallback_rate, aggregator strict %v: want nil, nil, NaN", gen.FallbackRate, all.FallbackRate, agg.StrictAccuracy)
			}
			samples := ValSampleRows("r", 1, tc.eps)
			for i, ep := range tc.eps {
				row := samples[i*4+2] // generator0, generator1, aggregator, final
				if want := string(ep.Flow.Readings()[0].Fallback); row.Role != study.Aggregator || row.Fallback != want {
					t.Errorf("episode %d: sample %s fallback %q, want %q", i, row.Role, row.Fallback, want)
				}
				if samples[i*4].Fallback != "" {
					t.Errorf("episode %d: generator sample has fallback %q", i, samples[i*4].Fallback)
				}
			}
		})
	}
}

// A config without the coherence regularizer encodes, and so hashes, as
// before the option existed: the checkpoints of existing runs still resume.
func TestCoherenceOffKeepsTheHash(t *testing.T) {
	c := testConfig(study.SP, study.Voting)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "coherence") {
		t.Errorf("config without the regularizer encodes a coherence key: %s", b)
	}
	on := c
	on.Coherence = &engine.Coherence{Lambda: 0.5, EMADecay: 0.9}
	if err := on.Validate(); err != nil {
		t.Fatal(err)
	}
	if on.Hash() == c.Hash() {
		t.Error("turning the regularizer on does not change the config hash")
	}
	if o := on.trainOptions(1, "shared", nil); o.Coherence == nil || *o.Coherence != *on.Coherence {
		t.Errorf("train options carry coherence %v", o.Coherence)
	}
	// Off, the step still keeps the measuring-only gradient EMA.
	if o := c.trainOptions(1, "shared", nil); o.Coherence == nil || *o.Coherence != (engine.Coherence{Lambda: 0, EMADecay: engine.DefaultCoherenceEMADecay}) {
		t.Errorf("train options without the regularizer carry coherence %v, want the monitor (lambda 0, decay %v)", o.Coherence, engine.DefaultCoherenceEMADecay)
	}
}

func TestConfigValidate(t *testing.T) {
	good := testConfig(study.SP, study.Voting)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no run id", func(c *Config) { c.RunID = "" }, "run_id"},
		{"coherence lambda", func(c *Config) { c.Coherence = &engine.Coherence{Lambda: 0, EMADecay: 0.9} }, "coherence lambda 0 turns the regularizer off"},
		{"coherence lambda negative", func(c *Config) { c.Coherence = &engine.Coherence{Lambda: -0.5, EMADecay: 0.9} }, "coherence lambda -0.5 is out of range"},
		{"coherence decay", func(c *Config) { c.Coherence = &engine.Coherence{Lambda: 0.5, EMADecay: 1} }, "coherence ema_decay 1 is out of range"},
		{"condition", func(c *Config) { c.Condition = "marl" }, "unknown condition"},
		{"sa-rl on voting", func(c *Config) { c.Condition = study.SARL }, "single"},
		{"eval workflow", func(c *Config) { c.EvalWorkflows = []string{"debate"} }, "unknown workflow"},
		{"one rollout", func(c *Config) { c.Rollouts = 1 }, "rollouts"},
		{"loss agg", func(c *Config) { c.LossAgg = "sum" }, "loss_agg"},
		{"lr", func(c *Config) { c.LR = 0 }, "lr"},
		{"schedule", func(c *Config) { c.Schedule.Kind = "step" }, "schedule"},
		{"kl role", func(c *Config) { c.KLCoef = map[string]float64{"critic": 0.1} }, "kl_coef"},
		{"adapter", func(c *Config) { c.Adapter.Rank = 0 }, "adapter rank"},
		{"tokens", func(c *Config) { c.DefaultMaxNewTokens = 0 }, "max new tokens"},
	}
	for _, c := range cases {
		cfg := testConfig(study.SP, study.Voting)
		c.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	// base trains nothing, so training settings are not checked.
	b := testConfig(study.Base, study.Voting)
	b.Rollouts, b.LR = 0, 0
	if err := b.Validate(); err != nil {
		t.Errorf("base config: %v", err)
	}
	if good.Hash() == b.Hash() || good.Hash() != testConfig(study.SP, study.Voting).Hash() {
		t.Error("config hash is not a function of the config")
	}
}

func TestTrainOptionsSchedule(t *testing.T) {
	c := testConfig(study.SP, study.Single)
	c.LR, c.Steps = 1, 10
	c.Schedule = engine.Schedule{Kind: "cosine", Warmup: 2, MinRatio: 0}
	cases := []struct {
		step int
		want float64
	}{{1, 0.5}, {2, 1}, {3, 1}, {10, 0.5 * (1 + math.Cos(math.Pi*7/8))}}
	for _, cs := range cases {
		if got := c.trainOptions(cs.step, "shared", nil).LR; math.Abs(got-cs.want) > 1e-12 {
			t.Errorf("step %d lr %v, want %v (schedule spans Steps when Total is 0)", cs.step, got, cs.want)
		}
	}
	o := c.trainOptions(3, "shared", nil)
	if o.ClipLow != 0.2 || o.ClipHigh != 0.28 || o.LossAgg != engine.SeqMeanTokenMean || o.Temperature != 0.7 {
		t.Errorf("options %+v", o)
	}
}

// fixedReadings is a Flow that only reports its readings (an episode's
// state as EvalRows reads it).
type fixedReadings []workflow.Reading

func (fixedReadings) Next(*workflow.Env, *workflow.Episode) []workflow.Call { return nil }

func (fixedReadings) Absorb(context.Context, *workflow.Env, *workflow.Episode, int) {}

func (r fixedReadings) Readings() []workflow.Reading { return r }
