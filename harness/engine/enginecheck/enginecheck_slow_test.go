//go:build slow

package enginecheck

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/engine/torch"
	"github.com/marlowlab/marlow/harness/engine/torch/torchtest"
)

// TestEngineCheckTinyModels runs the cross-check on every committed tiny
// checkpoint in fp32 on the CPU: log-probs within 1e-4 with no adapter,
// with a seeded random adapter, after one optimizer step (torch's
// components below the gradient noise floor taken from native's) and
// across checkpoints saved by the other engine; loss, KL and every
// per-role gradient norm of one step within 1e-3 relative; the updates of
// the components above the floor within 1e-2 lr; with the coherence
// regularizer, each role's cosine to its gradient EMA and its scale within
// 1e-3, also across the other engine's checkpoint.
func TestEngineCheckTinyModels(t *testing.T) {
	py := torchtest.Python(t, "torch", "transformers", "peft", "safetensors", "tokenizers")
	dirs, err := filepath.Glob(filepath.Join("..", "..", "..", "seeds", "models", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no committed tiny models: %v", err)
	}
	// One checkpoint per size is enough: s, m and l.
	seen := map[string]bool{}
	for _, dir := range dirs {
		size := strings.SplitN(filepath.Base(dir), "-", 2)[0]
		if seen[size] {
			continue
		}
		seen[size] = true
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var stderr strings.Builder
			rep, err := Run(context.Background(), dir, Options{Torch: torch.Options{Python: py, Device: "cpu", Stderr: &stderr}})
			if err != nil {
				t.Fatalf("%v\nserver stderr:\n%s", err, stderr.String())
			}
			var b strings.Builder
			rep.Print(&b)
			t.Log("\n" + b.String())
			for _, f := range rep.Failures() {
				t.Error(f)
			}
			if rep.LogProbAdapter == 0 && rep.LogProbBase == 0 {
				t.Log("engines agree bit for bit")
			}
		})
	}
	_ = os.Stderr
	// The GPU path: gradient checkpointing of the layers and the head.
	t.Run("gradient-checkpointing", func(t *testing.T) {
		var stderr strings.Builder
		dir := dirs[len(dirs)-1]
		rep, err := Run(context.Background(), dir, Options{Torch: torch.Options{Python: py, Device: "cpu", Stderr: &stderr, GradientCheckpointing: true}})
		if err != nil {
			t.Fatalf("%v\nserver stderr:\n%s", err, stderr.String())
		}
		var b strings.Builder
		rep.Print(&b)
		t.Log("\n" + b.String())
		for _, f := range rep.Failures() {
			t.Error(f)
		}
	})
}
