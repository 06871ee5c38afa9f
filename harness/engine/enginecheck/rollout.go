package enginecheck

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/torch"
)

// The rollout agreement: the torch engine samples completions and then
// scores them again the way training does (the logprobs call runs the train
// step's forward: right-padded rows, no KV cache, the same float32 head),
// at step 0, fully on-policy. Each token's Δ = training log-prob − rollout
// log-prob is the log of the importance ratio the first GRPO step sees;
// with nothing learned yet any Δ is numerics, and a Δ outside the clip band
// (ln(1 − ClipLow), ln(1 + ClipHigh)) is a token clipped for no reason.
const (
	rolloutRequests = 16 // half on the base policy, half on the seeded adapter
	rolloutNew      = 48 // new tokens of each (sampled past the end of turn)
)

// Default rollout tolerances. In float32 every |Δ| must be within the
// log-prob tolerance (the share outside the band is then 0). In bfloat16 or
// float16 the rollout and the training forward round differently (one token
// at a time against a cache, against the whole sequence at once), so at
// most DefaultRolloutShare of the tokens (0.5%) may fall outside the clip
// band and the 99th percentile of |Δ| must be within DefaultRolloutP99,
// half the band's narrower edge |ln 0.8| = 0.223. Measured on the CPU with
// the float32 head: p99 0.07-0.094 nat and at most 1 token of 768 outside
// on the tiny models (trained, logits up to ~18), p99 0.017 on a 2-layer
// checkpoint of Qwen3-0.6B's widths (random weights, logits below ~3.2).
const (
	DefaultRolloutShare = 0.005
	DefaultRolloutP99   = 0.11
)

// Rollout is the measured rollout agreement.
type Rollout struct {
	Seqs, Tokens  int
	MeanDelta     float64 // mean Δ (signed)
	P50, P90, P99 float64 // quantiles of |Δ|
	Max           float64 // max |Δ|
	Outside       int     // tokens whose ratio exp(Δ) is outside the clip band
	Low, High     float64 // the clip band in log space
}

// Share is the share of tokens outside the clip band.
func (r Rollout) Share() float64 {
	if r.Tokens == 0 {
		return math.NaN()
	}
	return float64(r.Outside) / float64(r.Tokens)
}

// RolloutRequests are the sampling requests of the rollout agreement:
// short arithmetic chats, half on the base policy and half on adapter,
// each sampled to rolloutNew tokens at temperature temp.
func RolloutRequests(adapter string, temp float64) []engine.Request {
	reqs := make([]engine.Request, rolloutRequests)
	for i := range reqs {
		q := fmt.Sprintf("problem %d: what is %d + %d? answer with the number only.", i, 17*i+3, 29*i+11)
		reqs[i] = engine.Request{Adapter: []string{"", adapter}[i%2], Messages: []engine.Message{{Role: "user", Content: q}},
			MaxNewTokens: rolloutNew, Temperature: temp, Seed: uint64(1000 + i), IgnoreEndOfTurn: true}
	}
	return reqs
}

// measureRollout samples RolloutRequests with te and rescores each
// completion under the adapter that sampled it.
func measureRollout(ctx context.Context, te *torch.Engine, adapter string, opt engine.TrainOptions) (Rollout, error) {
	r := Rollout{Low: math.Log(1 - opt.ClipLow), High: math.Log(1 + opt.ClipHigh)}
	reqs := RolloutRequests(adapter, opt.Temperature)
	comps, err := te.Generate(ctx, reqs)
	if err != nil {
		return r, fmt.Errorf("rollout: generate: %w", err)
	}
	var deltas []float64
	for _, name := range []string{"", adapter} {
		var turns []engine.Turn
		var rollout [][]float32
		for i, c := range comps {
			if reqs[i].Adapter != name || len(c.IDs) == 0 {
				continue
			}
			turns = append(turns, engine.Turn{Adapter: name, PromptIDs: c.PromptIDs, CompletionIDs: c.IDs})
			rollout = append(rollout, c.LogProbs)
		}
		if len(turns) == 0 {
			continue
		}
		train, err := te.LogProbs(ctx, name, turns, opt.Temperature)
		if err != nil {
			return r, fmt.Errorf("rollout: rescore under adapter %q: %w", name, err)
		}
		for i := range turns {
			if len(train[i]) != len(rollout[i]) {
				return r, fmt.Errorf("rollout: turn %d under adapter %q: %d log-probs rescored for %d sampled", i, name, len(train[i]), len(rollout[i]))
			}
			for j := range rollout[i] {
				deltas = append(deltas, float64(train[i][j])-float64(rollout[i][j]))
			}
		}
		r.Seqs += len(turns)
	}
	if len(deltas) == 0 {
		return r, fmt.Errorf("rollout: the %d requests sampled no tokens", len(reqs))
	}
	return r, r.add(deltas)
}

