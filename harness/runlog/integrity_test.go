package runlog

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// writePartial writes the scenario run through step 4 (commits at 1 and 3)
// and leaves it running, as a crash would.
func writePartial(t *testing.T, dir, run string) {
	t.Helper()
	w, _, err := Open(dir, testManifest(run))
	if err != nil {
		t.Fatal(err)
	}
	for step := int64(0); step <= 4; step++ {
		s, e, sm, tm := scenarioRows(run, step)
		if err := errors.Join(w.AddSteps(s...), w.AddEvals(e...), w.AddSamples(sm...), w.AddTiming(tm...)); err != nil {
			t.Fatal(err)
		}
		if step%2 == 1 {
			if err := w.Commit(step); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// tamper is one way of damaging a committed file.
type tamper struct {
	name string
	do   func(t *testing.T, path string)
	want []error // the problem must wrap one of these
}

func rewriteSteps(t *testing.T, p string, edit func([]StepRow) []StepRow) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := stepsDef.decode(data)
	if err != nil {
		t.Fatal(err)
	}
	out, err := stepsDef.encode(edit(rows))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

var segmentTampers = []tamper{
	{"deleted", func(t *testing.T, p string) {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}, []error{ErrMissingFile}},
	{"truncated", func(t *testing.T, p string) {
		st, _ := os.Stat(p)
		if err := os.Truncate(p, st.Size()-7); err != nil {
			t.Fatal(err)
		}
	}, []error{ErrFileSize, ErrTruncated, ErrCorrupt, ErrBadMagic}},
	{"extended with bytes", func(t *testing.T, p string) {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("PAR1PAR1"))
		f.Close()
	}, []error{ErrFileSize, ErrCorrupt, ErrTruncated, ErrBadMagic}},
	{"extended with a valid row", func(t *testing.T, p string) {
		rewriteSteps(t, p, func(r []StepRow) []StepRow {
			x := r[0]
			x.Role = "injected"
			return append(r, x)
		})
	}, []error{ErrFileSize, ErrFileHash}},
	{"altered to a valid segment", func(t *testing.T, p string) {
		rewriteSteps(t, p, func(r []StepRow) []StepRow { r[1].Loss += 1; return r })
	}, []error{ErrFileHash, ErrFileSize}},
	{"altered in place", func(t *testing.T, p string) {
		data, _ := os.ReadFile(p)
		data[len(data)/2] ^= 0x5a
		os.WriteFile(p, data, 0o644)
	}, []error{ErrFileHash, ErrCorrupt}},
}

// TestTamperedSegments damages a committed segment of a done and of a
// partial run in every way, and requires Check and the readers to name it.
func TestTamperedSegments(t *testing.T) {
	for _, kind := range []string{"done", "partial"} {
		for _, tp := range segmentTampers {
			t.Run(kind+"/"+tp.name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "run")
				if kind == "done" {
					if err := writeScenario(dir, "r", 8); err != nil {
						t.Fatal(err)
					}
				} else {
					writePartial(t, dir, "r")
				}
				if probs := Check(dir); len(probs) != 0 {
					t.Fatalf("intact run has problems: %v", probs)
				}
				seg := filepath.Join(dir, "steps", "000003.parquet")
				tp.do(t, seg)
				probs := Check(dir)
				found := false
				for _, p := range probs {
					if p.Path == seg && isAny(p.Err, tp.want) {
						found = true
					}
				}
				if !found {
					t.Errorf("Check: no problem naming %s with %v; got %v", seg, tp.want, probs)
				}
				_, err := ReadRun(dir)
				if err == nil || !strings.Contains(err.Error(), seg) || !isAny(err, tp.want) {
					t.Errorf("ReadRun: err = %v, want one naming %s and wrapping %v", err, seg, tp.want)
				}
			})
		}
	}
}

