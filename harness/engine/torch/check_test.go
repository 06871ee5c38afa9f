package torch

import (
	"context"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/engine/torch/torchtest"
)

func TestCheckFindsServerPackages(t *testing.T) {
	py := torchtest.Python(t, "torch", "transformers", "peft", "safetensors", "tokenizers", "numpy", "jinja2")
	env, missing := Check(context.Background(), py, "cpu")
	if len(missing) != 0 {
		t.Fatalf("%s lacks %v", py, missing)
	}
	if env.Versions["torch"] == "" || env.Python == "" {
		t.Fatalf("environment %+v", env)
	}
	// Without a GPU, asking for cuda names CUDA as missing.
	if _, missing := Check(context.Background(), py, "cuda"); len(missing) > 0 && !strings.Contains(missing[0], "CUDA") {
		t.Fatalf("cuda check: %v", missing)
	}
}