// add sets r's token figures from the per-token Δ (r.Low and r.High set):
// quantiles are the nearest-rank ones of |Δ|.
func (r *Rollout) add(deltas []float64) error {
	r.Tokens = len(deltas)
	abs := make([]float64, len(deltas))
	sum := 0.0
	for i, d := range deltas {
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return fmt.Errorf("rollout: token %d has a non-finite Δ log-prob %v", i, d)
		}
		sum += d
		abs[i] = math.Abs(d)
		if d < r.Low || d > r.High {
			r.Outside++
		}
	}
	r.MeanDelta = sum / float64(len(deltas))
	slices.Sort(abs)
	q := func(p float64) float64 { return abs[max(0, int(math.Ceil(p*float64(len(abs))))-1)] }
	r.P50, r.P90, r.P99, r.Max = q(0.5), q(0.9), q(0.99), abs[len(abs)-1]
	return nil
}

// rolloutFailures judges the rollout agreement: in float32 max |Δ| within
// lpTol; otherwise the share outside the clip band within shareTol and the
// 99th percentile of |Δ| within p99Tol.
func rolloutFailures(r Rollout, fp32 bool, lpTol, shareTol, p99Tol float64) []string {
	if r.Tokens == 0 {
		return []string{"rollout agreement: no sampled tokens were compared"}
	}
	if fp32 {
		if !(r.Max <= lpTol) {
			return []string{fmt.Sprintf("rollout agreement: max |training − rollout log-prob| %.3g > %.3g", r.Max, lpTol)}
		}
		return nil
	}
	var out []string
	if !(r.Share() <= shareTol) {
		out = append(out, fmt.Sprintf("rollout agreement: %d of %d tokens (%.3g) have a step-0 ratio outside the clip band (%.3f, %.3f), more than %.3g",
			r.Outside, r.Tokens, r.Share(), math.Exp(r.Low), math.Exp(r.High), shareTol))
	}
	if !(r.P99 <= p99Tol) {
		out = append(out, fmt.Sprintf("rollout agreement: 99th percentile of |training − rollout log-prob| %.3g > %.3g", r.P99, p99Tol))
	}
	return out
}

// print writes the rollout agreement.
func (r Rollout) print(w io.Writer, fp32 bool, lpTol, shareTol, p99Tol float64) {
	fmt.Fprintf(w, "  rollout agreement, step 0 on-policy: %d sampled completions, %d tokens, Δ = training − rollout log-prob\n", r.Seqs, r.Tokens)
	fmt.Fprintf(w, "    |Δ| median %.3g, p90 %.3g, p99 %.3g, max %.3g; mean Δ %.3g\n", r.P50, r.P90, r.P99, r.Max, r.MeanDelta)
	tol := fmt.Sprintf("max |Δ| tolerance %.3g", lpTol)
	if !fp32 {
		tol = fmt.Sprintf("tolerance %.3g of the tokens, p99 |Δ| %.3g", shareTol, p99Tol)
	}
	fmt.Fprintf(w, "    ratio outside the clip band (%.3f, %.3f): %d tokens, %.3g (%s)\n", math.Exp(r.Low), math.Exp(r.High), r.Outside, r.Share(), tol)
}
