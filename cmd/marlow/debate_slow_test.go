//go:build slow

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebateEndToEnd runs seeds/debate.yaml, whose workflow is only a
// declaration (seeds/workflows/debate.yaml), on the CPU: base, sa-rl, sp
// and ip on the committed tiny model, then its report from the runs and
// again from their archive without the spec (the runs' configs carry the
// declaration). The report has the debate cell's figures, and claim c
// counts debate among the workflows with several agents of one role,
// from the declaration's structure.
func TestDebateEndToEnd(t *testing.T) {
	spec := filepath.Join("..", "..", "seeds", "debate.yaml")
	runs, out, again := t.TempDir(), t.TempDir(), t.TempDir()
	if _, stderr, err := execCLI(t, "run", spec, "--runs", runs, "--allow-dirty", "--progress", "none", "--jobs", "2", "--threads", "1"); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	for _, id := range []string{"debate-base-s-synth-math-seed1", "debate-sp-s-synth-math-seed1", "debate-ip-s-synth-math-seed1", "sa-rl-s-synth-math-seed1"} {
		samples, stderr, err := execCLI(t, "samples", filepath.Join(runs, "debate"), "--only", id, "--rollout", "0", "--max-chars", "40")
		if err != nil {
			t.Fatalf("samples %s: %v\n%s", id, err, stderr)
		}
		if !strings.Contains(samples, "agent generator1") || !strings.Contains(samples, "agent aggregator") {
			t.Errorf("%s: the validation rollouts lack the debate's agents:\n%s", id, samples)
		}
	}
	if _, stderr, err := execCLI(t, "report", spec, "--runs", runs, "--out", out); err != nil {
		t.Fatalf("report: %v\n%s", err, stderr)
	}
	readme, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| synth-math | debate | s | ip |", "concentrate in voting, orch-workers and debate"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, fig := range []string{"accuracy_debate_synth-math_s.png", "roleacc_debate_synth-math_s.png", "headline.png"} {
		if _, err := os.Stat(filepath.Join(out, "figures", fig)); err != nil {
			t.Errorf("figure %s: %v", fig, err)
		}
	}
	archive := filepath.Join(t.TempDir(), "logs.tar.zst")
	if _, stderr, err := execCLI(t, "archive", filepath.Join(runs, "debate"), archive); err != nil {
		t.Fatalf("archive: %v\n%s", err, stderr)
	}
	if _, stderr, err := execCLI(t, "report", archive, "--out", again); err != nil {
		t.Fatalf("report of the archive: %v\n%s", err, stderr)
	}
	fromArchive, err := os.ReadFile(filepath.Join(again, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := withoutCommand(string(fromArchive)), withoutCommand(string(readme)); a != b {
		t.Errorf("the report from the archive (no spec) differs from the report from the spec's runs:\n%s\n----\n%s", a, b)
	}
}

// withoutCommand drops the README's line that shows the command that made
// it (its sources differ).
func withoutCommand(readme string) string {
	var keep []string
	for _, l := range strings.Split(readme, "\n") {
		if !strings.HasPrefix(l, "marlow report ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
