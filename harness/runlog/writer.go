package runlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/marlowlab/marlow/harness/internal/atomicfile"
)

// ManifestFile is the name of a run's manifest.
const ManifestFile = "manifest.json"

// JobLogFile is the name of the log a batch system (Slurm) appends a run's
// output to, inside the run folder. It may exist before the run's first
// Open; the readers and Archive ignore it.
const JobLogFile = "job.log"

const tmpSuffix = atomicfile.TmpSuffix

var segmentName = regexp.MustCompile(`^([0-9]{6,19})\.parquet$`)

// segmentFile is the file name of the segment committed at step.
func segmentFile(step int64) string { return fmt.Sprintf("%06d.parquet", step) }

// segmentStep parses a segment file name; ok is false for other names.
func segmentStep(name string) (int64, bool) {
	m := segmentName.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || segmentFile(n) != name {
		return 0, false
	}
	return n, true
}

// now is the clock of manifest timestamps; tests replace it.
var now = func() time.Time { return time.Now().UTC() }

// crashHook, when set, is called at the named points of a commit so that
// the crash test can kill the process there.
var crashHook func(point string)

func hook(point string) {
	if crashHook != nil {
		crashHook(point)
	}
}

// Writer appends rows to a run directory. It buffers the rows added since
// the last commit (one segment per table) and writes them at Commit. A
// Writer is not safe for concurrent use.
type Writer struct {
	dir     string
	m       Manifest
	steps   []StepRow
	evals   []EvalRow
	samples []SampleRow
	prompts []PromptRow // prompts first used by the buffered samples
	timing  []TimingRow
	// seen maps the SHA-256 of each prompt committed to prompts/ (or
	// buffered in prompts) to its prompt_id, so that each is written once
	// per run.
	seen   map[[32]byte]int64
	err    error // set when a commit failed half-way; the run must be reopened
	closed bool
	ckpt   func(step int64) string // checkpoint folder of a step (TrackCheckpoints)
}

// Open creates the run directory dir with manifest m, or reopens an
// existing run for resume. On resume it checks that m names the same run
// and config, deletes uncommitted temporaries, segments committed after the
// manifest's last committed step and any rows past that step (rewriting
// such a segment deterministically), and keeps the creation time. It
// returns the last committed step, -1 for a new run. Fields of m other than
// the identity are taken from m; Status becomes running.
func Open(dir string, m Manifest) (*Writer, int64, error) {
	if m.RunID == "" {
		return nil, 0, fmt.Errorf("open run %s: manifest has no run id", dir)
	}
	t := now().Format(time.RFC3339)
	m.SchemaVersion = SchemaVersion
	m.Status = StatusRunning
	m.Error = ""
	m.Updated = t
	old, err := ReadManifest(dir)
	switch {
	case err == nil:
		if old.RunID != m.RunID {
			return nil, 0, fmt.Errorf("open run %s: directory holds run %q, not %q", dir, old.RunID, m.RunID)
		}
		if old.ConfigHash != m.ConfigHash {
			return nil, 0, fmt.Errorf("open run %s: directory holds config hash %q, resuming with %q", dir, old.ConfigHash, m.ConfigHash)
		}
		if old.SchemaVersion != SchemaVersion {
			return nil, 0, fmt.Errorf("open run %s: %w: the run was written with log schema version %d and cannot be resumed in version %d (it is still read); "+
				"run it again from the start with --redo, or finish it with the marlow of its commit", dir, ErrSchemaVersion, old.SchemaVersion, SchemaVersion)
		}
		changed, err := recoverRun(dir, old.LastStep)
		if err != nil {
			return nil, 0, fmt.Errorf("open run %s for resume: %w", dir, err)
		}
		m.Created = old.Created
		m.LastStep = old.LastStep
		m.Inventory, err = resumeInventory(dir, old.Inventory, old.LastStep, changed)
		if err != nil {
			return nil, 0, fmt.Errorf("open run %s for resume: %w", dir, err)
		}
		if m.Inventory == nil {
			// A run written before inventories existed: list what it has
			// committed (the runner checks a run before resuming it).
			if m.Inventory, err = inventoryFromDisk(dir, m.LastStep); err != nil {
				return nil, 0, fmt.Errorf("open run %s for resume: %w", dir, err)
			}
		}
	case errors.Is(err, ErrMissingManifest):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, 0, fmt.Errorf("open run: %w", err)
		}
		if err := removeIfExists(filepath.Join(dir, ManifestFile+tmpSuffix)); err != nil {
			return nil, 0, fmt.Errorf("open run: %w", err)
		}
		if leftovers, _ := os.ReadDir(dir); slices.ContainsFunc(leftovers, func(e os.DirEntry) bool { return e.Name() != JobLogFile }) {
			return nil, 0, fmt.Errorf("open run %s: %w, but the directory is not empty", dir, ErrMissingManifest)
		}
		if m.Created == "" {
			m.Created = t
		}
		m.LastStep = -1
		m.Inventory = &Inventory{Segments: []SegmentEntry{}, Checkpoint: []FileEntry{}}
		// The manifest comes first: a crash before the table folders exist
		// leaves a run that reopens (recoverRun creates them).
		if err := writeManifest(dir, m); err != nil {
			return nil, 0, err
		}
		for _, tb := range Tables {
			if err := os.Mkdir(filepath.Join(dir, tb), 0o755); err != nil {
				return nil, 0, fmt.Errorf("open run: %w", err)
			}
		}
		if err := atomicfile.SyncDir(dir); err != nil {
			return nil, 0, fmt.Errorf("open run: %w", err)
		}
		return &Writer{dir: dir, m: m, seen: map[[32]byte]int64{}}, m.LastStep, nil
	default:
		return nil, 0, fmt.Errorf("open run: %w", err)
	}
	if err := writeManifest(dir, m); err != nil {
		return nil, 0, err
	}
	seen, err := committedPrompts(dir, m.LastStep)
	if err != nil {
		return nil, 0, fmt.Errorf("open run %s for resume: %w", dir, err)
	}
	return &Writer{dir: dir, m: m, seen: seen}, m.LastStep, nil
}

