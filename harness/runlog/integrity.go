package runlog

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Named errors of the inventory check: a committed file that does not match
// what the manifest recorded when it was committed.
var (
	ErrMissingFile     = errors.New("file listed in the manifest is missing")
	ErrUnlistedFile    = errors.New("committed file not listed in the manifest")
	ErrFileSize        = errors.New("file size differs from the manifest")
	ErrFileHash        = errors.New("file content differs from the manifest (SHA-256)")
	ErrDamagedManifest = errors.New("damaged manifest")
)

// Inventory is the list, kept in the manifest, of every committed file of a
// run: each segment of each table and each file of the checkpoint of the
// last committed step. Both lists are sorted by path; paths are relative to
// the run folder with forward slashes. The inventory is rewritten with the
// manifest at every commit, so it always describes the committed state.
type Inventory struct {
	Segments   []SegmentEntry `json:"segments"`
	Checkpoint []FileEntry    `json:"checkpoint"`
}

// SegmentEntry is one committed Parquet segment.
type SegmentEntry struct {
	Path   string `json:"path"` // e.g. steps/000004.parquet
	Bytes  int64  `json:"bytes"`
	Rows   int64  `json:"rows"`
	SHA256 string `json:"sha256"`
}

// FileEntry is one committed checkpoint file.
type FileEntry struct {
	Path   string `json:"path"` // e.g. ckpt/step-00000004/engine/adapter_model.safetensors
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// hashBufs recycles the buffers of streaming hashes.
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// hashReader returns the hex SHA-256 of r's content and its length,
// reading it in fixed-size blocks.
func hashReader(r io.Reader) (string, int64, error) {
	h := sha256.New()
	buf := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(buf)
	n, err := io.CopyBuffer(h, r, *buf)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func hashFS(fsys fs.FS, p string) (string, int64, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return hashReader(f)
}

// TrackCheckpoints makes every later Commit(step) record in the manifest the
// files of the checkpoint folder dirOf(step), which must exist inside the
// run folder when the log is committed (the checkpoint protocol writes it
// first). Without it, the inventory lists segments only.
func (w *Writer) TrackCheckpoints(dirOf func(step int64) string) { w.ckpt = dirOf }

// inventoryCheckpoint lists the files of the checkpoint folder of step.
func (w *Writer) inventoryCheckpoint(step int64) ([]FileEntry, error) {
	if w.ckpt == nil {
		return nil, nil
	}
	dir := w.ckpt(step)
	rel, err := filepath.Rel(w.dir, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return nil, fmt.Errorf("run %s: checkpoint folder %s lies outside the run folder", w.dir, dir)
	}
	rel = filepath.ToSlash(rel)
	fsys := os.DirFS(w.dir)
	var out []FileEntry
	err = fs.WalkDir(fsys, rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		sum, n, err := hashFS(fsys, p)
		if err != nil {
			return err
		}
		out = append(out, FileEntry{Path: p, Bytes: n, SHA256: sum})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("run %s: inventory of the checkpoint of step %d: %w", w.dir, step, err)
	}
	slices.SortFunc(out, func(a, b FileEntry) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// withSegments returns inv with the segments of a commit added (replacing
// entries of the same path), sorted.
func withSegments(inv *Inventory, add []SegmentEntry) *Inventory {
	out := &Inventory{Segments: []SegmentEntry{}, Checkpoint: []FileEntry{}}
	if inv != nil {
		out.Checkpoint = append(out.Checkpoint, inv.Checkpoint...)
		for _, e := range inv.Segments {
			if !slices.ContainsFunc(add, func(a SegmentEntry) bool { return a.Path == e.Path }) {
				out.Segments = append(out.Segments, e)
			}
		}
	}
	out.Segments = append(out.Segments, add...)
	sortSegments(out.Segments)
	return out
}

// sortSegments orders entries by table, then by step (not by text, so that
// steps past 999999 stay in order), then by path.
func sortSegments(s []SegmentEntry) {
	slices.SortFunc(s, func(a, b SegmentEntry) int {
		ta, na := path.Split(a.Path)
		tb, nb := path.Split(b.Path)
		if c := strings.Compare(ta, tb); c != 0 {
			return c
		}
		sa, _ := segmentStep(na)
		sb, _ := segmentStep(nb)
		if c := cmp.Compare(sa, sb); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
}

// inventoryFromDisk builds the segment list of a run folder from the
// committed segments on disk (used once, when a run written before
// inventories existed is resumed, after it has been checked).
func inventoryFromDisk(dir string, last int64) (*Inventory, error) {
	s := source{fsys: os.DirFS(dir), label: dir}
	inv := &Inventory{Segments: []SegmentEntry{}, Checkpoint: []FileEntry{}}
	for _, tb := range Tables {
		segs, err := committedSegments(s, ".", tb, last)
		if err != nil {
			return nil, err
		}
		for _, sg := range segs {
			data, err := fs.ReadFile(s.fsys, sg.path)
			if err != nil {
				return nil, err
			}
			n, err := segmentRows(tb, data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.name(sg.path), err)
			}
			inv.Segments = append(inv.Segments, SegmentEntry{Path: sg.path, Bytes: int64(len(data)), Rows: n, SHA256: sha256Hex(data)})
		}
	}
	sortSegments(inv.Segments)
	return inv, nil
}

// segmentRows decodes a segment of table and counts its rows.
func segmentRows(table string, data []byte) (int64, error) {
	var n int
	var err error
	switch table {
	case TableSteps:
		var r []StepRow
		r, err = stepsDef.decode(data)
		n = len(r)
	case TableEvals:
		var r []EvalRow
		r, err = evalsDef.decode(data)
		n = len(r)
	case TableSamples:
		var r []SampleRow
		if r, err = samplesDef.decode(data); errors.Is(err, ErrSchemaVersion) {
			r, err = samplesV1Def.decode(data)
		}
		n = len(r)
	case TablePrompts:
		var r []PromptRow
		r, err = promptsDef.decode(data)
		n = len(r)
	case TableTiming:
		var r []TimingRow
		r, err = timingDef.decode(data)
		n = len(r)
	default:
		err = fmt.Errorf("unknown table %q", table)
	}
	return int64(n), err
}

// VerifyOptions choose how far VerifyRun goes.
type VerifyOptions struct {
	// Hashes re-reads every listed file and compares its SHA-256; without
	// it only presence and sizes are compared (a stat per file).
	Hashes bool
	// ConfigHash, when set, recomputes the hash of a manifest's stored
	// config (spec.StoredConfigHash); a config that does not hash to the
	// manifest's config_hash is a damaged manifest.
	ConfigHash func(config any) (string, error)
}

// VerifyRun compares the committed files of the run folder dir with the
// inventory of its manifest: every listed segment and checkpoint file must
// exist with its recorded size (and SHA-256 with opt.Hashes), and no
// committed segment may be unlisted. A manifest written before inventories
// existed has none to compare with; only its config is checked. It returns
// every problem found, in path order; nil means the run is intact.
func VerifyRun(dir string, opt VerifyOptions) []Problem {
	s := source{fsys: os.DirFS(dir), label: dir}
	m, err := parseManifest(s, ".")
	if err != nil {
		return []Problem{{s.name(ManifestFile), err}}
	}
	probs := verifyConfig(s, ".", m, opt.ConfigHash)
	probs = append(probs, verifyInventory(s, ".", m, opt.Hashes, true)...)
	slices.SortStableFunc(probs, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	return probs
}

// verifyConfig checks a manifest's config against its config_hash.
func verifyConfig(s source, dir string, m Manifest, hash func(any) (string, error)) []Problem {
	if hash == nil {
		return nil
	}
	name := s.name(path.Join(dir, ManifestFile))
	got, err := hash(m.Config)
	if err != nil {
		return []Problem{{name, fmt.Errorf("%w: its config cannot be hashed: %w", ErrDamagedManifest, err)}}
	}
	if got != m.ConfigHash {
		return []Problem{{name, fmt.Errorf("%w: its config hashes to %s, but config_hash says %s", ErrDamagedManifest, got, m.ConfigHash)}}
	}
	return nil
}

// verifyInventory compares a run's files with its manifest's inventory.
// Checkpoint files are compared only when ckpt is set (archives do not
// carry checkpoints).
func verifyInventory(s source, dir string, m Manifest, hashes, ckpt bool) []Problem {
	inv := m.Inventory
	if inv == nil {
		return nil
	}
	var probs []Problem
	mname := s.name(path.Join(dir, ManifestFile))
	listed := map[string]bool{}
	for _, e := range inv.Segments {
		listed[e.Path] = true
		tb, name := path.Split(e.Path)
		step, ok := segmentStep(name)
		if !ok || !slices.Contains(Tables, strings.TrimSuffix(tb, "/")) || step > m.LastStep {
			probs = append(probs, Problem{mname, fmt.Errorf("%w: inventory lists %q, not a committed segment name (last_step %d)", ErrDamagedManifest, e.Path, m.LastStep)})
			continue
		}
		if p := verifyFile(s, path.Join(dir, e.Path), e.Bytes, e.SHA256, hashes); p != nil {
			probs = append(probs, *p)
		}
	}
	for _, tb := range Tables {
		segs, err := committedSegments(s, dir, tb, m.LastStep)
		if err != nil {
			probs = append(probs, Problem{s.name(path.Join(dir, tb)), err})
			continue
		}
		for _, sg := range segs {
			rel := strings.TrimPrefix(sg.path, dir+"/")
			if dir == "." {
				rel = sg.path
			}
			if !listed[rel] {
				probs = append(probs, Problem{s.name(sg.path), fmt.Errorf("%w (committed step %d <= last_step %d)", ErrUnlistedFile, sg.step, m.LastStep)})
			}
		}
	}
	if !ckpt || len(inv.Checkpoint) == 0 {
		return probs
	}
	folders := map[string]bool{}
	for _, e := range inv.Checkpoint {
		listed[e.Path] = true
		folders[checkpointFolder(e.Path)] = true
		if p := verifyFile(s, path.Join(dir, e.Path), e.Bytes, e.SHA256, hashes); p != nil {
			probs = append(probs, *p)
		}
	}
	for _, f := range slices.Sorted(func(yield func(string) bool) {
		for k := range folders {
			if !yield(k) {
				return
			}
		}
	}) {
		_ = fs.WalkDir(s.fsys, path.Join(dir, f), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil // a missing folder shows as its missing files
			}
			rel := p
			if dir != "." {
				rel = strings.TrimPrefix(p, dir+"/")
			}
			if !listed[rel] {
				probs = append(probs, Problem{s.name(p), ErrUnlistedFile})
			}
			return nil
		})
	}
	return probs
}

// checkpointFolder is the first two elements of a checkpoint file path
// (ckpt/step-00000004), the folder whose files the inventory lists.
func checkpointFolder(p string) string {
	parts := strings.SplitN(p, "/", 3)
	if len(parts) < 3 {
		return path.Dir(p)
	}
	return parts[0] + "/" + parts[1]
}

// verifyFile compares one file with its inventory entry.
func verifyFile(s source, p string, size int64, sum string, hashes bool) *Problem {
	name := s.name(p)
	st, err := fs.Stat(s.fsys, p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &Problem{name, ErrMissingFile}
	case err != nil:
		return &Problem{name, err}
	case !st.Mode().IsRegular():
		return &Problem{name, fmt.Errorf("%w: not a regular file", ErrMissingFile)}
	case st.Size() != size:
		return &Problem{name, fmt.Errorf("%w: %d bytes, the manifest says %d", ErrFileSize, st.Size(), size)}
	}
	if !hashes {
		return nil
	}
	got, n, err := hashFS(s.fsys, p)
	if err != nil {
		return &Problem{name, err}
	}
	if n != size {
		return &Problem{name, fmt.Errorf("%w: %d bytes, the manifest says %d", ErrFileSize, n, size)}
	}
	if got != sum {
		return &Problem{name, fmt.Errorf("%w: sha256 %s, the manifest says %s", ErrFileHash, got, sum)}
	}
	return nil
}

// segmentIndex maps the inventory's segment paths (relative to the run
// folder) to their entries; nil when the manifest has no inventory.
func segmentIndex(m Manifest) map[string]SegmentEntry {
	if m.Inventory == nil {
		return nil
	}
	idx := make(map[string]SegmentEntry, len(m.Inventory.Segments))
	for _, e := range m.Inventory.Segments {
		idx[e.Path] = e
	}
	return idx
}

// checkReadSegment compares a segment a reader has read in full with its
// inventory entry (hashing bytes already in memory).
func checkReadSegment(idx map[string]SegmentEntry, rel string, data []byte) error {
	if idx == nil {
		return nil
	}
	e, ok := idx[rel]
	switch {
	case !ok:
		return ErrUnlistedFile
	case int64(len(data)) != e.Bytes:
		return fmt.Errorf("%w: %d bytes, the manifest says %d", ErrFileSize, len(data), e.Bytes)
	case sha256Hex(data) != e.SHA256:
		return fmt.Errorf("%w: sha256 %s, the manifest says %s", ErrFileHash, sha256Hex(data), e.SHA256)
	}
	return nil
}

// missingSegments returns the inventory's segments of table that a reader
// did not find among the committed segments it read.
func missingSegments(idx map[string]SegmentEntry, table string, read []segment, dir string) []string {
	var out []string
	for p := range idx {
		if path.Dir(p) != table {
			continue
		}
		full := path.Join(dir, p)
		if !slices.ContainsFunc(read, func(sg segment) bool { return sg.path == full }) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// rewindInventory drops the inventory's segments after step and lists the
// checkpoint of step (when checkpoints are tracked and it exists; else
// none).
func (w *Writer) rewindInventory(m *Manifest, step int64) error {
	if m.Inventory == nil {
		return nil
	}
	inv := &Inventory{Segments: []SegmentEntry{}, Checkpoint: []FileEntry{}}
	for _, e := range m.Inventory.Segments {
		if c, ok := segmentStep(path.Base(e.Path)); ok && c <= step {
			inv.Segments = append(inv.Segments, e)
		}
	}
	if w.ckpt != nil && step >= 0 {
		if st, err := os.Stat(w.ckpt(step)); err == nil && st.IsDir() {
			files, err := w.inventoryCheckpoint(step)
			if err != nil {
				return err
			}
			inv.Checkpoint = files
		}
	}
	m.Inventory = inv
	return nil
}

// resumeInventory is the inventory of a reopened run: the old one without
// segments past last, with the segments recovery rewrote (changed) listed
// afresh. A run without an inventory stays without one.
func resumeInventory(dir string, old *Inventory, last int64, changed []string) (*Inventory, error) {
	if old == nil {
		return nil, nil
	}
	inv := &Inventory{Segments: []SegmentEntry{}, Checkpoint: append([]FileEntry{}, old.Checkpoint...)}
	for _, e := range old.Segments {
		if c, ok := segmentStep(path.Base(e.Path)); ok && c > last || slices.Contains(changed, e.Path) {
			continue
		}
		inv.Segments = append(inv.Segments, e)
	}
	for _, p := range changed {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		n, err := segmentRows(path.Dir(p), data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		inv.Segments = append(inv.Segments, SegmentEntry{Path: p, Bytes: int64(len(data)), Rows: n, SHA256: sha256Hex(data)})
	}
	sortSegments(inv.Segments)
	return inv, nil
}
