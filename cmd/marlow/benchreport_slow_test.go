//go:build slow

package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// reportMemoryBound is the peak resident set DESIGN.md states for marlow
// report ("Reading logs at scale").
const reportMemoryBound = 1 << 30

// TestBenchReportScale: marlow report over logs grown ten-fold (the
// dynamics study's smallest archive, its training text made ten times as
// long) peaks within 1.2 times the resident set it needs at their own
// size, under the stated bound, and writes the same summary. Each scale's
// report runs twice and its least peak counts: a busy machine's garbage
// collector runs late and only ever adds to a peak.
func TestBenchReportScale(t *testing.T) {
	child := func(args ...string) (*exec.Cmd, error) {
		a, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MARLOW_TEST_RUN_MAIN=1", "MARLOW_TEST_ARGS="+string(a))
		return cmd, nil
	}
	src := filepath.Join("..", "..", "reports", "dynamics", "logs-e.tar.zst")
	points, err := benchReport(context.Background(), child, []string{src}, []int{1, 10}, 2, 2, t.TempDir(), testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", reportTable(points))
	one, ten := points[0], points[1]
	if float64(ten.ArchiveBytes) < 8*float64(one.ArchiveBytes) {
		t.Fatalf("the grown archives are %.1f times the originals, want about 10", float64(ten.ArchiveBytes)/float64(one.ArchiveBytes))
	}
	if float64(ten.PeakRSS) > 1.2*float64(one.PeakRSS) {
		t.Errorf("peak RSS %d MB at 10x, over 1.2 times the %d MB at 1x", ten.PeakRSS>>20, one.PeakRSS>>20)
	}
	for _, p := range points {
		if p.PeakRSS > reportMemoryBound {
			t.Errorf("peak RSS %d MB at %dx, over the %d MB bound", p.PeakRSS>>20, p.Scale, reportMemoryBound>>20)
		}
	}
	if string(one.Summary) != string(ten.Summary) {
		t.Errorf("the reports of the logs at 1x and 10x differ")
	}
}

// testWriter logs what is written to it.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