// committedPrompts maps the SHA-256 of each prompt committed up to step
// last in a run folder to its prompt_id.
func committedPrompts(dir string, last int64) (map[[32]byte]int64, error) {
	s := source{fsys: os.DirFS(dir), label: dir}
	rows, err := readTableRows(s, ".", promptsDef, last, nil)
	if err != nil {
		return nil, err
	}
	seen := make(map[[32]byte]int64, len(rows))
	for i, r := range rows {
		if r.ID != int64(i)+1 {
			return nil, fmt.Errorf("%s: %w: prompt row %d has prompt_id %d, want %d", filepath.Join(dir, TablePrompts), ErrCorrupt, i, r.ID, i+1)
		}
		seen[promptKey(r.Prompt)] = r.ID
	}
	return seen, nil
}

// Manifest returns the run's current manifest.
func (w *Writer) Manifest() Manifest { return w.m }

// Dir returns the run directory.
func (w *Writer) Dir() string { return w.dir }

func (w *Writer) usable() error {
	if w.closed {
		return fmt.Errorf("run %s: writer is closed", w.dir)
	}
	if w.err != nil {
		return fmt.Errorf("run %s: an earlier commit failed, reopen the run: %w", w.dir, w.err)
	}
	return nil
}

// checkRow fills an empty run id and refuses rows of another run or of an
// already committed step.
func checkRow(w *Writer, table string, i int, runID *string, step int64) error {
	if *runID == "" {
		*runID = w.m.RunID
	} else if *runID != w.m.RunID {
		return fmt.Errorf("run %s: %s row %d: %w: run id %q, want %q", w.dir, table, i, ErrBadRow, *runID, w.m.RunID)
	}
	if step <= w.m.LastStep {
		return fmt.Errorf("run %s: %s row %d: %w: step %d is already committed (last committed step %d)", w.dir, table, i, ErrBadRow, step, w.m.LastStep)
	}
	if step < 0 {
		return fmt.Errorf("run %s: %s row %d: %w: negative step %d", w.dir, table, i, ErrBadRow, step)
	}
	return nil
}

