// Package fake is a deterministic, scripted engine.Engine for tests of the
// workflows and the training loop. It has no model: a Responder decides each
// completion's text from the request and the adapter's current "skill", a
// single number that every TrainStep raises by the learning rate times the
// mean positive part of the advantages of the turns it trains on (group
// advantages sum to zero, so their plain mean would never move it). Tokens are the bytes of the
// text; log-probs and statistics are fixed functions of the inputs, so the
// same calls give the same results on every machine.
package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/keyed"
)

// EOT is the token id the fake appends when a completion stops.
const EOT = 256

// StateFile is the file Save writes under its directory.
const StateFile = "fake-engine.json"

// Responder returns the completion text of a request; skill is the
// adapter's current skill (0 for the base policy).
type Responder func(req engine.Request, skill float64) string

// Adapter is the fake's state of one adapter.
type Adapter struct {
	Skill float64 `json:"skill"`
	Steps int     `json:"steps"` // optimizer steps taken
}

// Engine is the fake engine. It is not safe for concurrent use.
type Engine struct {
	respond  Responder
	adapters map[string]*Adapter
	// Batches records the number of requests of every Generate call, in
	// order, so tests can check stage batching.
	Batches []int
	// Trained records the adapter and turn count of every TrainStep.
	Trained []TrainRecord
	closed  bool
}

// TrainRecord is one TrainStep call.
type TrainRecord struct {
	Adapter string
	Turns   int
	LR      float64
}

// New returns a fake engine answering with r.
func New(r Responder) *Engine {
	return &Engine{respond: r, adapters: map[string]*Adapter{}}
}

// Skill returns an adapter's skill ("" = base = 0).
func (e *Engine) Skill(name string) float64 {
	if a := e.adapters[name]; a != nil {
		return a.Skill
	}
	return 0
}

// NewAdapter implements engine.Engine.
func (e *Engine) NewAdapter(ctx context.Context, name string, cfg engine.AdapterConfig) error {
	if err := e.check(ctx, "new adapter"); err != nil {
		return err
	}
	if err := engine.ValidateAdapter(name, cfg); err != nil {
		return fmt.Errorf("fake: %w", err)
	}
	if _, ok := e.adapters[name]; ok {
		return fmt.Errorf("fake: adapter %q already exists", name)
	}
	e.adapters[name] = &Adapter{}
	return nil
}

// Generate implements engine.Engine.
func (e *Engine) Generate(ctx context.Context, reqs []engine.Request) ([]engine.Completion, error) {
	if err := e.check(ctx, "generate"); err != nil {
		return nil, err
	}
	if err := engine.ValidateRequests(reqs, e.limits()); err != nil {
		return nil, fmt.Errorf("fake: %w", err)
	}
	e.Batches = append(e.Batches, len(reqs))
	out := make([]engine.Completion, len(reqs))
	for i, r := range reqs {
		skill := e.Skill(r.Adapter)
		text := e.respond(r, skill)
		c := engine.Completion{Finish: engine.FinishStop}
		for _, m := range r.Messages {
			c.PromptIDs = append(c.PromptIDs, bytesToIDs(m.Role+"\n"+m.Content+"\n")...)
		}
		ids := bytesToIDs(text)
		if len(ids) >= r.MaxNewTokens {
			ids = ids[:r.MaxNewTokens]
			text = text[:r.MaxNewTokens]
			c.Finish = engine.FinishLength
		} else {
			ids = append(ids, EOT)
		}
		c.IDs, c.Text = ids, text
		c.LogProbs = make([]float32, len(ids))
		for j := range ids {
			c.LogProbs[j] = logProb(r.Seed, j)
		}
		out[i] = c
	}
	return out, nil
}

func bytesToIDs(s string) []int32 {
	ids := make([]int32, len(s))
	for i := 0; i < len(s); i++ {
		ids[i] = int32(s[i])
	}
	return ids
}

// logProb is a fixed pseudo log-prob in (-2, -0.01]: element j of the
// request's counter stream.
func logProb(seed uint64, j int) float32 {
	return -float32(0.01 + 1.99*keyed.Uniform01At(seed, uint64(j)))
}

