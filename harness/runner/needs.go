package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/deepcoder"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/spec"
)

// ErrMissing is returned (wrapped) when a plan needs files or software this
// machine lacks.
var ErrMissing = errors.New("missing prerequisites")

// Needs lists the files the runs need that this machine lacks, one line
// each: base checkpoint folders (config.json, tokenizer.json and the
// weights) and data files. Tiny models are built by pretraining and need
// nothing. What an engine needs (for torch: the interpreter, its Python
// packages with the versions found, CUDA) is its driver's Check, which
// checkNeeds adds. It reads no run folder and writes nothing.
func Needs(ctx context.Context, runs []spec.Run) []string {
	var out []string
	seen := map[string]bool{}
	once := func(key string) bool {
		if seen[key] {
			return false
		}
		seen[key] = true
		return true
	}
	for _, r := range runs {
		m, d := r.Config.Model, r.Config.Data
		if m.Tiny == nil && once("ckpt\x00"+m.Checkpoint) {
			out = append(out, checkpointNeeds(m)...)
		}
		if d.Path != "" && once("data\x00"+d.Path) {
			if msg := dataNeeds(d); msg != "" {
				out = append(out, msg)
			}
		}
	}
	return out
}

func checkpointNeeds(m spec.ModelConfig) []string {
	dir := m.Checkpoint
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return []string{fmt.Sprintf("checkpoint folder %s (models.%s): not found%s", dir, m.Scale, downloadHint(dir))}
	}
	var missing []string
	for _, f := range []string{"config.json", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			missing = append(missing, f)
		}
	}
	_, e1 := os.Stat(filepath.Join(dir, "model.safetensors"))
	_, e2 := os.Stat(filepath.Join(dir, "model.safetensors.index.json"))
	if e1 != nil && e2 != nil {
		missing = append(missing, "model.safetensors (or model.safetensors.index.json and its shards)")
	}
	if len(missing) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("checkpoint folder %s (models.%s) lacks %s%s", dir, m.Scale, strings.Join(missing, ", "), downloadHint(dir))}
}

// downloadHint is the command that fetches a Qwen3 checkpoint folder named
// like its Hugging Face repository (Qwen3-0.6B -> Qwen/Qwen3-0.6B), or ""
// for another name.
func downloadHint(dir string) string {
	if base := filepath.Base(dir); strings.HasPrefix(base, "Qwen") {
		return fmt.Sprintf("; download it: huggingface-cli download Qwen/%s --local-dir %s", base, dir)
	}
	return ""
}

// dataHint is the command that fetches the paper's data into the layout a
// spec names (README, "Running the paper study on a GPU node"), or "".
func dataHint(d spec.DataConfig) string {
	switch d.Source {
	case "deepcoder":
		inc := "*"
		if len(d.Subsets) == 1 {
			inc = d.Subsets[0] + "/*"
		}
		return fmt.Sprintf("; download it: huggingface-cli download agentica-org/DeepCoder-Preview-Dataset --repo-type dataset --include '%s' --local-dir %s", inc, d.Path)
	case "dapo-math":
		const repo = "DAPO-Math-17k-Processed"
		if i := strings.Index(d.Path, string(filepath.Separator)+repo+string(filepath.Separator)); i >= 0 {
			root := d.Path[:i+1+len(repo)]
			rel := filepath.ToSlash(d.Path[len(root)+1:])
			return fmt.Sprintf("; download it: huggingface-cli download open-r1/%s --repo-type dataset --include '%s' --local-dir %s", repo, rel, root)
		}
	}
	return ""
}

