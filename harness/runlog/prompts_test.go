package runlog

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Each distinct prompt of a run is written to prompts/ once, with the
// step of its first use, across commits and across a resume that discards
// uncommitted rows; the readers join the text back into every sample row.
func TestPromptsOncePerRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	sample := func(step int64, prompt string) SampleRow {
		return SampleRow{Step: step, Workflow: "voting", Split: "val", Agent: "generator0", Role: "generator", Prompt: prompt, Completion: "x"}
	}
	w, _, err := Open(dir, testManifest("r"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddSamples(sample(1, "A"), sample(1, "B"), sample(1, "A"), sample(1, "")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(1); err != nil {
		t.Fatal(err)
	}
	// rows of step 2, lost to a crash: their new prompt "D" must not count
	// as written after the resume
	if err := w.AddSamples(sample(2, "D")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w, last, err := Open(dir, testManifest("r"))
	if err != nil || last != 1 {
		t.Fatalf("reopen: last %d, err %v", last, err)
	}
	if err := w.AddSamples(sample(2, "A"), sample(2, "C"), sample(2, "D")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(2); err != nil {
		t.Fatal(err)
	}
	w.Close()

	r, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range r.Samples {
		got = append(got, s.Prompt)
	}
	if want := []string{"A", "B", "A", "", "A", "C", "D"}; !slices.Equal(got, want) {
		t.Errorf("sample prompts %q, want %q", got, want)
	}
	prompts, err := readTableRows(source{fsys: os.DirFS(dir), label: dir}, ".", promptsDef, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, p := range prompts {
		rows = append(rows, fmt.Sprintf("%d:%s@%d", p.ID, p.Prompt, p.Step))
	}
	if want := []string{"1:A@1", "2:B@1", "3:C@2", "4:D@2"}; !slices.Equal(rows, want) {
		t.Errorf("prompts/ rows %q, want %q", rows, want)
	}
	if probs := Check(filepath.Dir(dir)); len(probs) > 0 {
		t.Errorf("Check: %v", probs)
	}
}