// TestUnlistedSegment adds a valid segment at a committed step that the
// manifest never committed.
func TestUnlistedSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := writeScenario(dir, "r", 8); err != nil {
		t.Fatal(err)
	}
	// Step 2 lies between the commits at 1 and 3, so a segment named after
	// it was never committed; its rows are in range, so before inventories
	// only the duplicate-row check could notice it.
	ev, err := evalsDef.encode(genEvals("r", 2))
	if err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(dir, "evals", "000002.parquet")
	if err := os.WriteFile(extra, ev, 0o644); err != nil {
		t.Fatal(err)
	}
	probs := Check(dir)
	found := false
	for _, p := range probs {
		found = found || p.Path == extra && errors.Is(p.Err, ErrUnlistedFile)
	}
	if !found {
		t.Errorf("Check: no unlisted-file problem for %s: %v", extra, probs)
	}
	if _, err := ReadRun(dir); err == nil || !strings.Contains(err.Error(), extra) {
		t.Errorf("ReadRun: err = %v, want one naming %s", err, extra)
	}
}

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// TestCheckpointInventory tracks a checkpoint folder per commit: the
// manifest lists the files of the last commit's checkpoint only; VerifyRun
// finds a changed, a missing and an extra checkpoint file; Rewind lists the
// checkpoint of the step it rewinds to.
func TestCheckpointInventory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	ckpt := func(step int64) string { return filepath.Join(dir, "ckpt", "step-"+strconv.FormatInt(step, 10)) }
	w, _, err := Open(dir, testManifest("r"))
	if err != nil {
		t.Fatal(err)
	}
	w.TrackCheckpoints(ckpt)
	for step := int64(0); step <= 3; step++ {
		s, e, sm, tm := scenarioRows("r", step)
		if err := errors.Join(w.AddSteps(s...), w.AddEvals(e...), w.AddSamples(sm...), w.AddTiming(tm...)); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(ckpt(step), "engine"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range map[string]string{"state.json": "step " + strconv.FormatInt(step, 10), "engine/adapter.bin": strings.Repeat("w", int(step)+10)} {
			if err := os.WriteFile(filepath.Join(ckpt(step), name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(step); err != nil {
			t.Fatal(err)
		}
	}
	inv := w.Manifest().Inventory
	if len(inv.Checkpoint) != 2 || inv.Checkpoint[0].Path != "ckpt/step-3/engine/adapter.bin" || inv.Checkpoint[1].Path != "ckpt/step-3/state.json" {
		t.Fatalf("checkpoint inventory %+v, want the two files of step 3", inv.Checkpoint)
	}
	if n := countSegments(t, dir); len(inv.Segments) != n {
		t.Fatalf("%d segments listed, %d on disk", len(inv.Segments), n)
	}
	if probs := VerifyRun(dir, VerifyOptions{Hashes: true}); len(probs) != 0 {
		t.Fatalf("intact run: %v", probs)
	}
	if err := w.Rewind(1); err != nil {
		t.Fatal(err)
	}
	inv = w.Manifest().Inventory
	if len(inv.Checkpoint) != 2 || !strings.HasPrefix(inv.Checkpoint[0].Path, "ckpt/step-1/") || len(inv.Segments) != countSegments(t, dir) {
		t.Fatalf("after Rewind(1): checkpoint %+v, %d segments", inv.Checkpoint, len(inv.Segments))
	}
	w.Close()
	state := filepath.Join(ckpt(1), "state.json")
	if err := os.WriteFile(state, []byte("step 7"), 0o644); err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(ckpt(1), "engine", "extra.bin")
	if err := os.WriteFile(extra, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	adapter := filepath.Join(ckpt(1), "engine", "adapter.bin")
	if err := os.Remove(adapter); err != nil {
		t.Fatal(err)
	}
	got := map[string]error{}
	for _, p := range VerifyRun(dir, VerifyOptions{Hashes: true}) {
		got[p.Path] = p.Err
	}
	for p, want := range map[string]error{state: ErrFileHash, extra: ErrUnlistedFile, adapter: ErrMissingFile} {
		if !errors.Is(got[p], want) {
			t.Errorf("%s: %v, want %v (all: %v)", p, got[p], want, got)
		}
	}
	if probs := VerifyRun(dir, VerifyOptions{}); len(probs) != 2 {
		t.Errorf("sizes only: %v; want the missing and the extra file (the altered one keeps its size)", probs)
	}
}

func countSegments(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, tb := range Tables {
		m, err := filepath.Glob(filepath.Join(dir, tb, "*.parquet"))
		if err != nil {
			t.Fatal(err)
		}
		n += len(m)
	}
	return n
}

// TestArchiveRefusesDamagedRun: a run with an altered segment is not packed.
func TestArchiveRefusesDamagedRun(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "exp", "r")
	if err := writeScenario(dir, "r", 6); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "steps", "000003.parquet")
	rewriteSteps(t, seg, func(r []StepRow) []StepRow { r[0].Loss += 1; return r })
	err := Archive(root, filepath.Join(t.TempDir(), "a.tar.zst"))
	if err == nil || !strings.Contains(err.Error(), seg) || !errors.Is(err, ErrFileHash) && !errors.Is(err, ErrFileSize) {
		t.Fatalf("Archive: %v; want a refusal naming %s", err, seg)
	}
}

// TestLegacyRunGetsInventoryOnResume: a run written before inventories
// existed reads and checks as before, and gets an inventory of what it has
// committed when it is reopened.
func TestLegacyRunGetsInventoryOnResume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	writePartial(t, dir, "r")
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := m.Inventory
	m.Inventory = nil
	if err := writeManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	if probs := Check(dir); len(probs) != 0 {
		t.Fatalf("legacy run: %v", probs)
	}
	if _, err := ReadRun(dir); err != nil {
		t.Fatal(err)
	}
	w, _, err := Open(dir, testManifest("r"))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	got := w.Manifest().Inventory
	if got == nil || !slices.Equal(got.Segments, want.Segments) {
		t.Fatalf("inventory after resume %+v, want %+v", got, want)
	}
}
