package runlog

import (
	"archive/tar"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Streaming reads. ReadRuns holds every run of a source, every row of it,
// in memory at once; a study's report needs far less: each run's steps and
// evals, and of its samples what a reduction keeps. StreamRuns reads the
// runs one at a time (several at once with Jobs), each table segment by
// segment, and hands each run to a callback, so that the memory a reader
// needs is bounded by the runs in flight and one decoded segment per
// worker, not by the size of the source.

// SampleReducer receives the sample rows of one run, one committed segment
// at a time in commit order, and returns what the run keeps of them. The
// rows it keeps are sorted as ReadRun sorts samples (rows that tie keep
// their order), so a reducer that keeps a subset gives that subset in the
// order ReadRun's rows would.
type SampleReducer interface {
	Add(rows []SampleRow)
	Rows() []SampleRow
}

// StreamOptions say how StreamRuns reads.
type StreamOptions struct {
	// Jobs is how many runs are read at once (0: GOMAXPROCS).
	Jobs int
	// Want, when set, is asked with each run's manifest; a run it returns
	// false for is not read further (nor handed to the callback).
	Want func(Manifest) bool
	// Samples, when set, makes the reducer each run's sample rows go to;
	// nil keeps every row.
	Samples func(Manifest) SampleReducer
	// SampleSplits, when set, skips the samples segments holding no row
	// of these splits after decoding their split column alone (a
	// segment that holds one is decoded whole, all its rows going to
	// the reducer).
	SampleSplits []string
	// SkipPrompts leaves Prompt empty and prompts/ unread (a schema
	// version 1 file's prompt column is not decoded either).
	SkipPrompts bool
	// SkipTables are tables not decoded (their segments are still
	// checked against the inventory and hashed into the digest).
	SkipTables []string
	// BufferBytes bounds the archive bytes read ahead of the runs being
	// decoded (0: BufferBytesPerJob per job); a single larger file is
	// still read, alone.
	BufferBytes int64
}

// BufferBytesPerJob is the archive read-ahead StreamOptions.BufferBytes
// gives each job by default: a few of a CPU study's segments, so that
// the jobs have work, without the read-ahead growing with the logs.
const BufferBytesPerJob = 1 << 20

// SampleBatchRows is how many sample rows StreamRuns decodes at once: a
// samples segment costs its stored bytes and one batch of rows.
const SampleBatchRows = 1024

// StreamedRun is one run as StreamRuns gives it: Index is its place in the
// source's path order, counting every run found (wanted or not).
type StreamedRun struct {
	Index int
	Run   *Run
}

// StreamRuns reads the runs under src (a runs tree or a .tar.zst archive
// written by Archive) and calls fn with each run it wants, from up to Jobs
// goroutines at once, in no fixed order (StreamedRun.Index gives the path
// order). It returns how many runs src holds (wanted or not). The first
// error, of reading or of fn, stops the reading: runs already handed to fn
// finish, and an error of the source itself (unreadable, or an archive out
// of order) is returned, else that of the run first in path order among
// the failed ones. A run of an archive must be stored as Archive writes
// it: its manifest first and its files together; otherwise the error says
// to unpack it.
func StreamRuns(ctx context.Context, src string, opt StreamOptions, fn func(StreamedRun) error) (int, error) {
	st, err := os.Stat(src)
	if err != nil {
		return 0, fmt.Errorf("read runs: %w", err)
	}
	jobs := opt.Jobs
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	opt.Jobs = jobs
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu     sync.Mutex
		errAt  int
		first  error
		wg     sync.WaitGroup
		work   = make(chan func(), jobs)
		failed = func(i int, err error) {
			mu.Lock()
			if first == nil || i < errAt {
				errAt, first = i, err
			}
			mu.Unlock()
			cancel()
		}
	)
	for range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				f()
			}
		}()
	}
	run := func(i int, feed fileFeed, label string) func() {
		return func() {
			r, err := readFed(ctx, feed, label, opt)
			if err != nil {
				err = fmt.Errorf("read runs: %w", err)
			} else if r != nil {
				err = fn(StreamedRun{Index: i, Run: r})
			}
			feed.drain()
			if err != nil && !errors.Is(err, context.Canceled) {
				failed(i, err)
			}
		}
	}
	var n int
	var perr error
	if st.IsDir() {
		n, perr = feedDir(ctx, src, work, run)
	} else {
		n, perr = feedArchive(ctx, src, opt, work, run)
	}
	close(work)
	wg.Wait()
	if perr != nil && !errors.Is(perr, context.Canceled) {
		// the source itself is at fault (unreadable, or an archive not
		// in Archive's order): said before what its runs' readers met
		failed(-1, fmt.Errorf("read runs: %w", perr))
	}
	if first != nil {
		return n, first
	}
	if perr != nil {
		return n, fmt.Errorf("read runs: %w", perr)
	}
	return n, nil
}

