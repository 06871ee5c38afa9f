//go:build slow

package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/torch"
	"github.com/marlowlab/marlow/harness/engine/torch/torchtest"
)

// TestEngineTorch: `marlow bench engine --engine torch` measures the same
// figures as for native, with the server process's CPU time and peak RSS.
func TestEngineTorch(t *testing.T) {
	t.Setenv("MARLOW_PYTHON", torchtest.Python(t, "torch", "transformers", "peft", "safetensors", "tokenizers", "numpy", "jinja2"))
	reg := &engine.Registry{}
	if err := reg.Register(torch.Driver()); err != nil {
		t.Fatal(err)
	}
	r, err := Engine(context.Background(), reg, "d64l2", Options{Engine: torch.Name, Threads: 1, MinTime: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.TrainSteps < 1 || r.GenRuns < 1 || r.TrainTokS <= 0 || r.GenTokS <= 0 || r.ServerPeakRSSBytes <= 0 || r.TrainCores <= 0 {
		t.Fatalf("%+v", r)
	}
	if !strings.Contains(r.String(), "engine torch, size d64l2") || !strings.Contains(r.String(), "server process") {
		t.Fatalf("report:\n%s", r)
	}
	t.Log("\n" + r.String())
}
