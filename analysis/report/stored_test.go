package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/analysis/analysistest"
	"github.com/marlowlab/marlow/harness/runlog"
)

// TestReportFromStoredLogs writes the fixture with the run-log writer,
// archives it, and checks that the report rebuilt from the folder and from
// the archive is byte-identical to the one from the in-memory runs.
func TestReportFromStoredLogs(t *testing.T) {
	runsDir := filepath.Join(t.TempDir(), "fixture")
	if d := os.Getenv("MARLOW_RUNS_DIR"); d != "" { // keep the logs, to try the CLI by hand
		runsDir = d
	}
	if err := analysistest.WriteRuns(runsDir, analysistest.Fixture()); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "fixture.tar.zst")
	if err := runlog.Archive(runsDir, archive); err != nil {
		t.Fatal(err)
	}
	want, err := Render(fixtureStudy(t), fixtureOpts)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{runsDir, archive} {
		st, err := analysis.Load(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Render(st, fixtureOpts)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d files, want %d", src, len(got), len(want))
		}
		for i := range got {
			if got[i].Path != want[i].Path || !bytes.Equal(got[i].Data, want[i].Data) {
				t.Errorf("%s: %s differs from the report of the in-memory logs\n%s", src, got[i].Path, firstDiff(string(want[i].Data), string(got[i].Data)))
			}
		}
	}
}
