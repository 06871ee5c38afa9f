package runner

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/marlowlab/marlow/harness/grpo"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/spec"
)

// benchRun writes a synthetic run folder the size of the largest run of a
// spec, by the plan's estimate (which matches the smoke experiment's
// logs: 3.5 MiB estimated, 3.4 MiB written): as many commits, about as many
// log bytes (samples rows with pseudo-random text), and a checkpoint of
// the estimated size. It returns the folder and its bytes.
func benchRun(b *testing.B, specFile string) (string, int64) {
	b.Helper()
	s, err := spec.Load(specFile)
	if err != nil {
		b.Fatal(err)
	}
	runs, err := spec.Plan(s)
	if err != nil {
		b.Fatal(err)
	}
	var big Footprint
	for _, r := range runs {
		if f := EstimateFootprint(r); f.Bytes() > big.Bytes() {
			big = f
		}
	}
	dir := filepath.Join(b.TempDir(), "run")
	w, _, err := runlog.Open(dir, runlog.Manifest{RunID: "bench", ConfigHash: "h", Status: runlog.StatusRunning})
	if err != nil {
		b.Fatal(err)
	}
	ckptDir := filepath.Join(dir, "ckpt")
	w.TrackCheckpoints(func(step int64) string { return grpo.CheckpointPath(ckptDir, step) })
	rng := rand.New(rand.NewPCG(1, 2))
	text := func(n int) string {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte('a' + rng.IntN(26))
		}
		return string(buf)
	}
	perCommit := big.LogBytes / int64(max(big.Commits, 1))
	rowsPerCommit := max(1, int(perCommit/700))
	ckptBytes := max(big.CheckpointBytes, 0)
	for c := int64(0); c < int64(big.Commits); c++ {
		if err := w.AddSteps(runlog.StepRow{Step: c, Policy: "shared", Role: "*"}); err != nil {
			b.Fatal(err)
		}
		if err := w.AddEvals(runlog.EvalRow{Step: c, Workflow: "voting", Split: "val", Role: "*"}); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < rowsPerCommit; i++ {
			if err := w.AddSamples(runlog.SampleRow{Step: c, Workflow: "voting", Split: "val", ProblemID: fmt.Sprint(i), Agent: "generator0", Role: "generator", Prompt: text(200), Completion: text(600)}); err != nil {
				b.Fatal(err)
			}
		}
		cp := filepath.Join(grpo.CheckpointPath(ckptDir, c), "engine")
		if err := os.MkdirAll(cp, 0o755); err != nil {
			b.Fatal(err)
		}
		data := make([]byte, ckptBytes)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(cp, "adapter_model.safetensors"), data, 0o644); err != nil {
			b.Fatal(err)
		}
		if err := w.Commit(c); err != nil {
			b.Fatal(err)
		}
		if c > 0 {
			os.RemoveAll(grpo.CheckpointPath(ckptDir, c-1))
		}
	}
	if err := w.SetStatus(runlog.StatusDone, ""); err != nil {
		b.Fatal(err)
	}
	var total int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			total += fi.Size()
		}
		return nil
	})
	b.Logf("%s: largest run estimated %d files, %d log bytes, %d checkpoint bytes; synthetic folder %d bytes", filepath.Base(specFile), big.Files, big.LogBytes, big.CheckpointBytes, total)
	return dir, total
}

// BenchmarkVerifyRun measures the verification of a run folder against its
// manifest's inventory: sizes only (what `run` does before skipping a done
// run) and SHA-256 of every file (`run --verify`, resume, `check`).
func BenchmarkVerifyRun(b *testing.B) {
	for _, sc := range []struct{ name, file string }{{"smoke", "../../seeds/smoke.yaml"}, {"mini", "../../seeds/mini.yaml"}} {
		dir, total := benchRun(b, sc.file)
		for _, hashes := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/hashes=%v", sc.name, hashes), func(b *testing.B) {
				if hashes {
					b.SetBytes(total)
				}
				for b.Loop() {
					if probs := runlog.VerifyRun(dir, runlog.VerifyOptions{Hashes: hashes}); len(probs) > 0 {
						b.Fatal(probs)
					}
				}
			})
		}
		// ReadRun hashes each segment it reads against the inventory; the
		// same folder with the inventory removed from its manifest (as
		// written before inventories existed) reads without hashing.
		legacy := legacyCopy(b, dir)
		for _, c := range []struct{ name, dir string }{{"read-run", dir}, {"read-run-no-inventory", legacy}} {
			b.Run(sc.name+"/"+c.name, func(b *testing.B) {
				for b.Loop() {
					if _, err := runlog.ReadRun(c.dir); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// legacyCopy copies a run's manifest and segments into a new folder,
// dropping the manifest's inventory.
func legacyCopy(b *testing.B, dir string) string {
	b.Helper()
	out := filepath.Join(b.TempDir(), "legacy")
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(out, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == runlog.ManifestFile {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				return err
			}
			delete(m, "inventory")
			if data, err = json.Marshal(m); err != nil {
				return err
			}
		}
		return os.WriteFile(filepath.Join(out, rel), data, 0o644)
	})
	if err != nil {
		b.Fatal(err)
	}
	return out
}
