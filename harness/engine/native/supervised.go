package native

import (
	"context"
	"fmt"
	"math"

	"github.com/marlowlab/marlow/harness/engine"
)

// Example is one supervised sequence: LossMask[i] asks the model to predict
// IDs[i] from IDs[:i] (so LossMask[0] must be false).
type Example struct {
	IDs      []int32
	LossMask []bool
}

// SupervisedStats summarise one supervised step.
type SupervisedStats struct {
	Loss        float64 // mean next-token cross-entropy over the masked tokens
	Tokens      int     // masked tokens
	GradNormPre float64 // global gradient norm before clipping
}

// Supervised takes one full-parameter step of next-token cross-entropy
// (temperature 1) on the masked positions of batch: gradients into every
// base weight, global-norm clip to opt.GradClip, then AdamW with the base
// optimizer state (separate from every adapter's). opt.LossAgg,
// Temperature, ClipLow/High and KLCoef are ignored.
func (e *Engine) Supervised(ctx context.Context, batch []Example, opt engine.TrainOptions) (SupervisedStats, error) {
	var st SupervisedStats
	if err := e.check(); err != nil {
		return st, err
	}
	opt.Temperature, opt.LossAgg = 1, engine.TokenMean
	if err := checkTrainOptions(opt); err != nil {
		return st, err
	}
	seqs := make([]seqInput, 0, len(batch))
	for i, ex := range batch {
		if len(ex.IDs) != len(ex.LossMask) {
			return st, fmt.Errorf("native: example %d has %d ids but %d mask entries", i, len(ex.IDs), len(ex.LossMask))
		}
		if len(ex.IDs) > e.d.MaxPos+1 {
			return st, fmt.Errorf("native: example %d has %d tokens, more than max_position_embeddings+1 = %d", i, len(ex.IDs), e.d.MaxPos+1)
		}
		if err := e.checkIDs(fmt.Sprintf("native: example %d", i), ex.IDs); err != nil {
			return st, err
		}
		if len(ex.LossMask) > 0 && ex.LossMask[0] {
			return st, fmt.Errorf("native: example %d masks position 0, which has no context to predict from", i)
		}
		var s seqInput
		for p := 1; p < len(ex.IDs); p++ {
			if ex.LossMask[p] {
				s.rows = append(s.rows, int32(p-1))
				s.targets = append(s.targets, ex.IDs[p])
			}
		}
		if len(s.rows) == 0 {
			continue
		}
		s.ids = ex.IDs[:s.rows[len(s.rows)-1]+1]
		seqs = append(seqs, s)
		st.Tokens += len(s.rows)
	}
	if st.Tokens == 0 {
		return st, fmt.Errorf("native: supervised batch of %d examples has no masked tokens", len(batch))
	}
	if err := ctx.Err(); err != nil {
		return st, fmt.Errorf("native: supervised: %w", err)
	}
	loss, grad := e.supervisedGrad(seqs, st.Tokens)
	st.Loss = loss
	st.GradNormPre = math.Sqrt(dot64(grad.Data, grad.Data))
	if opt.GradClip > 0 && st.GradNormPre > opt.GradClip {
		s := float32(opt.GradClip / st.GradNormPre)
		for i := range grad.Data {
			grad.Data[i] *= s
		}
	}
	e.baseState().update(e.w.Data, grad.Data, opt.LR, opt.Beta1, opt.Beta2, opt.Eps, opt.WeightDecay)
	return st, nil
}

// supervisedGrad returns the mean cross-entropy over the scored rows of
// seqs (tokens of them in all) and its gradient for every base weight.
func (e *Engine) supervisedGrad(seqs []seqInput, tokens int) (float64, *Weights) {
	d := e.d
	var loss float64
	sel, tgt := e.buildTrainBatch(seqs, nil, nil)
	logits := e.trainForward(nil, sel, true)
	dlogits := make([]float32, len(sel)*d.V)
	w := 1 / float64(tokens)
	for k := range sel {
		row := logits[k*d.V : (k+1)*d.V]
		drow := dlogits[k*d.V : (k+1)*d.V]
		lp, _ := logSoftmaxRow(row, 1, tgt[k], drow)
		loss -= lp * w
		for v := range drow {
			drow[v] *= float32(w)
		}
		drow[tgt[k]] -= float32(w)
	}
	grad := NewWeights(e.cfg)
	e.trainBackward(nil, sel, dlogits, &gradSink{base: grad})
	return loss, grad
}
