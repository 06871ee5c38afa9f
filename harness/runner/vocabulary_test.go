package runner

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/datasets"
	"github.com/marlowlab/marlow/datasets/filetask"
	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/harness/study"
	"github.com/marlowlab/marlow/harness/workflow"
)

// TestSpecVocabularyHasImplementations proves that every value a spec
// accepts for the study's enums maps to a real implementation: each
// workflow has a definition that runs with the spec's settings, each condition
// routes every role, each LoRA target names a
// module, each task source opens (or fails on its data, not on its name),
// and the native engine is registered under its spec name. (Each loss mode is checked against the
// native engine in its TestEveryLossModeTrains.)
func TestSpecVocabularyHasImplementations(t *testing.T) {
	for _, wf := range spec.Workflows {
		cfg := workflow.Config{Name: wf, Settings: study.Settings{NVotes: 3, MaxIterations: 2, MaxSubtasks: 3}, Temperature: 0.7, DefaultMaxNewTokens: 8}
		if err := cfg.Validate(); err != nil {
			t.Errorf("workflow %s: %v", wf, err)
		}
	}
	for _, c := range spec.Conditions {
		for _, role := range spec.Roles {
			if _, err := grpo.Route(c, nil, role); err != nil {
				t.Errorf("condition %s, role %s: %v", c, role, err)
			}
		}
		if _, err := grpo.Adapters(c, nil, spec.Workflows...); err != nil {
			t.Errorf("condition %s: %v", c, err)
		}
	}
	for _, target := range spec.LoraTarget {
		if _, err := model.TargetModule(target); err != nil {
			t.Errorf("LoRA target %s: %v", target, err)
		}
	}
	for _, src := range spec.Sources {
		kind, ok := spec.SourceKind[src]
		switch {
		case src == datasets.SourceFile && ok:
			t.Errorf("source file has the fixed kind %q; its kind follows its verifier", kind)
		case src == datasets.SourceFile:
			for _, v := range filetask.Verifiers {
				if k := (filetask.Mapping{Verifier: v}).Kind(); k != datasets.KindMath && k != datasets.KindCode {
					t.Errorf("source file, verifier %s has kind %q", v, k)
				}
			}
		case !ok || (kind != datasets.KindMath && kind != datasets.KindCode):
			t.Errorf("source %s has kind %q", src, kind)
		}
		_, err := OpenTask(spec.DataConfig{Task: "t", Source: src, Path: t.TempDir()}, TaskOptions{})
		if err != nil && strings.Contains(err.Error(), "unknown source") {
			t.Errorf("source %s: %v", src, err)
		}
	}
	reg := nativeEngines()
	if err := reg.Check(context.Background(), engine.Options{}, study.Native); err != nil {
		t.Errorf("engine %s: %v", study.Native, err)
	}
	for _, name := range reg.Names() {
		if !slices.Contains(spec.Engines, name) {
			t.Errorf("engine %s is registered but a spec cannot select it (spec engines %v)", name, spec.Engines)
		}
	}
}
