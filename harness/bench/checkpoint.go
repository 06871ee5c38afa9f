package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/torch"
	"github.com/marlowlab/marlow/harness/model"
)

// Workload is the shape of a throughput measurement on a real checkpoint
// (MeasureGenerate, MeasureTrain): generation requests of Prompts prompts
// with Rollouts rollouts each, half the prompts on the adapter, new tokens
// spread from MaxNew/4 to MaxNew within each prompt's rollouts (run to
// length), and training batches of TrainTurns turns of TrainPrompt prompt
// and TrainCompletion completion tokens, on a LoRA adapter of Lora's rank,
// alpha and targets.
type Workload struct {
	Prompts, Rollouts int
	PromptWords       int // random words in a prompt (about 1.5 tokens each)
	MaxNew            int
	TrainTurns        int
	TrainPrompt       int
	TrainCompletion   int
	Rank              int
	Alpha             float64
	Targets           []string
	// TrainTime is the least time training is measured for, after one
	// untimed warm-up step.
	TrainTime time.Duration
}

// GenText describes the generation workload.
func (w Workload) GenText() string {
	return fmt.Sprintf("%d prompts x %d rollouts of ~%d words, half on a rank-%d adapter, %d-%d new tokens spread within each prompt's rollouts, run to length, after an untimed warm-up call",
		w.Prompts, w.Rollouts, w.PromptWords, w.Rank, max(1, w.MaxNew/4), w.MaxNew)
}

// TrainText describes the training workload.
func (w Workload) TrainText() string {
	return fmt.Sprintf("GRPO LoRA steps of %d turns x (%d prompt + %d completion tokens), rank %d, after an untimed warm-up step",
		w.TrainTurns, w.TrainPrompt, w.TrainCompletion, w.Rank)
}

// Measured is one throughput measurement with the engine server's peaks.
type Measured struct {
	TokS          float64
	Tokens        int64
	Seconds       float64
	Workload      string
	CUDAPeakBytes int64
	PeakRSSBytes  int64
}

