package runlog

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Run is one run's manifest and committed rows, each table sorted by step
// (then by its key columns; rows that tie keep their written order).
type Run struct {
	Dir      string
	Manifest Manifest
	Steps    []StepRow
	Evals    []EvalRow
	Samples  []SampleRow
	Timing   []TimingRow
	// Digest is the SHA-256 of the run's stored bytes: its manifest and
	// committed segments (what Archive packs), so two copies of a run
	// compare equal exactly when those bytes are equal.
	Digest string
}

// source is a runs tree to read: a folder or an unpacked archive.
type source struct {
	fsys    fs.FS
	label   string // shown in errors and Run.Dir: the folder, or the archive path
	archive bool   // an archive: it carries no checkpoints
}

// name is the displayed name of a path inside the source.
func (s source) name(p string) string {
	if p == "." || p == "" {
		return s.label
	}
	return filepath.Join(s.label, filepath.FromSlash(p))
}

// openSource opens src: a folder, or a .tar.zst archive written by Archive.
func openSource(src string) (source, error) {
	return openSourceKeeping(src, nil)
}

// openSourceKeeping is openSource holding in memory, of an archive, only
// the files keep returns true for (readArchiveKeeping).
func openSourceKeeping(src string, keep func(p string) bool) (source, error) {
	st, err := os.Stat(src)
	if err != nil {
		return source{}, err
	}
	if st.IsDir() {
		return source{fsys: os.DirFS(src), label: src}, nil
	}
	fsys, err := readArchiveKeeping(src, keep)
	if err != nil {
		return source{}, err
	}
	return source{fsys: fsys, label: src, archive: true}, nil
}

// ReadManifest reads dir/manifest.json. A missing manifest is
// ErrMissingManifest, an unparsable one ErrBadManifest.
func ReadManifest(dir string) (Manifest, error) {
	return readManifestFS(source{fsys: os.DirFS(dir), label: dir}, ".")
}

func readManifestFS(s source, dir string) (Manifest, error) {
	m, err := parseManifest(s, dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", s.name(path.Join(dir, ManifestFile)), err)
	}
	return m, nil
}

// parseManifest reads and validates a run's manifest; its errors do not
// name the file.
func parseManifest(s source, dir string) (Manifest, error) {
	data, err := fs.ReadFile(s.fsys, path.Join(dir, ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, ErrMissingManifest
	}
	if err != nil {
		return Manifest{}, err
	}
	return decodeManifest(data)
}

// decodeManifest parses and validates a manifest's bytes.
func decodeManifest(data []byte) (Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber() // keep 64-bit seeds in the config exact
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrBadManifest, err)
	}
	if m.SchemaVersion < MinReadVersion || m.SchemaVersion > SchemaVersion {
		return Manifest{}, fmt.Errorf("%w: manifest has version %d, this build reads %d to %d", ErrSchemaVersion, m.SchemaVersion, MinReadVersion, SchemaVersion)
	}
	if m.RunID == "" {
		return Manifest{}, fmt.Errorf("%w: no run_id", ErrBadManifest)
	}
	return m, nil
}

// segment is one committed segment file of a table.
type segment struct {
	path string // inside the source
	step int64
}

// committedSegments lists the committed segments of one table of a run in
// step order: files named <step>.parquet with step <= last.
func committedSegments(s source, dir, table string, last int64) ([]segment, error) {
	td := path.Join(dir, table)
	entries, err := fs.ReadDir(s.fsys, td)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name(td), err)
	}
	var segs []segment
	for _, e := range entries {
		step, ok := segmentStep(e.Name())
		if !ok || step > last || !e.Type().IsRegular() {
			continue
		}
		segs = append(segs, segment{path.Join(td, e.Name()), step})
	}
	slices.SortFunc(segs, func(a, b segment) int { return cmp.Compare(a.step, b.step) })
	return segs, nil
}