// fedFile is one file of a run: its path inside the source and bytes.
type fedFile struct {
	path string
	data []byte
}

// fileFeed gives the files of one run, its manifest first.
type fileFeed interface {
	// next returns the next file; ok false at the end.
	next(ctx context.Context) (f fedFile, ok bool, err error)
	// done says the reader is through with a file's bytes.
	done(f fedFile)
	// drain discards what the reader did not take.
	drain()
}

// feedDir hands each run folder under src to a worker, which reads its
// files from disk one at a time.
func feedDir(ctx context.Context, src string, work chan<- func(), run func(int, fileFeed, string) func()) (int, error) {
	s := source{fsys: os.DirFS(src), label: src}
	dirs, orphans, err := findRuns(s)
	if err != nil {
		return 0, err
	}
	if len(orphans) > 0 {
		return 0, fmt.Errorf("%s: %w, but it holds run tables", s.name(orphans[0]), ErrMissingManifest)
	}
	for i, d := range dirs {
		select {
		case work <- run(i, &dirFeed{s: s, dir: d}, s.label):
		case <-ctx.Done():
			return len(dirs), ctx.Err()
		}
	}
	return len(dirs), nil
}

// dirFeed reads a run folder's manifest, then its committed segments table
// by table in step order (the manifest's last step bounds them).
type dirFeed struct {
	s     source
	dir   string
	files []string // the segments, listed once the manifest is read
	pos   int      // the next of files
	begun bool     // the manifest was read
}

func (d *dirFeed) next(ctx context.Context) (fedFile, bool, error) {
	if err := ctx.Err(); err != nil {
		return fedFile{}, false, err
	}
	if !d.begun {
		d.begun = true
		p := path.Join(d.dir, ManifestFile)
		data, err := fs.ReadFile(d.s.fsys, p)
		if errors.Is(err, fs.ErrNotExist) {
			return fedFile{}, false, fmt.Errorf("%s: %w", d.s.name(p), ErrMissingManifest)
		}
		if err != nil {
			return fedFile{}, false, fmt.Errorf("%s: %w", d.s.name(p), err)
		}
		m, err := decodeManifest(data)
		if err != nil {
			return fedFile{}, false, fmt.Errorf("%s: %w", d.s.name(p), err)
		}
		for _, tb := range Tables {
			segs, err := committedSegments(d.s, d.dir, tb, m.LastStep)
			if err != nil {
				return fedFile{}, false, err
			}
			for _, sg := range segs {
				d.files = append(d.files, sg.path)
			}
		}
		return fedFile{p, data}, true, nil
	}
	if d.pos >= len(d.files) {
		return fedFile{}, false, nil
	}
	p := d.files[d.pos]
	d.pos++
	data, err := fs.ReadFile(d.s.fsys, p)
	if err != nil {
		return fedFile{}, false, fmt.Errorf("%s: %w", d.s.name(p), err)
	}
	return fedFile{p, data}, true, nil
}

func (d *dirFeed) done(fedFile) {}
func (d *dirFeed) drain()       {}

