package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportPartial marks one run of a copy of the fixture as running:
// report refuses, naming it, and with --partial lists it in the README.
func TestReportPartial(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "fixture")
	copyTree(t, fixtureRuns(t), runs)
	const id = "voting-sp-s-math-seed2"
	mp := filepath.Join(runs, id, "manifest.json")
	b, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), `"status": "done"`, `"status": "running"`, 1)
	if text == string(b) {
		t.Fatal("no status to edit")
	}
	if err := os.WriteFile(mp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "rep")
	_, _, err = execCLI(t, "report", runs, "--out", out)
	if err == nil || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "--partial") {
		t.Fatalf("report over a partial experiment: err %v; want a refusal naming %s and --partial", err, id)
	}
	if _, err := os.Stat(filepath.Join(out, "README.md")); err == nil {
		t.Error("a refused report wrote README.md")
	}
	if _, _, err := execCLI(t, "report", runs, "--out", out, "--partial"); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "This report is partial") || !strings.Contains(string(readme), id+": running") {
		t.Errorf("partial README does not list %s as running:\n%.1500s", id, readme)
	}
}

// TestCheckDamagedManifest edits the stored config of a run: check names
// the manifest as damaged.
func TestCheckDamagedManifest(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "fixture")
	copyTree(t, fixtureRuns(t), runs)
	mp := filepath.Join(runs, "voting-sp-s-math-seed1", "manifest.json")
	b, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), `"config": null`, `"config": {"grpo": {"lr": 0.5}}`, 1)
	if text == string(b) {
		t.Fatal("no config to edit")
	}
	if err := os.WriteFile(mp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := execCLI(t, "check", runs)
	if codeOf(err) != 1 || !strings.Contains(stdout, mp+": damaged manifest") {
		t.Errorf("check: exit %d, output:\n%s\nwant %s named as a damaged manifest", codeOf(err), stdout, mp)
	}
}

// TestCheckDeletedSegment deletes a committed segment of a done run: check
// names it.
func TestCheckDeletedSegment(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "fixture")
	copyTree(t, fixtureRuns(t), runs)
	seg := firstParquet(t, filepath.Join(runs, "voting-ip-s-math-seed1"))
	if err := os.Remove(seg); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := execCLI(t, "check", runs)
	if codeOf(err) != 1 || !strings.Contains(stdout, seg) {
		t.Errorf("check: exit %d, output:\n%s\nwant %s named", codeOf(err), stdout, seg)
	}
	if _, _, err := execCLI(t, "report", runs, "--out", filepath.Join(t.TempDir(), "rep")); err == nil || !strings.Contains(err.Error(), seg) {
		t.Errorf("report over a deleted segment: err %v; want one naming %s", err, seg)
	}
}

// TestReportAndAnalyzeListEveryDamagedFile truncates a segment in each of
// two runs: report and analyze stop, as before, but name both files, as
// check does, not only the first they read.
func TestReportAndAnalyzeListEveryDamagedFile(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "fixture")
	copyTree(t, fixtureRuns(t), runs)
	var segs []string
	for _, id := range []string{"voting-ip-s-math-seed1", "voting-sp-s-math-seed2"} {
		seg := firstParquet(t, filepath.Join(runs, id))
		if err := os.Truncate(seg, 40); err != nil {
			t.Fatal(err)
		}
		segs = append(segs, seg)
	}
	stdout, _, err := execCLI(t, "check", runs)
	if codeOf(err) != 1 || !strings.Contains(stdout, segs[0]) || !strings.Contains(stdout, segs[1]) {
		t.Fatalf("check: exit %d, output:\n%s\nwant both %v named", codeOf(err), stdout, segs)
	}
	for _, args := range [][]string{{"report", runs, "--out", filepath.Join(t.TempDir(), "rep")}, {"analyze", runs}} {
		_, _, err := execCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), "2 damaged files") || !strings.Contains(err.Error(), segs[0]) || !strings.Contains(err.Error(), segs[1]) {
			t.Errorf("%s over two truncated segments: err %v; want both %v listed", args[0], err, segs)
		}
	}
}