// readTableRows reads every committed segment of table t into rows, sorted.
// Each segment is compared with the manifest's inventory idx (when it has
// one): an unlisted, missing, resized or altered segment is an error.
func readTableRows[R any](s source, dir string, t *tableDef[R], last int64, idx map[string]SegmentEntry) ([]R, error) {
	segs, err := committedSegments(s, dir, t.name, last)
	if err != nil {
		return nil, err
	}
	if miss := missingSegments(idx, t.name, segs, dir); len(miss) > 0 {
		return nil, fmt.Errorf("%s: %w", s.name(path.Join(dir, miss[0])), ErrMissingFile)
	}
	var out []R
	for _, sg := range segs {
		data, err := fs.ReadFile(s.fsys, sg.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(sg.path), err)
		}
		rows, err := t.decode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(sg.path), err)
		}
		if err := checkReadSegment(idx, path.Join(t.name, path.Base(sg.path)), data); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(sg.path), err)
		}
		out = append(out, rows...)
	}
	slices.SortStableFunc(out, func(a, b R) int { return t.order(&a, &b) })
	return out, nil
}

// ReadRun reads the manifest and all committed rows of the run in dir.
func ReadRun(dir string) (*Run, error) {
	return readRunFS(source{fsys: os.DirFS(dir), label: dir}, ".")
}

func readRunFS(s source, dir string) (*Run, error) {
	m, err := readManifestFS(s, dir)
	if err != nil {
		return nil, err
	}
	r := &Run{Dir: s.name(dir), Manifest: m}
	idx := segmentIndex(m)
	if r.Steps, err = readTableRows(s, dir, stepsDef, m.LastStep, idx); err != nil {
		return nil, err
	}
	if r.Evals, err = readTableRows(s, dir, evalsDef, m.LastStep, idx); err != nil {
		return nil, err
	}
	if r.Samples, err = readTableRows(s, dir, samplesFor(m.SchemaVersion), m.LastStep, idx); err != nil {
		return nil, err
	}
	if m.SchemaVersion >= 2 {
		prompts, err := readTableRows(s, dir, promptsDef, m.LastStep, idx)
		if err != nil {
			return nil, err
		}
		if err := joinPrompts(r.Samples, prompts); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(path.Join(dir, TableSamples)), err)
		}
	}
	if r.Timing, err = readTableRows(s, dir, timingDef, m.LastStep, idx); err != nil {
		return nil, err
	}
	if r.Digest, err = runDigest(s, dir, m.LastStep); err != nil {
		return nil, err
	}
	return r, nil
}

// joinPrompts fills the Prompt of every sample row from the prompts/ row
// its prompt_id names; an id with no prompt row is ErrCorrupt.
func joinPrompts(samples []SampleRow, prompts []PromptRow) error {
	text := make(map[int64]string, len(prompts))
	for _, p := range prompts {
		text[p.ID] = p.Prompt
	}
	for i := range samples {
		h := samples[i].promptID
		if h == 0 {
			continue
		}
		t, ok := text[h]
		if !ok {
			return fmt.Errorf("%w: sample row %d (step %d, %s) names prompt_id %d, which prompts/ does not hold", ErrCorrupt, i, samples[i].Step, samples[i].Agent, h)
		}
		samples[i].Prompt, samples[i].promptID = t, 0
	}
	return nil
}

// runDigest hashes a run's manifest and committed segments (digestOf):
// each file as its path inside the run folder, its length and its
// SHA-256.
func runDigest(s source, dir string, last int64) (string, error) {
	mp := path.Join(dir, ManifestFile)
	data, err := fs.ReadFile(s.fsys, mp)
	if err != nil {
		return "", fmt.Errorf("%s: %w", s.name(mp), err)
	}
	files := []fileHash{{rel: ManifestFile, table: -1, size: len(data), sum: sha256.Sum256(data)}}
	for ti, tb := range Tables {
		segs, err := committedSegments(s, dir, tb, last)
		if err != nil {
			return "", err
		}
		for _, sg := range segs {
			data, err := fs.ReadFile(s.fsys, sg.path)
			if err != nil {
				return "", fmt.Errorf("%s: %w", s.name(sg.path), err)
			}
			rel := strings.TrimPrefix(sg.path, dir+"/")
			files = append(files, fileHash{rel: rel, table: ti, step: sg.step, size: len(data), sum: sha256.Sum256(data)})
		}
	}
	return digestOf(files), nil
}

