package runlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/marlowlab/marlow/harness/internal/atomicfile"
)

// recoverRun brings a run directory back to its last committed step. It
// returns the committed segments (paths relative to dir) that it rewrote or
// removed because they held rows past that step.
func recoverRun(dir string, last int64) (changed []string, err error) {
	if err := removeIfExists(filepath.Join(dir, ManifestFile+tmpSuffix)); err != nil {
		return nil, err
	}
	for _, tb := range Tables {
		td := filepath.Join(dir, tb)
		entries, err := os.ReadDir(td)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(td, 0o755); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			name := e.Name()
			p := filepath.Join(td, name)
			if filepath.Ext(name) == tmpSuffix {
				if err := os.Remove(p); err != nil {
					return nil, err
				}
				continue
			}
			step, ok := segmentStep(name)
			if !ok {
				continue
			}
			if step > last {
				if err := os.Remove(p); err != nil {
					return nil, err
				}
				continue
			}
			rewritten, err := truncateSegment(tb, p, last)
			if err != nil {
				return nil, err
			}
			if rewritten {
				changed = append(changed, tb+"/"+name)
			}
		}
		if err := atomicfile.SyncDir(td); err != nil {
			return nil, err
		}
	}
	return changed, nil
}

// truncateSegment drops rows with Step > last from a committed segment,
// rewriting it (or removing it when nothing is left). Segments written by a
// Writer never hold such rows; this repairs runs whose manifest was rewound.
func truncateSegment(table, path string, last int64) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	switch table {
	case TableSteps:
		return truncateRows(stepsDef, path, data, last)
	case TableEvals:
		return truncateRows(evalsDef, path, data, last)
	case TableSamples:
		return truncateRows(samplesDef, path, data, last)
	case TablePrompts:
		return truncateRows(promptsDef, path, data, last)
	case TableTiming:
		return truncateRows(timingDef, path, data, last)
	}
	return false, fmt.Errorf("unknown table %q", table)
}

// minStep returns the smallest row step of a segment file (ok false when
// it has no rows).
func minStep(table, path string) (step int64, ok bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false, err
	}
	switch table {
	case TableSteps:
		return minRowStep(stepsDef, path, data)
	case TableEvals:
		return minRowStep(evalsDef, path, data)
	case TableSamples:
		return minRowStep(samplesDef, path, data)
	case TablePrompts:
		return minRowStep(promptsDef, path, data)
	case TableTiming:
		return minRowStep(timingDef, path, data)
	}
	return 0, false, fmt.Errorf("unknown table %q", table)
}

func minRowStep[R any](t *tableDef[R], path string, data []byte) (int64, bool, error) {
	rows, err := t.decode(data)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) == 0 {
		return 0, false, nil
	}
	m := t.step(&rows[0])
	for i := range rows {
		m = min(m, t.step(&rows[i]))
	}
	return m, true, nil
}

func truncateRows[R any](t *tableDef[R], path string, data []byte, last int64) (bool, error) {
	rows, err := t.decode(data)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	kept := slices.DeleteFunc(slices.Clone(rows), func(r R) bool { return t.step(&r) > last })
	if len(kept) == len(rows) {
		return false, nil
	}
	if len(kept) == 0 {
		return true, os.Remove(path)
	}
	out, err := t.encode(kept)
	if err != nil {
		return false, err
	}
	return true, writeAtomic(path, out, t.name)
}