func dataNeeds(d spec.DataConfig) string {
	if d.Source == "deepcoder" {
		if _, err := deepcoder.Shards(d.Path, d.Subsets, deepcoder.SplitTrain); err != nil {
			return fmt.Sprintf("data of task %s (source deepcoder, Parquet shards): %v%s", d.Task, err, dataHint(d))
		}
		if d.TestPath != "" {
			if _, err := deepcoder.Shards(d.TestPath, d.Subsets, deepcoder.SplitTest); err != nil {
				return fmt.Sprintf("test data of task %s (source deepcoder, Parquet shards): %v", d.Task, err)
			}
		}
		return ""
	}
	if _, err := os.Stat(d.Path); err != nil {
		return fmt.Sprintf("data file of task %s (source %s): %s not found%s", d.Task, d.Source, d.Path, dataHint(d))
	}
	return ""
}

// checkNeeds verifies, before anything is written, that every engine the
// runs name is registered in reg with its prerequisites met, that
// nothing Needs lists is missing and that every task's validation split
// holds the runs' validation problems (SplitProblems, with open). The error lists every problem at once
// and wraps ErrMissing, and engine.ErrUnavailable when an engine is the
// problem.
func checkNeeds(ctx context.Context, reg *engine.Registry, runs []spec.Run, open func(spec.DataConfig, TaskOptions) (datasets.Task, error)) error {
	var lines []string
	unavailable := false
	seen := map[string]bool{}
	for _, r := range runs {
		m := r.Config.Model
		opt := engineOptions(m, 1)
		key := strings.Join([]string{m.Engine, opt.Python, opt.Device, opt.DType}, "\x00")
		if seen[key] {
			continue
		}
		seen[key] = true
		d, err := reg.Driver(m.Engine)
		if err != nil {
			have := strings.Join(reg.Names(), ", ")
			if have == "" {
				have = "none"
			}
			lines = append(lines, fmt.Sprintf("engine %q is not registered in this program (have %s)", m.Engine, have))
			unavailable = true
			continue
		}
		if d.Check != nil {
			errs := d.Check(ctx, opt)
			for _, e := range errs {
				lines = append(lines, fmt.Sprintf("engine %s (models.%s): %v", m.Engine, m.Scale, e))
				unavailable = true
			}
			if len(errs) > 0 && m.Engine == "torch" {
				py := opt.Python
				if py == "" {
					py = "python3"
				}
				lines = append(lines, fmt.Sprintf("install the torch engine's packages (the versions CI tests): %s -m pip install -r harness/engine/torch/requirements.txt (a CUDA build of torch for --device cuda: see pytorch.org)", py))
			}
		}
	}
	lines = append(lines, Needs(ctx, runs)...)
	splits := SplitProblems(runs, open)
	if len(lines) == 0 && len(splits) == 0 {
		return nil
	}
	if len(lines) == 0 {
		return fmt.Errorf("nothing was run: a task's data cannot give the runs their problems:\n  - %s", strings.Join(splits, "\n  - "))
	}
	list := strings.Join(append(lines, splits...), "\n  - ")
	if unavailable {
		return fmt.Errorf("nothing was run: this plan needs what this machine lacks (%w, %w):\n  - %s", ErrMissing, engine.ErrUnavailable, list)
	}
	return fmt.Errorf("nothing was run: this plan needs what this machine lacks (%w):\n  - %s", ErrMissing, list)
}

// Preflight plans s, selects the runs matching only (all when empty) and
// checks their engines in reg and what they need (see Needs) without
// writing anything.
func Preflight(ctx context.Context, s *spec.Spec, only string, reg *engine.Registry) error {
	planned, err := spec.Plan(s)
	if err != nil {
		return err
	}
	runs, err := Select(planned, only)
	if err != nil {
		return err
	}
	return checkNeeds(ctx, reg, runs, nil)
}

// engineOptions are the options a run of model m opens its engine with.
func engineOptions(m spec.ModelConfig, threads int) engine.Options {
	return engine.Options{Threads: max(threads, 1), Python: m.Python, Device: m.Device, DType: m.DType,
		GenTokens: m.GenTokens, TrainTokens: m.TrainTokens, GenBackend: m.GenBackend, KVCacheFraction: m.KVCacheFraction}
}
