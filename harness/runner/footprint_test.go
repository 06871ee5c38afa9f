package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

// TestFootprintSchedule runs the fake experiment and compares each run's
// estimated segments with the segments it committed, and the estimated log
// bytes with the bytes written (the estimate may only err on the large
// side, by less than 8x).
func TestFootprintSchedule(t *testing.T) {
	s := writeSpec(t, "0.5")
	runs := t.TempDir()
	if _, err := Run(context.Background(), s, fakeOptions(runs)); err != nil {
		t.Fatal(err)
	}
	planned, err := spec.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range planned {
		f := EstimateFootprint(r)
		m, err := runlog.ReadManifest(RunDir(runs, s.Experiment, r.ID))
		if err != nil {
			t.Fatal(err)
		}
		var bytes int64
		for _, e := range m.Inventory.Segments {
			bytes += e.Bytes
		}
		if f.Segments != len(m.Inventory.Segments) {
			t.Errorf("%s: estimated %d segments, the run committed %d", r.ID, f.Segments, len(m.Inventory.Segments))
		}
		if f.LogBytes < bytes || f.LogBytes > 8*bytes {
			t.Errorf("%s: estimated %d log bytes, the run wrote %d", r.ID, f.LogBytes, bytes)
		}
	}
}

func TestNoSignal(t *testing.T) {
	dir := t.TempDir()
	text := strings.Replace(fakeSpec, "aggregator: 16", "aggregator: 16, generator: 1", 1)
	p := filepath.Join(dir, "fk.yaml")
	if err := os.WriteFile(p, []byte(strings.Replace(text, "%s", "0.5", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	planned, err := spec.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range planned {
		got := strings.Join(NoSignal(r), "; ")
		if want := r.Condition != "base"; want != strings.Contains(got, "max_new_tokens.generator 1") {
			t.Errorf("%s: %q; want a warning: %v", r.ID, got, want)
		}
	}
	planned, err = spec.Plan(writeSpec(t, "0.5"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range planned {
		if got := NoSignal(r); len(got) > 0 {
			t.Errorf("%s: the fake spec has a signal, got %q", r.ID, got)
		}
	}
}
