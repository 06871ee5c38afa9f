package runlog

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
)

func init() {
	// Fixed manifest times keep test runs comparable.
	now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
}

// roundTrip encodes rows, checks that a second encoding gives the same
// bytes, and decodes them back.
func roundTrip[R any](t *testing.T, def *tableDef[R], rows []R) {
	t.Helper()
	a, err := def.encode(rows)
	if err != nil {
		t.Fatalf("%s: encode: %v", def.name, err)
	}
	b, err := def.encode(slices.Clone(rows))
	if err != nil {
		t.Fatalf("%s: encode again: %v", def.name, err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("%s: identical rows gave different bytes (%d vs %d)", def.name, len(a), len(b))
	}
	got, err := def.decode(a)
	if err != nil {
		t.Fatalf("%s: decode: %v", def.name, err)
	}
	mustSame(t, def.name, got, rows)
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"steps", func(t *testing.T) { roundTrip(t, stepsDef, append(genSteps("r", 3), genSteps("r", 4)...)) }},
		{"steps-map-edge", func(t *testing.T) {
			roundTrip(t, stepsDef, []StepRow{
				{RunID: "r", Role: "a", RoleCos: nil},
				{RunID: "r", Role: "b", RoleCos: map[string]float64{}},
				{RunID: "r", Role: "c", RoleCos: map[string]float64{"z": 1, "a": math.NaN(), "m": math.Inf(-1)}},
				{RunID: "r", Role: "d", Loss: math.Inf(1), GradNorm: math.NaN(), LR: -0.5},
				{RunID: "r", Role: "generator", AgentCos: map[string]float64{"generator0": 0.25, "generator1": math.NaN(), "generator2": -0.5}},
			})
		}},
		{"evals", func(t *testing.T) { roundTrip(t, evalsDef, genEvals("r", 9)) }},
		{"samples", func(t *testing.T) {
			// samples/ holds the hash; the text goes to prompts/
			rows := genSamples("r", 5, 40)
			for i := range rows {
				rows[i].promptID, rows[i].Prompt = int64(i%7), ""
			}
			roundTrip(t, samplesDef, rows)
		}},
		{"samples-v1", func(t *testing.T) { roundTrip(t, samplesV1Def, genSamples("r", 5, 40)) }},
		{"prompts", func(t *testing.T) {
			roundTrip(t, promptsDef, []PromptRow{{RunID: "r", Step: 0, ID: 1, Prompt: "a"}, {RunID: "r", Step: 3, ID: 2, Prompt: "«b»"}})
		}},
		{"samples-empty-strings", func(t *testing.T) { roundTrip(t, samplesDef, []SampleRow{{RunID: "r", Advantage: math.NaN()}}) }},
		{"timing", func(t *testing.T) { roundTrip(t, timingDef, genTiming("r", 2)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

// TestMapKeyOrder: a Go map iterates in random order; the file must not.
func TestMapKeyOrder(t *testing.T) {
	rows := genSteps("r", 1)
	first, err := stepsDef.encode(rows)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		again := genSteps("r", 1) // new maps, new iteration orders
		data, err := stepsDef.encode(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, data) {
			t.Fatalf("encoding %d differs from the first", i)
		}
	}
}

func TestWriterReadRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "exp", "run-a")
	if err := writeScenario(dir, "run-a", 8); err != nil {
		t.Fatal(err)
	}
	r, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustSameRun(t, r, scenarioRun("run-a", 7))
	if r.Manifest.LastStep != 7 || r.Manifest.Status != StatusDone || r.Manifest.SchemaVersion != SchemaVersion {
		t.Fatalf("manifest: last %d status %q version %d", r.Manifest.LastStep, r.Manifest.Status, r.Manifest.SchemaVersion)
	}
	files := treeFiles(t, dir)
	for _, want := range []string{"steps/000001.parquet", "steps/000007.parquet", "evals/000003.parquet", "samples/000005.parquet", "timing/000007.parquet"} {
		if _, ok := files[want]; !ok {
			t.Errorf("missing segment %s", want)
		}
	}
	if _, ok := files["evals/000005.parquet"]; ok {
		t.Errorf("evals/000005.parquet written for a commit without eval rows")
	}
	if probs := Check(dir); len(probs) != 0 {
		t.Fatalf("Check of a sound run: %v", probs)
	}

	// Same rows into another folder: byte-identical segments.
	dir2 := filepath.Join(t.TempDir(), "run-a")
	if err := writeScenario(dir2, "run-a", 8); err != nil {
		t.Fatal(err)
	}
	files2 := treeFiles(t, dir2)
	for name, data := range files {
		if name == ManifestFile {
			continue
		}
		if files2[name] != data {
			t.Errorf("%s differs between two identical runs", name)
		}
	}

	tbl, err := ReadTable(dir, TableSamples)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if got, want := tbl.NumRows(), int64(len(r.Samples)); got != want {
		t.Fatalf("ReadTable samples: %d rows, want %d", got, want)
	}
	tr := array.NewTableReader(tbl, -1)
	defer tr.Release()
	var n int64
	for tr.Next() {
		n += tr.RecordBatch().NumRows()
	}
	if n != tbl.NumRows() {
		t.Fatalf("table reader saw %d rows of %d", n, tbl.NumRows())
	}
	empty := filepath.Join(t.TempDir(), "fresh")
	w, _, err := Open(empty, testManifest("fresh"))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	et, err := ReadTable(empty, TableSteps)
	if err != nil {
		t.Fatal(err)
	}
	if et.NumRows() != 0 || et.NumCols() != int64(len(stepsDef.cols)) {
		t.Fatalf("empty table: %d rows %d cols", et.NumRows(), et.NumCols())
	}
	et.Release()
	if _, err := ReadTable(dir, "nope"); err == nil || !strings.Contains(err.Error(), "unknown table") {
		t.Fatalf("unknown table: %v", err)
	}
}

func TestWriterRejects(t *testing.T) {
	tests := []struct {
		name string
		do   func(w *Writer) error
		want string
	}{
		{"other run", func(w *Writer) error { return w.AddSteps(StepRow{RunID: "x", Step: 1}) }, "run id"},
		{"committed step", func(w *Writer) error { return w.AddEvals(EvalRow{Step: 0}) }, "already committed"},
		{"commit backwards", func(w *Writer) error { return w.Commit(0) }, "not after"},
		{"row past commit", func(w *Writer) error {
			if err := w.AddTiming(TimingRow{Step: 5}); err != nil {
				return err
			}
			return w.Commit(4)
		}, "step 5 in the commit of step 4"},
		{"bad status", func(w *Writer) error { return w.SetStatus("weird", "") }, "unknown status"},
		{"closed", func(w *Writer) error { w.Close(); return w.AddSamples(SampleRow{Step: 3}) }, "closed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, _, err := Open(filepath.Join(t.TempDir(), "r"), testManifest("r"))
			if err != nil {
				t.Fatal(err)
			}
			if err := w.AddSteps(StepRow{Step: 0}); err != nil {
				t.Fatal(err)
			}
			if err := w.Commit(0); err != nil {
				t.Fatal(err)
			}
			err = tc.do(w)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestOpenRejects(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	if err := writeScenario(dir, "r", 3); err != nil {
		t.Fatal(err)
	}
	other := testManifest("r")
	other.ConfigHash = "cfg-2"
	if _, _, err := Open(dir, other); err == nil || !strings.Contains(err.Error(), "config hash") {
		t.Fatalf("resume with another config: %v", err)
	}
	if _, _, err := Open(dir, testManifest("s")); err == nil || !strings.Contains(err.Error(), `not "s"`) {
		t.Fatalf("resume as another run: %v", err)
	}
	// A run of an older schema version is read, not resumed.
	mf := filepath.Join(dir, ManifestFile)
	raw, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(raw), fmt.Sprintf(`"schema_version": %d`, SchemaVersion), `"schema_version": 1`, 1)
	if old == string(raw) {
		t.Fatal("manifest has no schema_version to edit")
	}
	if err := os.WriteFile(mf, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(dir); err != nil {
		t.Fatalf("reading a version-1 manifest: %v", err)
	}
	if _, _, err := Open(dir, testManifest("r")); !errors.Is(err, ErrSchemaVersion) || !strings.Contains(err.Error(), "cannot be resumed") {
		t.Fatalf("resume of a version-1 run: %v", err)
	}
	if err := os.WriteFile(mf, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir, Manifest{}); err == nil {
		t.Fatal("open without run id succeeded")
	}
	stray := t.TempDir()
	if err := os.WriteFile(filepath.Join(stray, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(stray, testManifest("r")); !errors.Is(err, ErrMissingManifest) {
		t.Fatalf("open over a non-empty folder: %v", err)
	}
}

// TestResumeTruncates: rows past the manifest's last step inside committed
// segments (a rewound manifest) are dropped and the segment rewritten.
func TestResumeTruncates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	if err := writeScenario(dir, "r", 6); err != nil {
		t.Fatal(err)
	}
	// Put rows of steps 4 and 5 into the segment of step 3 and rewind.
	rows := append(genSteps("r", 2), genSteps("r", 3)...)
	rows = append(rows, genSteps("r", 4)...)
	data, err := stepsDef.encode(rows)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "steps", "000003.parquet"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.LastStep = 3
	if err := writeManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	w, last, err := Open(dir, testManifest("r"))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if last != 3 {
		t.Fatalf("last step %d, want 3", last)
	}
	r, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustSameRun(t, r, scenarioRun("r", 3))
	if _, err := os.Stat(filepath.Join(dir, "steps", "000005.parquet")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("segment past the last step survived resume: %v", err)
	}
	want, err := stepsDef.encode(append(genSteps("r", 2), genSteps("r", 3)...))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "steps", "000003.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("rewritten segment differs from a fresh segment of the kept rows")
	}
}

// TestSegmentNames checks the step <-> file name mapping both ways.
func TestSegmentNames(t *testing.T) {
	tests := []struct {
		name string
		step int64
		ok   bool
	}{
		{"000000.parquet", 0, true},
		{"000012.parquet", 12, true},
		{"1234567.parquet", 1234567, true},
		{"12.parquet", 0, false},
		{"0000012.parquet", 0, false},
		{"000012.parquet.tmp", 0, false},
		{"abcdef.parquet", 0, false},
	}
	for _, tc := range tests {
		step, ok := segmentStep(tc.name)
		if ok != tc.ok || step != tc.step {
			t.Errorf("segmentStep(%q) = %d, %v; want %d, %v", tc.name, step, ok, tc.step, tc.ok)
		}
		if tc.ok && segmentFile(tc.step) != tc.name {
			t.Errorf("segmentFile(%d) = %q", tc.step, segmentFile(tc.step))
		}
	}
}

// TestRewind: a loop whose checkpoint is older than its logs rewinds to the
// checkpoint's step and regenerates the same segments.
func TestRewind(t *testing.T) {
	ref := filepath.Join(t.TempDir(), "ref")
	if err := writeScenario(ref, "r", 8); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		to   int64
		want string // error text, "" for success
	}{
		{"to a commit", 3, ""},
		{"to the start", -1, ""},
		{"to the last commit", 7, ""},
		{"inside a segment", 4, "not a commit boundary"},
		{"past the end", 8, "outside -1..7"},
		{"before the start", -2, "outside -1..7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "r")
			if err := writeScenario(dir, "r", 8); err != nil {
				t.Fatal(err)
			}
			w, last, err := Open(dir, testManifest("r"))
			if err != nil {
				t.Fatal(err)
			}
			if last != 7 {
				t.Fatalf("last %d, want 7", last)
			}
			err = w.Rewind(tc.to)
			w.Close()
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want %q", err, tc.want)
				}
				r, err := ReadRun(dir)
				if err != nil {
					t.Fatal(err)
				}
				mustSameRun(t, r, scenarioRun("r", 7))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r, err := ReadRun(dir)
			if err != nil {
				t.Fatal(err)
			}
			if r.Manifest.LastStep != tc.to {
				t.Fatalf("manifest last step %d, want %d", r.Manifest.LastStep, tc.to)
			}
			mustSameRun(t, r, scenarioRun("r", tc.to))
			if err := writeScenario(dir, "r", 8); err != nil {
				t.Fatal(err)
			}
			got, want := treeFiles(t, dir), treeFiles(t, ref)
			for name, data := range want {
				if name != ManifestFile && got[name] != data {
					t.Fatalf("%s differs after rewind and regeneration", name)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d files after regeneration, want %d", len(got), len(want))
			}
		})
	}
}