func addRows[R any](w *Writer, t *tableDef[R], buf *[]R, rows []R) error {
	if err := w.usable(); err != nil {
		return err
	}
	start := len(*buf)
	*buf = append(*buf, rows...)
	for i := start; i < len(*buf); i++ {
		r := &(*buf)[i]
		if err := checkRow(w, t.name, i-start, t.run(r), t.step(r)); err != nil {
			clear((*buf)[start:])
			*buf = (*buf)[:start]
			return err
		}
	}
	return nil
}

// AddSteps buffers steps rows for the next commit.
func (w *Writer) AddSteps(rows ...StepRow) error { return addRows(w, stepsDef, &w.steps, rows) }

// AddEvals buffers evals rows for the next commit.
func (w *Writer) AddEvals(rows ...EvalRow) error { return addRows(w, evalsDef, &w.evals, rows) }

// AddSamples buffers samples rows for the next commit. Each row's prompt is
// stored once per run: a prompt the run has not written before (by the
// SHA-256 of its text) gets the next prompt_id and is buffered for prompts/
// with the row's step; the row keeps only the id.
func (w *Writer) AddSamples(rows ...SampleRow) error {
	start := len(w.samples)
	if err := addRows(w, samplesDef, &w.samples, rows); err != nil {
		return err
	}
	for i := start; i < len(w.samples); i++ {
		r := &w.samples[i]
		if r.Prompt == "" {
			r.promptID = 0
			continue
		}
		k := promptKey(r.Prompt)
		if id, ok := w.seen[k]; ok {
			r.promptID = id
			continue
		}
		r.promptID = int64(len(w.seen)) + 1
		w.seen[k] = r.promptID
		w.prompts = append(w.prompts, PromptRow{RunID: r.RunID, Step: r.Step, ID: r.promptID, Prompt: r.Prompt})
	}
	return nil
}

// AddTiming buffers timing rows for the next commit.
func (w *Writer) AddTiming(rows ...TimingRow) error { return addRows(w, timingDef, &w.timing, rows) }

// pending is one table's encoded segment waiting to be renamed.
type pending struct {
	table, tmp, final string
}

// Commit makes the rows added since the last commit durable as the segment
// of step: each table with rows gets <table>/<step>.parquet, written to a
// temporary name, fsynced and renamed; then the manifest's last committed
// step is advanced atomically. A crash at any point leaves either the old
// or the new committed state. Rows must have Step <= step, and step must
// exceed the last committed step.
func (w *Writer) Commit(step int64) error {
	if err := w.usable(); err != nil {
		return err
	}
	if step <= w.m.LastStep {
		return fmt.Errorf("run %s: commit step %d is not after the last committed step %d", w.dir, step, w.m.LastStep)
	}
	if err := checkMaxStep(stepsDef, w.steps, step); err != nil {
		return fmt.Errorf("run %s: %w", w.dir, err)
	}
	if err := checkMaxStep(evalsDef, w.evals, step); err != nil {
		return fmt.Errorf("run %s: %w", w.dir, err)
	}
	if err := checkMaxStep(samplesDef, w.samples, step); err != nil {
		return fmt.Errorf("run %s: %w", w.dir, err)
	}
	if err := checkMaxStep(timingDef, w.timing, step); err != nil {
		return fmt.Errorf("run %s: %w", w.dir, err)
	}
	if err := w.commit(step); err != nil {
		w.err = err
		return err
	}
	return nil
}

func checkMaxStep[R any](t *tableDef[R], rows []R, step int64) error {
	for i := range rows {
		if s := t.step(&rows[i]); s > step {
			return fmt.Errorf("%s row with step %d in the commit of step %d: %w", t.name, s, step, ErrBadRow)
		}
	}
	return nil
}