// budget bounds the bytes read ahead from an archive: the reader takes
// before queueing a file, the worker gives back when through with it. A
// file larger than the whole budget waits until nothing else is held.
type budget struct {
	mu   sync.Mutex
	cond *sync.Cond
	max  int64
	used int64
}

func newBudget(max int64) *budget {
	b := &budget{max: max}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *budget) take(ctx context.Context, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.used > 0 && b.used+n > b.max {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.cond.Wait()
	}
	b.used += n
	return nil
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// wake lets a taker waiting on a cancelled context see it.
func (b *budget) wake() { b.cond.Broadcast() }

// archiveFeed is the queue of one run's files as the archive reader
// finds them.
type archiveFeed struct {
	b      *budget
	mu     sync.Mutex
	cond   *sync.Cond
	files  []fedFile
	closed bool
	taken  bool // the reader stopped taking: later files are given back at once
}

func newArchiveFeed(b *budget) *archiveFeed {
	f := &archiveFeed{b: b}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *archiveFeed) push(ff fedFile) {
	f.mu.Lock()
	if f.taken {
		f.mu.Unlock()
		f.b.give(int64(len(ff.data)))
		return
	}
	f.files = append(f.files, ff)
	f.mu.Unlock()
	f.cond.Broadcast()
}

func (f *archiveFeed) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cond.Broadcast()
}

func (f *archiveFeed) next(ctx context.Context) (fedFile, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.files) == 0 && !f.closed {
		if err := ctx.Err(); err != nil {
			return fedFile{}, false, err
		}
		f.cond.Wait()
	}
	if len(f.files) == 0 {
		return fedFile{}, false, nil
	}
	ff := f.files[0]
	f.files[0] = fedFile{}
	f.files = f.files[1:]
	return ff, true, nil
}

func (f *archiveFeed) done(ff fedFile) { f.b.give(int64(len(ff.data))) }

func (f *archiveFeed) drain() {
	f.mu.Lock()
	rest := f.files
	f.files, f.taken = nil, true
	f.mu.Unlock()
	for _, ff := range rest {
		f.b.give(int64(len(ff.data)))
	}
}

// feedArchive streams a .tar.zst archive, handing each run (a manifest.json
// and the files under its folder that follow it) to a worker as soon as
// its manifest is found, and its files as they come.
func feedArchive(ctx context.Context, name string, opt StreamOptions, work chan<- func(), run func(int, fileFeed, string) func()) (int, error) {
	tr, closeArchive, err := openArchive(name)
	if err != nil {
		return 0, err
	}
	defer closeArchive()
	limit := opt.BufferBytes
	if limit <= 0 {
		limit = int64(max(opt.Jobs, 1)) * BufferBytesPerJob
	}
	b := newBudget(limit)
	stop := context.AfterFunc(ctx, b.wake)
	defer stop()
	var (
		cur     *archiveFeed
		curDir  string
		n       int
		done    = map[string]bool{} // run folders whose files ended
		closeUp = func() {
			if cur != nil {
				cur.close()
				done[curDir] = true
				cur = nil
			}
		}
	)
	defer closeUp()
	s := source{label: name, archive: true}
	for {
		hdr, p, err := nextArchiveEntry(tr, name)
		if err != nil {
			return n, err
		}
		if hdr == nil {
			break
		}
		if hdr.Typeflag == tar.TypeDir {
			continue
		}
		inCur := cur != nil && strings.HasPrefix(p, curDir+"/")
		if !inCur {
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				if done[d] {
					return n, fmt.Errorf("%s: archive entry %s comes after other runs' files, not with the rest of run %s (not the order marlow archive writes): unpack the archive and read the folder", name, p, d)
				}
			}
			if curDir == "." && cur != nil {
				inCur = true
			}
		}
		if !inCur && path.Base(p) != ManifestFile {
			if isTablePath(p) {
				return n, fmt.Errorf("%s: %w, but it holds run tables", s.name(tableParent(p)), ErrMissingManifest)
			}
			continue // not part of a run: ignored, as ReadRuns ignores it
		}
		if err := b.take(ctx, hdr.Size); err != nil {
			return n, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			b.give(hdr.Size)
			return n, fmt.Errorf("%s: archive entry %s: %w", name, p, err)
		}
		if !inCur {
			closeUp()
			cur, curDir = newArchiveFeed(b), path.Dir(p)
			cur.push(fedFile{p, data})
			select {
			case work <- run(n, cur, name):
				n++
			case <-ctx.Done():
				return n, ctx.Err()
			}
			continue
		}
		cur.push(fedFile{p, data})
	}
	return n, nil
}