// Rewind discards every commit after step, which must be a commit
// boundary (a step the run committed at, or -1), and discards the rows
// added since the last commit. A training loop whose checkpoint is older
// than the logs (it crashed after committing the logs of a step but before
// saving that step's checkpoint) rewinds to the checkpoint's step and
// regenerates the rest; the regenerated segments get the same names and
// bytes. The manifest is rewound first, so a crash during Rewind leaves
// the rewound state for the next Open to finish.
func (w *Writer) Rewind(step int64) error {
	if err := w.usable(); err != nil {
		return err
	}
	if step < -1 || step > w.m.LastStep {
		return fmt.Errorf("run %s: rewind to step %d: outside -1..%d", w.dir, step, w.m.LastStep)
	}
	w.steps, w.evals, w.samples, w.prompts, w.timing = nil, nil, nil, nil, nil
	if step == w.m.LastStep {
		// forget the hashes of the discarded rows' prompts
		seen, err := committedPrompts(w.dir, step)
		if err != nil {
			w.err = err
			return fmt.Errorf("run %s: rewind: %w", w.dir, err)
		}
		w.seen = seen
		return nil
	}
	for _, tb := range Tables {
		entries, err := os.ReadDir(filepath.Join(w.dir, tb))
		if err != nil {
			return fmt.Errorf("run %s: rewind: %w", w.dir, err)
		}
		for _, e := range entries {
			c, ok := segmentStep(e.Name())
			if !ok || c <= step || c > w.m.LastStep {
				continue
			}
			first, ok, err := minStep(tb, filepath.Join(w.dir, tb, e.Name()))
			if err != nil {
				return fmt.Errorf("run %s: rewind: %w", w.dir, err)
			}
			if ok && first <= step {
				return fmt.Errorf("run %s: rewind to step %d: not a commit boundary (%s/%s holds rows of step %d)", w.dir, step, tb, e.Name(), first)
			}
		}
	}
	m := w.m
	m.LastStep = step
	m.Updated = now().Format(time.RFC3339)
	if err := w.rewindInventory(&m, step); err != nil {
		return err
	}
	if err := writeManifest(w.dir, m); err != nil {
		return err
	}
	w.m = m
	if _, err := recoverRun(w.dir, step); err != nil {
		w.err = err
		return fmt.Errorf("run %s: rewind: %w", w.dir, err)
	}
	seen, err := committedPrompts(w.dir, step)
	if err != nil {
		w.err = err
		return fmt.Errorf("run %s: rewind: %w", w.dir, err)
	}
	w.seen = seen
	return nil
}

// SegmentStep is the commit step of a segment file name ("000020.parquet"
// is 20); ok is false for any other name.
func SegmentStep(name string) (step int64, ok bool) { return segmentStep(name) }

// RollBack discards the commits of a closed run folder after step, a step
// the run committed at whose checkpoint folder ckptOf(step) exists (a
// checkpoint is written only at a commit, so its step is a commit
// boundary). Unlike Rewind it reads no segment of a later commit: those
// are removed unread, so a damaged one (truncated, altered) is no
// obstacle. The manifest is rewritten first, naming step and listing the
// segments up to step and the files of that checkpoint, so a crash during
// RollBack leaves the rolled-back state for the next Open to finish.
func RollBack(dir string, step int64, ckptOf func(step int64) string) error {
	m, err := ReadManifest(dir)
	if err != nil {
		return fmt.Errorf("roll back run %s: %w", dir, err)
	}
	if step < 0 || step >= m.LastStep {
		return fmt.Errorf("roll back run %s to step %d: outside 0..%d", dir, step, m.LastStep-1)
	}
	if st, err := os.Stat(ckptOf(step)); err != nil || !st.IsDir() {
		return fmt.Errorf("roll back run %s to step %d: no checkpoint folder %s", dir, step, ckptOf(step))
	}
	w := &Writer{dir: dir, m: m, ckpt: ckptOf}
	m.LastStep = step
	m.Updated = now().Format(time.RFC3339)
	if err := w.rewindInventory(&m, step); err != nil {
		return fmt.Errorf("roll back run %s: %w", dir, err)
	}
	if err := writeManifest(dir, m); err != nil {
		return fmt.Errorf("roll back run %s: %w", dir, err)
	}
	if _, err := recoverRun(dir, step); err != nil {
		return fmt.Errorf("roll back run %s: %w", dir, err)
	}
	return nil
}