func (w *Writer) commit(step int64) error {
	var ps []pending
	var added []SegmentEntry
	write := func(table string, encode func() ([]byte, error), n int) error {
		if n == 0 {
			return nil
		}
		data, err := encode()
		if err != nil {
			return fmt.Errorf("run %s: %w", w.dir, err)
		}
		final := filepath.Join(w.dir, table, segmentFile(step))
		tmp := final + tmpSuffix
		if err := writeSynced(tmp, data, table); err != nil {
			return fmt.Errorf("run %s: write segment: %w", w.dir, err)
		}
		ps = append(ps, pending{table, tmp, final})
		added = append(added, SegmentEntry{Path: table + "/" + segmentFile(step), Bytes: int64(len(data)), Rows: int64(n), SHA256: sha256Hex(data)})
		return nil
	}
	if err := write(TableSteps, func() ([]byte, error) { return stepsDef.encode(w.steps) }, len(w.steps)); err != nil {
		return err
	}
	if err := write(TableEvals, func() ([]byte, error) { return evalsDef.encode(w.evals) }, len(w.evals)); err != nil {
		return err
	}
	if err := write(TableSamples, func() ([]byte, error) { return samplesDef.encode(w.samples) }, len(w.samples)); err != nil {
		return err
	}
	if err := write(TablePrompts, func() ([]byte, error) { return promptsDef.encode(w.prompts) }, len(w.prompts)); err != nil {
		return err
	}
	if err := write(TableTiming, func() ([]byte, error) { return timingDef.encode(w.timing) }, len(w.timing)); err != nil {
		return err
	}
	for _, p := range ps {
		if err := os.Rename(p.tmp, p.final); err != nil {
			return fmt.Errorf("run %s: commit segment: %w", w.dir, err)
		}
		hook("renamed:" + p.table)
	}
	for _, p := range ps {
		if err := atomicfile.SyncDir(filepath.Dir(p.final)); err != nil {
			return fmt.Errorf("run %s: %w", w.dir, err)
		}
	}
	hook("segments-committed")
	m := w.m
	m.LastStep = step
	m.Updated = now().Format(time.RFC3339)
	m.Inventory = withSegments(m.Inventory, added)
	if w.ckpt != nil {
		files, err := w.inventoryCheckpoint(step)
		if err != nil {
			return err
		}
		m.Inventory.Checkpoint = files
	}
	if err := writeManifest(w.dir, m); err != nil {
		return err
	}
	hook("manifest-committed")
	w.m = m
	w.steps, w.evals, w.samples, w.prompts, w.timing = nil, nil, nil, nil, nil
	return nil
}

// SetStatus records the run's status (running, done, failed or
// interrupted) and error text in the manifest.
func (w *Writer) SetStatus(status, errText string) error {
	if w.closed {
		return fmt.Errorf("run %s: writer is closed", w.dir)
	}
	switch status {
	case StatusRunning, StatusDone, StatusFailed, StatusInterrupted:
	default:
		return fmt.Errorf("run %s: unknown status %q", w.dir, status)
	}
	m := w.m
	m.Status = status
	m.Error = errText
	m.Updated = now().Format(time.RFC3339)
	if err := writeManifest(w.dir, m); err != nil {
		return err
	}
	w.m = m
	return nil
}

// Close releases the writer. Rows added since the last commit are
// discarded, exactly as after a crash; a resumed run regenerates them.
func (w *Writer) Close() error {
	w.closed = true
	w.steps, w.evals, w.samples, w.prompts, w.timing = nil, nil, nil, nil, nil
	return nil
}

// writeManifest replaces manifest.json atomically.
func writeManifest(dir string, m Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("run %s: encode manifest: %w", dir, err)
	}
	data = append(data, '\n')
	if err := writeAtomic(filepath.Join(dir, ManifestFile), data, "manifest"); err != nil {
		return fmt.Errorf("run %s: write manifest: %w", dir, err)
	}
	return nil
}

// writeAtomic writes data to path atomically and durably; the crash hook
// sees the temporary file half written and written but not synced.
func writeAtomic(path string, data []byte, what string) error {
	return atomicfile.WriteHooked(path, data, func(stage string) { hook(stage + ":" + what) })
}

// writeSynced creates path (replacing a stale one) with data and fsyncs it,
// for segments renamed together at commit; hooks as in writeAtomic.
func writeSynced(path string, data []byte, what string) error {
	return atomicfile.WriteSynced(path, data, func(stage string) { hook(stage + ":" + what) })
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