// isTablePath reports whether a path lies under a folder named as a table.
func isTablePath(p string) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if slices.Contains(Tables, path.Base(d)) {
			return true
		}
	}
	return false
}

// tableParent is the folder holding the outermost table folder of p.
func tableParent(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts[:len(parts)-1] {
		if slices.Contains(Tables, s) {
			if i == 0 {
				return "."
			}
			return strings.Join(parts[:i], "/")
		}
	}
	return path.Dir(p)
}

// fileHash is one file's part of a run digest.
type fileHash struct {
	rel   string
	table int // -1 for the manifest, else the index in Tables
	step  int64
	size  int
	sum   [sha256.Size]byte
}

// digestOf combines the files' hashes in the digest's order: the
// manifest, then each table in Tables order by step.
func digestOf(files []fileHash) string {
	slices.SortFunc(files, func(a, b fileHash) int {
		if c := cmp.Compare(a.table, b.table); c != 0 {
			return c
		}
		if c := cmp.Compare(a.step, b.step); c != 0 {
			return c
		}
		return strings.Compare(a.rel, b.rel)
	})
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00%x\n", f.rel, f.size, f.sum)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// readFed reads one run from its feed: the manifest, then each committed
// segment as it comes, decoded and (samples) reduced at once. A run Want
// declines gives nil.
func readFed(ctx context.Context, feed fileFeed, label string, opt StreamOptions) (*Run, error) {
	s := source{label: label}
	mf, ok, err := feed.next(ctx)
	if err != nil {
		return nil, err
	}
	if !ok || path.Base(mf.path) != ManifestFile {
		return nil, fmt.Errorf("a run's files came without its manifest")
	}
	feed.done(mf)
	dir := path.Dir(mf.path)
	m, err := decodeManifest(mf.data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name(mf.path), err)
	}
	if opt.Want != nil && !opt.Want(m) {
		return nil, nil
	}
	r := &Run{Dir: s.name(dir), Manifest: m}
	idx := segmentIndex(m)
	hashes := []fileHash{{rel: ManifestFile, table: -1, size: len(mf.data), sum: sha256.Sum256(mf.data)}}
	read := map[string][]segment{}
	var red SampleReducer
	if opt.Samples != nil {
		red = opt.Samples(m)
	}
	sdef := samplesFor(m.SchemaVersion)
	var sinfo tableInfo
	var prompts []PromptRow
	for {
		f, ok, err := feed.next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		rel := strings.TrimPrefix(f.path, dir+"/")
		if dir == "." {
			rel = f.path
		}
		table, ti, step, isSeg := segmentOf(rel)
		if !isSeg || step > m.LastStep {
			feed.done(f)
			continue
		}
		read[table] = append(read[table], segment{f.path, step})
		hashes = append(hashes, fileHash{rel: rel, table: ti, step: step, size: len(f.data), sum: sha256.Sum256(f.data)})
		if err := checkReadSegment(idx, rel, f.data); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(f.path), err)
		}
		if slices.Contains(opt.SkipTables, table) {
			table = ""
		}
		switch table {
		case TableSteps:
			err = decodeInto(stepsDef, f.data, &r.Steps, nil)
		case TableEvals:
			err = decodeInto(evalsDef, f.data, &r.Evals, nil)
		case TableTiming:
			err = decodeInto(timingDef, f.data, &r.Timing, nil)
		case TablePrompts:
			if !opt.SkipPrompts {
				err = decodeInto(promptsDef, f.data, &prompts, nil)
			}
		case TableSamples:
			if opt.SampleSplits != nil {
				if sinfo.name == "" {
					sinfo = sdef.info()
				}
				var holds bool
				if holds, err = segmentHolds(sinfo, f.data, "split", opt.SampleSplits); err != nil || !holds {
					break
				}
			}
			var skip []string
			if opt.SkipPrompts {
				skip = []string{"prompt"}
			}
			err = decodeBatches(sdef, f.data, SampleBatchRows, skip, func(rows []SampleRow) {
				if opt.SkipPrompts {
					for i := range rows {
						rows[i].promptID = 0
					}
				}
				if red != nil {
					red.Add(rows)
				} else {
					r.Samples = append(r.Samples, rows...)
				}
			})
		}
		feed.done(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(f.path), err)
		}
	}
	for _, tb := range Tables {
		if miss := missingSegments(idx, tb, read[tb], dir); len(miss) > 0 {
			return nil, fmt.Errorf("%s: %w", s.name(path.Join(dir, miss[0])), ErrMissingFile)
		}
	}
	if red != nil {
		r.Samples = red.Rows()
	}
	// the rows were appended segment by segment: keep them at their size,
	// with their short strings copied out of the segments' column buffers
	// (which a string pointing into them would keep alive)
	in := interner{}
	r.Steps = slices.Clone(r.Steps)
	for i := range r.Steps {
		s := &r.Steps[i]
		s.RunID, s.Policy, s.Role, s.RoleCos = in.str(s.RunID), in.str(s.Policy), in.str(s.Role), in.keys(s.RoleCos)
	}
	r.Evals = slices.Clone(r.Evals)
	for i := range r.Evals {
		e := &r.Evals[i]
		e.RunID, e.Workflow, e.Split, e.Role, e.FallbackRate = in.str(e.RunID), in.str(e.Workflow), in.str(e.Split), in.str(e.Role), in.keys(e.FallbackRate)
	}
	r.Timing = slices.Clone(r.Timing)
	for i := range r.Timing {
		r.Timing[i].RunID = in.str(r.Timing[i].RunID)
	}
	sortTableRows(stepsDef, r.Steps)
	sortTableRows(evalsDef, r.Evals)
	sortTableRows(timingDef, r.Timing)
	sortTableRows(sdef, r.Samples)
	if !opt.SkipPrompts && m.SchemaVersion >= 2 {
		sortTableRows(promptsDef, prompts)
		if err := joinPrompts(r.Samples, prompts); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(path.Join(dir, TableSamples)), err)
		}
	}
	r.Digest = digestOf(hashes)
	return r, nil
}

