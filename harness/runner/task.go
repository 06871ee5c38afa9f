package runner

import (
	"fmt"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/dapo"
	"github.com/marlowlab/marlow/datasets/deepcoder"
	"github.com/marlowlab/marlow/datasets/filetask"
	"github.com/marlowlab/marlow/datasets/synthcode"
	"github.com/marlowlab/marlow/datasets/synthmath"
	"github.com/marlowlab/marlow/harness/spec"
)

// TaskOptions are the settings of OpenTask that are not part of a run's
// config.
type TaskOptions struct {
	// UnsafeCodeExec lets DeepCoder programs run without network isolation
	// (the CLI's --unsafe-code-exec).
	UnsafeCodeExec bool
}

// ExecutesCode reports whether a task runs generated programs outside the
// harness (and so needs the sandbox): DeepCoder and a file source graded
// by its code tests run Python, while synth-code programs are interpreted
// by the harness itself.
func ExecutesCode(d spec.DataConfig) bool {
	return d.Source == datasets.SourceDeepCoder ||
		d.Source == datasets.SourceFile && d.File != nil && d.File.Verifier == filetask.VerifyCodeTests
}

// OpenTask builds the task source of a run's data config. Synthetic tasks
// take their knobs from the config, keyed by split_seed; file sources read
// path. A train_size above 0 restricts the train stream to a fixed pool of
// that many problems, visited in a fresh split_seed-keyed order each epoch.
func OpenTask(d spec.DataConfig, opt TaskOptions) (datasets.Task, error) {
	var (
		t   datasets.Task
		err error
	)
	switch d.Source {
	case synthmath.Name:
		if d.SynthMath == nil {
			return nil, fmt.Errorf("task %s: source synth-math has no synth_math settings", d.Task)
		}
		t, err = synthmath.New(d.SynthMath.Config(d.SplitSeed, d.ValSize))
	case synthcode.Name:
		if d.SynthCode == nil {
			return nil, fmt.Errorf("task %s: source synth-code has no synth_code settings", d.Task)
		}
		t, err = synthcode.New(d.SynthCode.Config(d.SplitSeed, d.ValSize))
	case datasets.SourceDAPOMath:
		t, err = dapo.Open(d.Path, dapo.Config{Seed: d.SplitSeed, ValSize: d.ValSize, ValFrac: d.ValFrac,
			AnswerMode: d.AnswerMode, Language: d.Language})
	case datasets.SourceDeepCoder:
		var train, test []string
		train, err = deepcoder.Shards(d.Path, d.Subsets, deepcoder.SplitTrain)
		if err == nil && d.TestPath != "" {
			test, err = deepcoder.Shards(d.TestPath, d.Subsets, deepcoder.SplitTest)
		}
		if err == nil {
			t, err = deepcoder.Open(train, deepcoder.Config{Seed: d.SplitSeed, ValSize: d.ValSize, ValFrac: d.ValFrac,
				TestPaths: test, Verifier: deepcoder.VerifierConfig{AllowUnsafe: opt.UnsafeCodeExec}})
		}
	case datasets.SourceFile:
		if d.File == nil {
			return nil, fmt.Errorf("task %s: source file has no file settings (the field mapping)", d.Task)
		}
		t, err = filetask.Open(d.Path, filetask.Config{Mapping: *d.File, Seed: d.SplitSeed, ValFrac: d.ValFrac, ValSize: d.ValSize,
			Verifier: deepcoder.VerifierConfig{AllowUnsafe: opt.UnsafeCodeExec}})
	default:
		return nil, fmt.Errorf("task %s: unknown source %q", d.Task, d.Source)
	}
	if err != nil {
		return nil, fmt.Errorf("task %s (source %s): %w", d.Task, d.Source, err)
	}
	if d.TrainSize > 0 {
		if sized, ok := t.(interface{ TrainSize() int }); ok && d.TrainSize > sized.TrainSize() {
			return nil, fmt.Errorf("task %s: train_size %d exceeds the %d train problems of %s", d.Task, d.TrainSize, sized.TrainSize(), d.Path)
		}
		t = &pool{Task: t, n: d.TrainSize, seed: d.SplitSeed}
	}
	return t, nil
}

// pool restricts a task's train stream to its first n problems.
type pool struct {
	datasets.Task
	n    int
	seed uint64
}

// Train returns problem i of the pooled stream: epoch i/n visits the pool's
// n problems in a seed-keyed permutation.
func (p *pool) Train(i int64) (datasets.Problem, error) {
	if i < 0 {
		return datasets.Problem{}, fmt.Errorf("task %s: negative train cursor %d", p.Name(), i)
	}
	return p.Task.Train(int64(datasets.EpochIndex(p.n, p.seed, i)))
}

// TrainSize is the pool's size.
func (p *pool) TrainSize() int { return p.n }
