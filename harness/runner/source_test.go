package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIsSpec(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a.yaml")
	yml := filepath.Join(dir, "b.yml")
	folder := filepath.Join(dir, "c.yaml")
	other := filepath.Join(dir, "d.tar.zst")
	for _, p := range []string{file, yml, other} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{file: true, yml: true, folder: false, other: false,
		filepath.Join(dir, "missing.yaml"): false, dir: false} {
		if got := IsSpec(p); got != want {
			t.Errorf("IsSpec(%s) = %v, want %v", p, got, want)
		}
	}
}

func TestSource(t *testing.T) {
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := writeSpecIn(t, repo, "1e-3")
	runs := filepath.Join(repo, "runs")

	// a spec without runs: the error says how to make them
	_, _, err := Source(s.File, runs)
	if err == nil || !strings.Contains(err.Error(), `no runs of experiment "fk"`) || !strings.Contains(err.Error(), "marlow run "+s.File) {
		t.Errorf("spec without runs: %v", err)
	}
	// ... and names the report's committed logs when there are some
	archive := filepath.Join(repo, "reports", "fk", "logs.tar.zst")
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archive, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Source(s.File, runs); err == nil || !strings.Contains(err.Error(), "read the committed logs: `marlow report "+archive+"`") {
		t.Errorf("spec without runs but with committed logs: %v", err)
	}
	// status reads the plan of a spec whose runs do not exist yet
	dir, got, err := SourceOrPlan(s.File, runs)
	if err != nil || got == nil || dir != RunDir(runs, "fk", "") {
		t.Errorf("SourceOrPlan(spec) = %s, %v, %v", dir, got, err)
	}
	// with runs
	if err := os.MkdirAll(RunDir(runs, "fk", ""), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, got, err = Source(s.File, runs)
	if err != nil || got == nil || got.Experiment != "fk" || dir != RunDir(runs, "fk", "") {
		t.Errorf("Source(spec) = %s, %v, %v", dir, got, err)
	}
	// a runs folder or an archive is read as it is
	for _, p := range []string{runs, archive} {
		dir, got, err := Source(p, "elsewhere")
		if err != nil || got != nil || dir != p {
			t.Errorf("Source(%s) = %s, %v, %v", p, dir, got, err)
		}
		if dir, got, err := SourceOrPlan(p, "elsewhere"); err != nil || got != nil || dir != p {
			t.Errorf("SourceOrPlan(%s) = %s, %v, %v", p, dir, got, err)
		}
	}
	missing := filepath.Join(repo, "nothing")
	if _, _, err := Source(missing, runs); err == nil || !strings.Contains(err.Error(), "source "+missing) {
		t.Errorf("missing source: %v", err)
	}
	if _, _, err := SourceOrPlan(missing+".yaml", runs); err == nil || !strings.Contains(err.Error(), "source "+missing+".yaml") {
		t.Errorf("missing spec: %v", err)
	}
}

func TestRunFilter(t *testing.T) {
	if keep, err := RunFilter(""); keep != nil || err != nil {
		t.Errorf("empty glob: %v", err)
	}
	if _, err := RunFilter("voting-["); err == nil || !strings.Contains(err.Error(), `--only "voting-["`) {
		t.Errorf("malformed glob: %v", err)
	}
	keep, err := RunFilter("voting-*-seed1")
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{"runs/x/voting-sp-seed1": true, "voting-ip-seed1": true,
		"runs/x/voting-sp-seed2": false, "runs/voting-sp-seed1/other": false} {
		if got := keep(dir); got != want {
			t.Errorf("keep(%s) = %v, want %v", dir, got, want)
		}
	}
}