// TrainStep implements engine.Engine: turns with zero advantage are skipped
// and counted; the adapter's skill rises by LR x the mean of max(advantage,
// 0) over the rest.
func (e *Engine) TrainStep(ctx context.Context, adapter string, turns []engine.Turn, opt engine.TrainOptions) (engine.StepStats, error) {
	if err := e.check(ctx, "train step"); err != nil {
		return engine.StepStats{}, err
	}
	if err := engine.ValidateTrainStep(adapter, turns, opt, e.limits()); err != nil {
		return engine.StepStats{}, fmt.Errorf("fake: %w", err)
	}
	a := e.adapters[adapter]
	e.Trained = append(e.Trained, TrainRecord{Adapter: adapter, Turns: len(turns), LR: opt.LR})
	st := engine.StepStats{Adapter: adapter}
	byRole := map[string][]engine.Turn{}
	var all []engine.Turn
	for _, t := range turns {
		if t.Advantage == 0 {
			st.SkippedTurns++
			continue
		}
		byRole[t.Role] = append(byRole[t.Role], t)
		all = append(all, t)
	}
	roles := slices.Sorted(maps.Keys(byRole))
	grads := map[string][]float64{}
	var sq float64
	for _, r := range roles {
		grads[r] = grad(byRole[r])
		sq += dot(grads[r], grads[r])
	}
	for _, r := range roles {
		rs := stats(r, byRole[r], a.Skill)
		g := grads[r]
		rs.GradNorm = math.Sqrt(dot(g, g))
		rs.GradShare = math.NaN()
		if sq > 0 {
			rs.GradShare = dot(g, g) / sq
		}
		rs.AgentCosMean, rs.AgentCosMin, rs.AgentCos = agentCos(byRole[r])
		rs.RoleCos = map[string]float64{}
		for _, o := range roles {
			if o != r {
				rs.RoleCos[o] = cosine(g, grads[o])
			}
		}
		st.Roles = append(st.Roles, rs)
	}
	st.Total = stats("*", all, a.Skill)
	total := grad(all)
	st.Total.GradNorm = math.Sqrt(dot(total, total))
	st.Total.GradShare = 1
	st.Total.AgentCosMean, st.Total.AgentCosMin = math.NaN(), math.NaN()
	st.GradNormPre = st.Total.GradNorm
	if len(all) > 0 {
		var s float64
		for _, t := range all {
			s += math.Max(t.Advantage, 0)
		}
		a.Skill += opt.LR * s / float64(len(all))
	}
	a.Steps++
	return st, nil
}

// stats fills the statistics that do not need gradients.
func stats(role string, turns []engine.Turn, skill float64) engine.RoleStats {
	rs := engine.UndefinedStats(role)
	rs.Seqs = len(turns)
	var nll, adv float64
	for _, t := range turns {
		rs.Tokens += len(t.CompletionIDs)
		for _, lp := range t.OldLogProbs {
			nll -= float64(lp)
		}
		adv += t.Advantage
	}
	rs.KL = skill * skill
	if len(turns) > 0 {
		rs.Loss = -adv / float64(len(turns))
		rs.MeanLen = float64(rs.Tokens) / float64(len(turns))
		rs.RatioMean, rs.RatioMax, rs.ClipFrac = 1, 1, 0
	}
	if rs.Tokens > 0 {
		rs.Entropy = nll / float64(rs.Tokens)
		rs.Perplexity = math.Exp(rs.Entropy)
	}
	return rs
}

// grad is a stand-in gradient: a small vector of advantage-weighted
// features of the turns.
func grad(turns []engine.Turn) []float64 {
	g := make([]float64, 4)
	for _, t := range turns {
		var sum float64
		for _, id := range t.CompletionIDs {
			sum += float64(id)
		}
		n := float64(len(t.CompletionIDs))
		g[0] += t.Advantage * n
		g[1] += t.Advantage * sum / math.Max(n, 1)
		g[2] += t.Advantage
		g[3] += t.Advantage * float64(len(t.PromptIDs)%17)
	}
	return g
}

