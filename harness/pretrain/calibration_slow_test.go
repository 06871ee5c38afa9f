//go:build slow

package pretrain

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/marlowlab/marlow/harness/engine/native"
	"github.com/marlowlab/marlow/harness/spec"
)

// TestMiniCalibration re-measures the committed base models of
// seeds/mini.yaml (minutes, so it only builds with -tags slow). The
// measurement must equal the calibration.md committed beside each
// checkpoint, so the tables in the repository are what the tool measures,
// and every scale and task must keep single-agent validation accuracy
// between 15% and 60%, rising strictly from s to m to l on each task, and
// every role's format compliance at least 80%.
func TestMiniCalibration(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(filepath.Join(root, "seeds", "mini.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	scales, err := Scales(s, "")
	if err != nil {
		t.Fatal(err)
	}
	l := Locator{RepoRoot: root, CacheRoot: t.TempDir(), NoBuild: true}
	const lo, hi, minFormat = 0.15, 0.60, 0.80
	prev := map[string]float64{} // task -> single-agent accuracy of the previous scale (Scales keeps the matrix order s, m, l)
	for _, sc := range scales {
		job, err := FromSpec(s, sc, ConfigOf(s, sc))
		if err != nil {
			t.Fatal(err)
		}
		dir, where, err := l.Find(job)
		if err != nil || where != FromCommitted {
			t.Fatalf("scale %s: no committed checkpoint (%q, %v)", sc, where, err)
		}
		eng, err := native.Open(dir, native.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		cal, err := Calibrate(context.Background(), s, job, eng, CalibrateOptions{})
		eng.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s", cal.Markdown())
		want, err := os.ReadFile(filepath.Join(dir, CalibrationFile))
		if err != nil {
			t.Fatalf("scale %s: %v", sc, err)
		}
		if got := cal.Markdown(); got != string(want) {
			t.Errorf("scale %s: measured calibration differs from the committed %s:\n%s", sc, CalibrationFile, got)
		}
		for _, row := range cal.Rows {
			for _, r := range row.Roles {
				if r.Rate() < minFormat {
					t.Errorf("scale %s %s %s: %s format compliance %.3f < %.2f", sc, row.Task, row.Workflow, r.Role, r.Rate(), minFormat)
				}
			}
			if row.Workflow != "single" {
				continue
			}
			acc := row.Accuracy()
			if acc < lo || acc > hi {
				t.Errorf("scale %s %s: single-agent accuracy %.3f outside [%.2f, %.2f]", sc, row.Task, acc, lo, hi)
			}
			if p, ok := prev[row.Task]; ok && acc <= p {
				t.Errorf("scale %s %s: single-agent accuracy %.3f does not rise above the smaller scale's %.3f", sc, row.Task, acc, p)
			}
			prev[row.Task] = acc
		}
	}
}
