package runlog

import (
	"os"
	"path/filepath"
	"testing"
)

// benchWrite writes b.N segments of the given rows through a Writer and
// reports rows per second.
func benchWrite(b *testing.B, add func(w *Writer, i int64) (rows int, commit int64, err error)) {
	dir := filepath.Join(b.TempDir(), "run")
	w, _, err := Open(dir, testManifest("bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	rows := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, commit, err := add(w, int64(i))
		if err != nil {
			b.Fatal(err)
		}
		rows += n
		if err := w.Commit(commit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkWriteSteps: one commit of 10 steps of a 4-role run (50 rows) per
// iteration, fsyncs included.
func BenchmarkWriteSteps(b *testing.B) {
	benchWrite(b, func(w *Writer, i int64) (int, int64, error) {
		n := 0
		for s := i * 10; s < i*10+10; s++ {
			rows := genSteps("bench", s)
			n += len(rows)
			if err := w.AddSteps(rows...); err != nil {
				return 0, 0, err
			}
		}
		return n, i*10 + 9, nil
	})
}

// BenchmarkWriteSamples: one commit of 512 agent turns per iteration.
func BenchmarkWriteSamples(b *testing.B) {
	benchWrite(b, func(w *Writer, i int64) (int, int64, error) {
		rows := genSamples("bench", i, 512)
		return len(rows), i, w.AddSamples(rows...)
	})
}

// BenchmarkEncodeSteps measures encoding alone (no file system).
func BenchmarkEncodeSteps(b *testing.B) {
	var rows []StepRow
	for s := int64(0); s < 100; s++ {
		rows = append(rows, genSteps("bench", s)...)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := stepsDef.encode(rows); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(rows)*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// TestBytesPer1000Steps measures the steps/ footprint of 1,000 steps of a
// 4-role shared-policy run (5 rows a step), committed every 10 steps, and
// keeps it within a sane bound.
func TestBytesPer1000Steps(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100 segments")
	}
	dir := filepath.Join(t.TempDir(), "run")
	w, _, err := Open(dir, testManifest("bytes"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for s := int64(0); s < 1000; s++ {
		if err := w.AddSteps(genSteps("bytes", s)...); err != nil {
			t.Fatal(err)
		}
		if s%10 == 9 {
			if err := w.Commit(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	var total int64
	entries, err := os.ReadDir(filepath.Join(dir, TableSteps))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		total += info.Size()
	}
	if len(entries) != 100 {
		t.Fatalf("%d segments, want 100", len(entries))
	}
	t.Logf("steps/: %d bytes per 1,000 steps of a 4-role run (100 segments, %d bytes each on average)", total, total/100)
	if total > 4<<20 {
		t.Fatalf("steps/ takes %d bytes per 1,000 steps", total)
	}
}
