package runlog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// makeTree writes two finished runs and one crashed run (with leftovers
// that must not be archived) under root.
func makeTree(t *testing.T, root string) {
	t.Helper()
	for _, run := range []string{"a", "b"} {
		if err := writeScenario(filepath.Join(root, "exp", run), run, 5); err != nil {
			t.Fatal(err)
		}
	}
	crashed := filepath.Join(root, "exp2", "c")
	if err := writeScenario(crashed, "c", 4); err != nil {
		t.Fatal(err)
	}
	leftovers := map[string]string{
		"steps/000009.parquet":     "uncommitted",
		"steps/000011.parquet.tmp": "temporary",
		"ckpt/adapter.safetensors": "weights",
	}
	for name, body := range leftovers {
		p := filepath.Join(crashed, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestArchive(t *testing.T) {
	root := filepath.Join(t.TempDir(), "runs")
	makeTree(t, root)
	out1 := filepath.Join(t.TempDir(), "one.tar.zst")
	out2 := filepath.Join(t.TempDir(), "two.tar.zst")
	if err := Archive(root, out1); err != nil {
		t.Fatal(err)
	}
	// A second tree with the same content but other file times: same bytes.
	root2 := filepath.Join(t.TempDir(), "elsewhere")
	makeTree(t, root2)
	if err := Archive(root2, out2); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out1)
	b, _ := os.ReadFile(out2)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("archives of identical trees differ (%d vs %d bytes)", len(a), len(b))
	}

	fromDir, err := ReadRuns(root)
	if err != nil {
		t.Fatal(err)
	}
	fromArc, err := ReadRuns(out1)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromDir) != 3 || len(fromArc) != 3 {
		t.Fatalf("runs: %d from folder, %d from archive, want 3", len(fromDir), len(fromArc))
	}
	wantIDs := []string{"a", "b", "c"}
	for i := range fromDir {
		if fromDir[i].Manifest.RunID != wantIDs[i] || fromArc[i].Manifest.RunID != wantIDs[i] {
			t.Fatalf("run %d: %q / %q, want %q", i, fromDir[i].Manifest.RunID, fromArc[i].Manifest.RunID, wantIDs[i])
		}
		mustSameRun(t, fromArc[i], fromDir[i])
		mustSameRun(t, fromDir[i], scenarioRun(wantIDs[i], fromDir[i].Manifest.LastStep))
	}
	if want := filepath.Join(out1, "exp", "a"); fromArc[0].Dir != want {
		t.Fatalf("archive run dir %q, want %q", fromArc[0].Dir, want)
	}
	if probs := Check(out1); len(probs) != 0 {
		t.Fatalf("Check of the archive: %v", probs)
	}
	fsys, err := readArchive(out1)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"exp2/c/steps/000009.parquet", "exp2/c/steps/000011.parquet.tmp", "exp2/c/ckpt/adapter.safetensors"} {
		if _, err := fsys.Open(name); err == nil {
			t.Errorf("archive holds %s", name)
		}
	}
	if _, err := fsys.Open("exp/a/steps/000004.parquet"); err != nil {
		t.Errorf("archive lacks a committed segment: %v", err)
	}

	if err := Archive(t.TempDir(), filepath.Join(t.TempDir(), "x.tar.zst")); err == nil {
		t.Fatal("archiving a tree without runs succeeded")
	}
}