func agentCos(turns []engine.Turn) (mean, min float64, per map[string]float64) {
	by := map[string][]engine.Turn{}
	for _, t := range turns {
		by[t.Agent] = append(by[t.Agent], t)
	}
	agents := slices.Sorted(maps.Keys(by))
	if len(agents) < 2 {
		return math.NaN(), math.NaN(), nil
	}
	min = math.Inf(1)
	var sum float64
	n := 0
	per = make(map[string]float64, len(agents))
	for i := range agents {
		for j := range agents {
			if j == i {
				continue
			}
			c := cosine(grad(by[agents[i]]), grad(by[agents[j]]))
			per[agents[i]] += c / float64(len(agents)-1)
			if j > i {
				sum += c
				n++
				min = math.Min(min, c)
			}
		}
	}
	return sum / float64(n), min, per
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func cosine(a, b []float64) float64 {
	na, nb := math.Sqrt(dot(a, a)), math.Sqrt(dot(b, b))
	if na == 0 || nb == 0 {
		return math.NaN()
	}
	return dot(a, b) / (na * nb)
}

// LogProbs implements engine.Engine: token j of turn i scores the fixed
// pseudo log-prob of element j of the stream keyed by the turn's token ids
// (the fake has no model, so it does not reproduce Generate's log-probs).
func (e *Engine) LogProbs(ctx context.Context, adapter string, turns []engine.Turn, temperature float64) ([][]float32, error) {
	if err := e.check(ctx, "logprobs"); err != nil {
		return nil, err
	}
	if err := engine.ValidateLogProbs(adapter, turns, temperature, e.limits()); err != nil {
		return nil, fmt.Errorf("fake: logprobs: %w", err)
	}
	out := make([][]float32, len(turns))
	for i, t := range turns {
		words := make([]uint64, 0, len(t.PromptIDs)+len(t.CompletionIDs)+1)
		for _, id := range t.PromptIDs {
			words = append(words, uint64(id))
		}
		words = append(words, uint64(len(t.PromptIDs)))
		for _, id := range t.CompletionIDs {
			words = append(words, uint64(id))
		}
		key := keyed.HashKey(words...)
		out[i] = make([]float32, len(t.CompletionIDs))
		for j := range out[i] {
			out[i][j] = logProb(key, j)
		}
	}
	return out, nil
}

// Save implements engine.Engine: every adapter's state as JSON.
func (e *Engine) Save(ctx context.Context, dir string) error {
	if err := e.check(ctx, "save"); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fake: save: %w", err)
	}
	b, err := json.MarshalIndent(e.adapters, "", " ")
	if err != nil {
		return fmt.Errorf("fake: save: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, StateFile), b, 0o644); err != nil {
		return fmt.Errorf("fake: save: %w", err)
	}
	return nil
}

// Load implements engine.Engine.
func (e *Engine) Load(ctx context.Context, dir string) error {
	if err := e.check(ctx, "load"); err != nil {
		return err
	}
	path := filepath.Join(dir, StateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("fake: load: %w", err)
	}
	var m map[string]*Adapter
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("fake: load %s: %w", path, err)
	}
	for name, a := range m {
		if err := engine.ValidateAdapterName(name); err != nil {
			return fmt.Errorf("fake: load %s: %w", path, err)
		}
		if a == nil {
			return fmt.Errorf("fake: load %s: adapter %q has no state", path, name)
		}
		e.adapters[name] = a
	}
	return nil
}

// limits are what engine's checks know of the fake: its adapters (it has
// no vocabulary or context bound).
func (e *Engine) limits() engine.Limits {
	return engine.Limits{Adapters: slices.Sorted(maps.Keys(e.adapters))}
}

// check refuses calls after Close or with a cancelled context.
func (e *Engine) check(ctx context.Context, call string) error {
	if e.closed {
		return errors.New("fake: engine is closed")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fake: %s: %w", call, err)
	}
	return nil
}

// Close implements engine.Engine.
func (e *Engine) Close() error {
	e.closed = true
	return nil
}

var _ engine.Engine = (*Engine)(nil)
