package tensorboard

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/marlowlab/marlow/harness/runlog"
)

// demoRuns are the committed demo logs.
func demoRuns(t *testing.T) []*runlog.Run {
	t.Helper()
	runs, err := runlog.ReadRuns(filepath.Join("..", "..", "reports", "demo", "logs.tar.zst"))
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// The same logs give the same bytes, and a file appended step range by
// step range (as `marlow run --tensorboard` does after each commit) is the
// file Export writes at once.
func TestExportDeterministicAndAppendable(t *testing.T) {
	for _, r := range demoRuns(t) {
		a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
		pa, err := Export(a, r)
		if err != nil {
			t.Fatal(err)
		}
		pb, err := Export(b, r)
		if err != nil {
			t.Fatal(err)
		}
		steps := Steps(r, -1)
		cut := steps[len(steps)/2]
		// the file as it stood at commit `cut`, then the rest appended
		head := *r
		head.Steps, head.Evals = nil, nil
		for _, s := range r.Steps {
			if s.Step <= cut {
				head.Steps = append(head.Steps, s)
			}
		}
		for _, e := range r.Evals {
			if e.Step <= cut {
				head.Evals = append(head.Evals, e)
			}
		}
		if _, err := Export(c, &head); err != nil {
			t.Fatal(err)
		}
		pc, err := ExportAfter(c, r, cut)
		if err != nil {
			t.Fatal(err)
		}
		da, _ := os.ReadFile(pa)
		db, _ := os.ReadFile(pb)
		dc, _ := os.ReadFile(pc)
		if len(da) == 0 || !bytes.Equal(da, db) || !bytes.Equal(da, dc) {
			t.Errorf("%s: exports differ: %d, %d and %d (appended) bytes", r.Manifest.RunID, len(da), len(db), len(dc))
		}
	}
}

// The event files read back with the tensorboard Python package
// ($MARLOW_PYTHON) hold every scalar of every step, as float32, at its
// step and wall time. Under CI (CI=true) a missing interpreter or package
// fails the test instead of skipping it.
func TestEventsReadByTensorBoard(t *testing.T) {
	py := os.Getenv("MARLOW_PYTHON")
	need := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; CI needs it: pip install the tensorboard pin of harness/engine/torch/requirements-dev.txt", why)
		}
		t.Skip(why)
	}
	if py == "" {
		need("MARLOW_PYTHON is not set")
	}
	if out, err := exec.Command(py, "-c", "import tensorboard").CombinedOutput(); err != nil {
		need("the tensorboard package is missing from " + py + ": " + string(out))
	}
	root := t.TempDir()
	runs := demoRuns(t)
	var dirs []string
	for _, r := range runs {
		if _, err := Export(root, r); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, RunDir(root, r.Manifest))
	}
	cmd := exec.Command(py, append([]string{filepath.Join("testdata", "read_events.py")}, dirs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read_events.py: %v\n%s", err, stderr.String())
	}
	var got map[string]map[string][][3]float64
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("read_events.py output: %v", err)
	}
	for i, r := range runs {
		tags := got[dirs[i]]
		n := 0
		for _, st := range Steps(r, -1) {
			wall, sc := StepScalars(r, st)
			for _, s := range sc {
				if s.Value != s.Value { // NaN: not written
					continue
				}
				n++
				found := false
				for _, e := range tags[s.Tag] {
					if int64(e[0]) == st {
						found = true
						if float32(e[1]) != float32(s.Value) || e[2] != wall {
							t.Errorf("%s %s step %d: read %v at %v, wrote %v at %v", r.Manifest.RunID, s.Tag, st, e[1], e[2], float32(s.Value), wall)
						}
					}
				}
				if !found {
					t.Errorf("%s %s step %d: not read back", r.Manifest.RunID, s.Tag, st)
				}
			}
		}
		var read int
		for _, es := range tags {
			read += len(es)
		}
		if read != n || n == 0 {
			t.Errorf("%s: %d scalars read back, %d written", r.Manifest.RunID, read, n)
		}
		for _, want := range []string{"val_accuracy/voting/final", "val_format/voting/generator"} {
			if len(tags[want]) == 0 {
				t.Errorf("%s: no %s", r.Manifest.RunID, want)
			}
		}
		if r.Manifest.Condition != "base" && len(tags["grad_norm/"+r.Steps[0].Policy+"/"+r.Steps[0].Role]) == 0 && len(tags["kl/"+r.Steps[0].Policy+"/all"]) == 0 {
			t.Errorf("%s: no training curves", r.Manifest.RunID)
		}
	}
}
