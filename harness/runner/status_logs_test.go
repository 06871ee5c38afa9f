package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/runlog"
)

// A runs folder's status comes from its manifests: a run whose manifest
// says running with no process holding it is crashed, and list counts the
// states of each experiment.
func TestStatusOfLogsAndExperiments(t *testing.T) {
	runs := t.TempDir()
	s := writeSpec(t, "0.5")
	if _, err := Run(context.Background(), s, fakeOptions(runs)); err != nil {
		t.Fatal(err)
	}
	id := "voting-sp-s-synth-math-seed1"
	mf := filepath.Join(runs, "fk", id, runlog.ManifestFile)
	b, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	crashed := strings.Replace(string(b), `"status": "done"`, `"status": "running"`, 1)
	if crashed == string(b) {
		t.Fatalf("manifest has no done status:\n%s", b)
	}
	if err := os.WriteFile(mf, []byte(crashed), 0o644); err != nil {
		t.Fatal(err)
	}
	sts, err := StatusOfLogs(filepath.Join(runs, "fk"), "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, st := range sts {
		got[st.ID] = st.State
	}
	if len(got) != 4 || got[id] != StateCrashed || got["voting-ip-s-synth-math-seed1"] != StateDone {
		t.Errorf("states %v", got)
	}
	only, err := StatusOfLogs(runs, "voting-*-seed1")
	if err != nil || len(only) != 3 {
		t.Errorf("--only voting-*: %d runs, err %v", len(only), err)
	}
	xs, err := Experiments(runs)
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 1 || xs[0].Name != "fk" || xs[0].Runs != 4 || CountsText(xs[0].Counts) != "done 3, crashed 1" {
		t.Errorf("experiments %+v", xs)
	}
}