// ReadRuns reads every run under src, a runs tree or a .tar.zst archive
// written by Archive, in path order. A run is a folder holding
// manifest.json; any unreadable run is an error naming its file.
func ReadRuns(src string) ([]*Run, error) {
	s, err := openSource(src)
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	dirs, orphans, err := findRuns(s)
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	if len(orphans) > 0 {
		return nil, fmt.Errorf("read runs: %s: %w, but it holds run tables", s.name(orphans[0]), ErrMissingManifest)
	}
	runs := make([]*Run, 0, len(dirs))
	for _, d := range dirs {
		r, err := readRunFS(s, d)
		if err != nil {
			return nil, fmt.Errorf("read runs: %w", err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// findRuns walks a source for run folders (holding manifest.json) and for
// orphans: folders that hold a table folder but no manifest.
func findRuns(s source) (runs, orphans []string, err error) {
	err = fs.WalkDir(s.fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if st, err := fs.Stat(s.fsys, path.Join(p, ManifestFile)); err == nil && !st.IsDir() {
			runs = append(runs, p)
			return fs.SkipDir
		}
		if slices.Contains(Tables, d.Name()) && p != "." {
			orphans = append(orphans, path.Dir(p))
			return fs.SkipDir
		}
		return nil
	})
	orphans = slices.Compact(orphans)
	return runs, orphans, err
}

// ReadTable reads every committed segment of one table of the run in dir as
// a single Arrow table, in commit order. The caller releases it.
func ReadTable(dir, table string) (arrow.Table, error) {
	if !slices.Contains(Tables, table) {
		return nil, fmt.Errorf("read table: unknown table %q (tables: %s)", table, strings.Join(Tables, ", "))
	}
	s := source{fsys: os.DirFS(dir), label: dir}
	m, err := readManifestFS(s, ".")
	if err != nil {
		return nil, err
	}
	t, _ := tableInfoByName(table, m.SchemaVersion)
	segs, err := committedSegments(s, ".", table, m.LastStep)
	if err != nil {
		return nil, err
	}
	idx := segmentIndex(m)
	if miss := missingSegments(idx, table, segs, "."); len(miss) > 0 {
		return nil, fmt.Errorf("%s: %w", s.name(miss[0]), ErrMissingFile)
	}
	var parts []arrow.Table
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	for _, sg := range segs {
		data, err := fs.ReadFile(s.fsys, sg.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(sg.path), err)
		}
		if err := checkReadSegment(idx, path.Join(table, path.Base(sg.path)), data); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(sg.path), err)
		}
		tbl, err := openTable(t, data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(sg.path), err)
		}
		parts = append(parts, tbl)
	}
	if len(parts) == 0 {
		return array.NewTableFromSlice(t.schema, make([][]arrow.Array, t.schema.NumFields())), nil
	}
	schema := parts[0].Schema()
	for _, p := range parts[1:] {
		if p.NumCols() != parts[0].NumCols() {
			return nil, fmt.Errorf("read table %s of %s: %w: segments of different schema versions (%d and %d columns)", table, dir, ErrForeignSchema, parts[0].NumCols(), p.NumCols())
		}
	}
	cols := make([]arrow.Column, schema.NumFields())
	var rows int64
	for _, p := range parts {
		rows += p.NumRows()
	}
	for i := range cols {
		var chunks []arrow.Array
		for _, p := range parts {
			chunks = append(chunks, p.Column(i).Data().Chunks()...)
		}
		ch := arrow.NewChunked(schema.Field(i).Type, chunks)
		cols[i] = *arrow.NewColumn(schema.Field(i), ch)
		ch.Release()
	}
	tbl := array.NewTable(schema, cols, rows)
	for i := range cols {
		cols[i].Release()
	}
	return tbl, nil
}