// segmentOf splits a path inside a run folder into its table and
// segment step; isSeg false for any other file.
func segmentOf(rel string) (table string, ti int, step int64, isSeg bool) {
	d, f := path.Split(rel)
	d = strings.TrimSuffix(d, "/")
	ti = slices.Index(Tables, d)
	if ti < 0 {
		return "", 0, 0, false
	}
	step, ok := segmentStep(f)
	return d, ti, step, ok
}

// decodeInto decodes a segment and appends its rows to dst, leaving the
// columns named in skip unset.
func decodeInto[R any](t *tableDef[R], data []byte, dst *[]R, skip []string) error {
	tbl, err := openTable(t.info(), data)
	if err != nil {
		return err
	}
	defer tbl.Release()
	rows, err := t.rowsSkipping(tbl, skip)
	if err != nil {
		return err
	}
	*dst = append(*dst, rows...)
	return nil
}

func sortTableRows[R any](t *tableDef[R], rows []R) {
	slices.SortStableFunc(rows, func(a, b R) int { return t.order(&a, &b) })
}

// interner hands out one copy of each short string it is given.
type interner map[string]string

func (in interner) str(s string) string {
	if v, ok := in[s]; ok {
		return v
	}
	v := strings.Clone(s)
	in[v] = v
	return v
}

// keys returns m with its keys interned.
func (in interner) keys(m map[string]float64) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[in.str(k)] = v
	}
	return out
}
