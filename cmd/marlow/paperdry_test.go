package main

import (
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"testing"

	"gopkg.in/yaml.v3"
)

// paperDrySizes are the keys in which seeds/paper-dry.yaml may differ from
// seeds/paper.yaml: sizes, the scales kept, and the device of the one
// model (path.Match patterns over dotted key paths).
var paperDrySizes = []string{
	"experiment", "seeds", "matrix.scales",
	"models.s.device", "models.s.dtype", "models.m", "models.l",
	"tasks.*.val_size", "tasks.*.grpo.max_new_tokens.default",
	"grpo.rollouts", "grpo.problems_per_step", "grpo.steps", "grpo.warmup_steps", "grpo.lora.rank",
	"eval.every", "checkpoint.every",
}

// TestPaperDrySpec holds seeds/paper-dry.yaml to seeds/paper.yaml: every
// key that differs is a size (paperDrySizes), so the dry run exercises
// the paper's workflows, tasks, conditions, data layouts and recipe.
func TestPaperDrySpec(t *testing.T) {
	load := func(name string) map[string]any {
		raw, err := os.ReadFile(filepath.Join("..", "..", "seeds", name))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return m
	}
	var diffs []string
	var walk func(key string, a, b any)
	walk = func(key string, a, b any) {
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok {
			keys := map[string]bool{}
			for k := range am {
				keys[k] = true
			}
			for k := range bm {
				keys[k] = true
			}
			for k := range keys {
				sub := k
				if key != "" {
					sub = key + "." + k
				}
				walk(sub, am[k], bm[k])
			}
			return
		}
		if !reflect.DeepEqual(a, b) {
			diffs = append(diffs, key)
		}
	}
	walk("", load("paper.yaml"), load("paper-dry.yaml"))
	sort.Strings(diffs)
	if len(diffs) == 0 {
		t.Fatal("paper-dry.yaml equals paper.yaml: it must at least shrink the sizes")
	}
	for _, d := range diffs {
		if !slices.ContainsFunc(paperDrySizes, func(p string) bool { ok, _ := path.Match(p, d); return ok }) {
			t.Errorf("seeds/paper-dry.yaml differs from seeds/paper.yaml in %s, which is not a size; change both or neither", d)
		}
	}
	t.Logf("differences: %v", diffs)
}
