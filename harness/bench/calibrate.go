package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/model"
)

// Speed is a quick measurement of an engine on one model shape, with one
// thread: sequence tokens per second of a LoRA GRPO train step, and
// generated tokens per second of batched sampling.
type Speed struct {
	TrainTokS float64
	GenTokS   float64
	Wall      time.Duration // how long the calibration took
}

// The shapes of a calibration: smaller than Engine's, so that `marlow
// plan` can afford one per model shape.
const (
	calTrainBatch, calGenRequests = 8, 16
)

// Calibrate measures engine name of reg on random weights of cfg's shape
// (vocabulary and positions adjusted to bench's character tokenizer), with
// one thread: LoRA GRPO train steps on 8 turns of 128 tokens and sampling
// batches of 16 requests of 96 new tokens, three calls of each; the first
// warms up, and the faster of the other two counts (a busy machine slows a
// call down, it never speeds one up). It takes about a second for the
// tiny models.
func Calibrate(ctx context.Context, reg *engine.Registry, name string, cfg model.Config) (Speed, error) {
	start := time.Now()
	cfg.VocabSize = len(alphabet) + 3
	cfg.MaxPositionEmbeddings = max(cfg.MaxPositionEmbeddings, trainPrompt+trainComp+genNew)
	cfg.EOSTokenID = nil
	if err := reg.Check(ctx, engine.Options{Threads: 1}, name); err != nil {
		return Speed{}, fmt.Errorf("bench: %w", err)
	}
	e, _, err := openRandom(ctx, reg, name, cfg, engine.Options{Threads: 1})
	if err != nil {
		return Speed{}, err
	}
	defer e.Close()
	turns, topt := trainBatchTurns()
	turns = turns[:calTrainBatch]
	reqs := genRequestsOf()[:calGenRequests]
	var sp Speed
	for i := range 3 {
		t0 := time.Now()
		if _, err := e.TrainStep(ctx, "bench", turns, topt); err != nil {
			return Speed{}, fmt.Errorf("bench: train: %w", err)
		}
		train := float64(calTrainBatch*(trainPrompt+trainComp-1)) / time.Since(t0).Seconds()
		t0 = time.Now()
		comps, err := e.Generate(ctx, reqs)
		if err != nil {
			return Speed{}, fmt.Errorf("bench: generate: %w", err)
		}
		n := 0
		for _, c := range comps {
			n += len(c.IDs)
		}
		gen := float64(n) / time.Since(t0).Seconds()
		if i > 0 {
			sp.TrainTokS, sp.GenTokS = max(sp.TrainTokS, train), max(sp.GenTokS, gen)
		}
	}
	sp.Wall = time.Since(start)
	return sp, nil
}
