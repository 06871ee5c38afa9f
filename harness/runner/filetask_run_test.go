package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

// A spec whose task is a GSM8K-shaped JSONL file runs end to end on the
// native engine with the smoke's committed tiny base model: every run
// finishes, the rollouts grade problems of the file, the manifest pins the
// file's content, and a second run of the spec logs the same rows.
func TestFileTaskRunsEndToEnd(t *testing.T) {
	specPath := filepath.Join("..", "..", "datasets", "filetask", "testdata", "gsm8k-smoke.yaml")
	data := filepath.Join(filepath.Dir(specPath), "gsm8k.jsonl")
	s, err := spec.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	wantHash := hex.EncodeToString(sum[:])
	run := func() (string, *Summary) {
		dir := t.TempDir()
		opt := Options{RunsDir: dir, Jobs: 2, Threads: 1, AllowDirty: true, Engines: nativeEngines(),
			BaseModel: PretrainedBase(s, 1, nil)}
		got, err := Run(context.Background(), s, opt)
		if err != nil {
			t.Fatal(err)
		}
		return dir, got
	}
	dirA, sumA := run()
	dirB, _ := run()
	if len(sumA.Outcomes) != 4 {
		t.Fatalf("%d runs, want 4:\n%s", len(sumA.Outcomes), states(sumA))
	}
	trained := 0
	for _, o := range sumA.Outcomes {
		if o.State != StateDone {
			t.Fatalf("%s: %s: %v", o.ID, o.State, o.Err)
		}
		a := filepath.Join(dirA, s.Experiment, o.ID)
		r, err := runlog.ReadRun(a)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Samples) == 0 || len(r.Evals) == 0 {
			t.Fatalf("%s: %d samples, %d evals logged", o.ID, len(r.Samples), len(r.Evals))
		}
		for _, row := range r.Samples {
			if n, err := strconv.Atoi(row.ProblemID); err != nil || n < 1 || n > 12 {
				t.Fatalf("%s: sample problem id %q is not a row number of %s", o.ID, row.ProblemID, data)
			}
		}
		if len(r.Steps) > 0 {
			trained++
		}
		var pinned string
		for name, h := range r.Manifest.Provenance.Files {
			if filepath.Base(name) == "gsm8k.jsonl" {
				pinned = h
			}
		}
		if pinned != wantHash {
			t.Errorf("%s: the manifest pins gsm8k.jsonl as %q, want its SHA-256 %s (files %v)", o.ID, pinned, wantHash, r.Manifest.Provenance.Files)
		}
		if x, y := rowsText(t, a), rowsText(t, filepath.Join(dirB, s.Experiment, o.ID)); x != y {
			t.Errorf("%s: a second run of the spec logs other rows", o.ID)
		}
	}
	if trained != 2 {
		t.Errorf("%d runs logged training steps, want 2 (sa-rl and sp)", trained)
	}
}
