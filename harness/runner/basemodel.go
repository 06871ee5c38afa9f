package runner

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/marlowlab/marlow/harness/pretrain"
	"github.com/marlowlab/marlow/harness/spec"
)

// BaseModelFunc returns the folder of the base checkpoint (Hugging Face
// layout) of a run's model, building it when needed.
type BaseModelFunc func(ctx context.Context, m spec.ModelConfig) (string, error)

// baseModel resolves one scale's base checkpoint once.
type baseModel struct {
	once sync.Once
	dir  string
	err  error
}

func (x *executor) baseDir(ctx context.Context, m spec.ModelConfig) (string, error) {
	x.mu.Lock()
	b := x.bases[m.Scale]
	if b == nil {
		b = &baseModel{}
		x.bases[m.Scale] = b
	}
	x.mu.Unlock()
	b.once.Do(func() {
		switch {
		case x.opt.BaseModel != nil:
			b.dir, b.err = x.opt.BaseModel(ctx, m)
		case m.Checkpoint != "":
			b.dir = m.Checkpoint
		default:
			b.err = fmt.Errorf("scale %s is a tiny model without a checkpoint folder, and no pretraining is configured", m.Scale)
		}
		if b.err != nil {
			b.err = fmt.Errorf("base model of scale %s: %w", m.Scale, b.err)
		}
	})
	return b.dir, b.err
}

// PretrainedBase is the BaseModelFunc of the CLI: a model with a checkpoint
// folder uses it, and a tiny model uses the checkpoint pretrain.Ensure finds
// (committed under seeds/models, else in the cache) or builds into the
// cache, with threads goroutines and progress lines on progress (nil:
// silent).
func PretrainedBase(s *spec.Spec, threads int, progress io.Writer) BaseModelFunc {
	return func(ctx context.Context, m spec.ModelConfig) (string, error) {
		if m.Tiny == nil {
			if m.Checkpoint == "" {
				return "", fmt.Errorf("scale %s has neither a checkpoint folder nor a tiny shape", m.Scale)
			}
			return m.Checkpoint, nil
		}
		return pretrain.Ensure(ctx, s, m.Scale, pretrain.Options{Threads: max(threads, 1), Progress: progress})
	}
}