// openCheckpoint opens engine name of reg on the checkpoint folder dir
// with an adapter "node" of the workload's LoRA shape.
func openCheckpoint(ctx context.Context, reg *engine.Registry, name, dir string, opt engine.Options, w Workload) (engine.Engine, error) {
	e, _, err := reg.Open(ctx, name, dir, opt)
	if err != nil {
		return nil, err
	}
	if err := e.NewAdapter(ctx, "node", engine.AdapterConfig{Rank: w.Rank, Alpha: w.Alpha, Targets: w.Targets, Seed: 1}); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// peaks fills m's server peaks from an engine that reports them (torch).
func peaks(ctx context.Context, e engine.Engine, m *Measured) {
	if u, ok := torchUsage(ctx, e); ok {
		m.CUDAPeakBytes, m.PeakRSSBytes = u.CUDAPeakBytes, u.PeakRSSBytes
	}
}

// torchUsage is what an engine with a torch server process reports of
// it; false for an engine without one, or when the server cannot say.
func torchUsage(ctx context.Context, e engine.Engine) (torch.Usage, bool) {
	tu, ok := e.(interface {
		Usage(context.Context) (torch.Usage, error)
	})
	if !ok {
		return torch.Usage{}, false
	}
	u, err := tu.Usage(ctx)
	return u, err == nil
}

// checkpointRequests are the generation requests of w, with new tokens
// capped at maxNew.
func checkpointRequests(w Workload, maxNew int) []engine.Request {
	rng := rand.New(rand.NewPCG(11, 12))
	var reqs []engine.Request
	for p := range w.Prompts {
		words := make([]string, w.PromptWords)
		for i := range words {
			b := make([]byte, 2+rng.IntN(6))
			for j := range b {
				b[j] = "abcdefghijklmnopqrstuvwxyz"[rng.IntN(26)]
			}
			words[i] = string(b)
		}
		content := fmt.Sprintf("Problem %d: %s?", p, strings.Join(words, " "))
		for r := range w.Rollouts {
			lo := max(1, w.MaxNew/4)
			n := lo
			if w.Rollouts > 1 {
				n = lo + r*(w.MaxNew-lo)/(w.Rollouts-1)
			}
			reqs = append(reqs, engine.Request{Adapter: []string{"", "node"}[p%2], Messages: []engine.Message{{Role: "user", Content: content}},
				MaxNewTokens: max(1, min(n, maxNew)), Temperature: 0.7, Seed: uint64(p*w.Rollouts + r), IgnoreEndOfTurn: true})
		}
	}
	return reqs
}

// MeasureGenerate opens engine name of reg on the checkpoint folder dir
// with opt (its GenBackend chooses the backend), makes one untimed
// warm-up call with the workload's requests cut to a few new tokens
// (compiling and capturing what the backend compiles), then times one
// call of the full workload.
func MeasureGenerate(ctx context.Context, reg *engine.Registry, name, dir string, opt engine.Options, w Workload) (Measured, error) {
	m := Measured{Workload: w.GenText()}
	e, err := openCheckpoint(ctx, reg, name, dir, opt, w)
	if err != nil {
		return m, fmt.Errorf("generate: %w", err)
	}
	defer e.Close()
	if _, err := e.Generate(ctx, checkpointRequests(w, 4)); err != nil {
		return m, fmt.Errorf("generate (warm-up): %w", err)
	}
	start := time.Now()
	comps, err := e.Generate(ctx, checkpointRequests(w, w.MaxNew))
	if err != nil {
		return m, fmt.Errorf("generate: %w", err)
	}
	m.Seconds = time.Since(start).Seconds()
	for _, c := range comps {
		m.Tokens += int64(len(c.IDs))
	}
	m.TokS = float64(m.Tokens) / m.Seconds
	peaks(ctx, e, &m)
	return m, nil
}

// MeasureTrain opens engine name of reg on the checkpoint folder dir with
// opt, takes one untimed warm-up step on a batch of the workload's turns
// (random token ids below the vocabulary size), then times steps until
// w.TrainTime has passed (at least one).
func MeasureTrain(ctx context.Context, reg *engine.Registry, name, dir string, opt engine.Options, w Workload) (Measured, error) {
	m := Measured{Workload: w.TrainText()}
	cfg, err := model.LoadConfig(filepath.Join(dir, model.ConfigFile))
	if err != nil {
		return m, fmt.Errorf("train: %w", err)
	}
	e, err := openCheckpoint(ctx, reg, name, dir, opt, w)
	if err != nil {
		return m, fmt.Errorf("train: %w", err)
	}
	defer e.Close()
	rng := rand.New(rand.NewPCG(13, 14))
	vocab := min(cfg.VocabSize, 150000)
	ids := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(rng.IntN(vocab))
		}
		return out
	}
	turns := make([]engine.Turn, w.TrainTurns)
	for i := range turns {
		old := make([]float32, w.TrainCompletion)
		for j := range old {
			old[j] = -4
		}
		role := []string{"generator", "aggregator"}[i%2]
		turns[i] = engine.Turn{Adapter: "node", Role: role, Agent: role + "1", PromptIDs: ids(w.TrainPrompt), CompletionIDs: ids(w.TrainCompletion),
			OldLogProbs: old, Advantage: float64(i%3) - 1}
	}
	_, topt := trainBatchTurns()
	if _, err := e.TrainStep(ctx, "node", turns, topt); err != nil {
		return m, fmt.Errorf("train (warm-up): %w", err)
	}
	steps := 0
	start := time.Now()
	for steps == 0 || time.Since(start) < w.TrainTime {
		if _, err := e.TrainStep(ctx, "node", turns, topt); err != nil {
			return m, fmt.Errorf("train: %w", err)
		}
		steps++
	}
	m.Seconds = time.Since(start).Seconds()
	m.Tokens = int64(steps * w.TrainTurns * (w.TrainPrompt + w.TrainCompletion))
	m.TokS = float64(m.Tokens) / m.Seconds
	m.Workload = fmt.Sprintf("%s, %d timed steps", m.Workload, steps)
	peaks(ctx, e, &m)
	return m, nil
}
