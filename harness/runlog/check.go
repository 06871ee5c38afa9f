package runlog

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Problem is one thing wrong in a runs tree: the file (or folder) and what
// is wrong with it. Err wraps one of the named errors (ErrTruncated,
// ErrBadMagic, ErrForeignSchema, ...) where one applies.
type Problem struct {
	Path string
	Err  error
}

func (p Problem) String() string { return fmt.Sprintf("%s: %v", p.Path, p.Err) }

// Check inspects every run under src (a runs tree, one run folder or a
// .tar.zst archive) and returns every problem found, in path order: folders
// with table data but no manifest, unreadable manifests, segments that are
// truncated, not Parquet, of a foreign schema or version, or corrupt, and
// rows that belong to another run, lie outside their segment's steps or
// repeat a key, and files that do not match the manifest's inventory
// (missing, unlisted, resized or altered segments and checkpoint files,
// compared by SHA-256; archives carry no checkpoints). Uncommitted
// temporaries and segments past the last committed step are not problems:
// they are what a crash leaves, and reopening the run removes them. An
// empty result means the tree is sound.
func Check(src string) []Problem { return CheckWith(src, CheckOptions{}) }

// CheckOptions add checks that need more than runlog knows.
type CheckOptions struct {
	// ConfigHash, when set, recomputes the hash of a manifest's stored
	// config (spec.StoredConfigHash): a config that does not hash to its
	// config_hash is a damaged manifest.
	ConfigHash func(config any) (string, error)
	// Keep, when set, restricts the check to the runs for which it returns
	// true, given the run folder's path inside src (slash-separated).
	// Folders holding run tables but no manifest are problems whatever it
	// says.
	Keep func(runDir string) bool
}

// CheckWith is Check with options.
func CheckWith(src string, opt CheckOptions) []Problem {
	probs, _ := CheckRuns(src, opt)
	return probs
}

// CheckRuns is CheckWith that also returns how many runs it read.
func CheckRuns(src string, opt CheckOptions) (probs []Problem, runs int) {
	s, err := openSource(src)
	if err != nil {
		return []Problem{{Path: src, Err: err}}, 0
	}
	dirs, orphans, err := findRuns(s)
	if err != nil {
		return []Problem{{Path: src, Err: err}}, 0
	}
	for _, o := range orphans {
		probs = append(probs, Problem{s.name(o), fmt.Errorf("%w: folder holds run tables", ErrMissingManifest)})
	}
	if len(dirs) == 0 && len(orphans) == 0 {
		return []Problem{{Path: src, Err: ErrNoRuns}}, 0
	}
	for _, d := range dirs {
		if opt.Keep != nil && !opt.Keep(d) {
			continue
		}
		runs++
		probs = append(probs, checkRun(s, d, opt)...)
	}
	slices.SortStableFunc(probs, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	return probs, runs
}

func checkRun(s source, dir string, opt CheckOptions) []Problem {
	m, err := parseManifest(s, dir)
	if err != nil {
		return []Problem{{s.name(path.Join(dir, ManifestFile)), err}}
	}
	probs := verifyConfig(s, dir, m, opt.ConfigHash)
	var content []Problem
	content = append(content, checkTable(s, dir, stepsDef, m)...)
	content = append(content, checkTable(s, dir, evalsDef, m)...)
	content = append(content, checkTable(s, dir, samplesFor(m.SchemaVersion), m)...)
	if m.SchemaVersion >= 2 {
		content = append(content, checkTable(s, dir, promptsDef, m)...)
	}
	content = append(content, checkTable(s, dir, timingDef, m)...)
	probs = append(probs, content...)
	// A file whose content is already reported is not reported again for
	// differing from the inventory.
	for _, p := range verifyInventory(s, dir, m, true, !s.archive) {
		if !slices.ContainsFunc(content, func(c Problem) bool { return c.Path == p.Path }) {
			probs = append(probs, p)
		}
	}
	return probs
}

func checkTable[R any](s source, dir string, t *tableDef[R], m Manifest) []Problem {
	segs, err := committedSegments(s, dir, t.name, m.LastStep)
	if err != nil {
		return []Problem{{s.name(path.Join(dir, t.name)), err}}
	}
	var probs []Problem
	seen := map[string]string{} // row key -> segment holding it
	prev := int64(-1)
	for _, sg := range segs {
		name := s.name(sg.path)
		data, err := fs.ReadFile(s.fsys, sg.path)
		if err != nil {
			probs = append(probs, Problem{name, err})
			continue
		}
		rows, err := t.decode(data)
		if err != nil {
			probs = append(probs, Problem{name, err})
			continue
		}
		var badRun, badStep, dups rowIssue
		for i := range rows {
			r := &rows[i]
			if id := *t.run(r); id != m.RunID {
				badRun.add(i, fmt.Sprintf("run id %q, manifest says %q", id, m.RunID))
			}
			if st := t.step(r); st <= prev || st > sg.step {
				badStep.add(i, fmt.Sprintf("step %d, outside this segment's steps %d..%d", st, prev+1, sg.step))
			}
			if t.key == nil {
				continue
			}
			k := t.key(r)
			if first, dup := seen[k]; dup {
				dups.add(i, fmt.Sprintf("repeats a row of %s (step %d)", first, t.step(r)))
			} else {
				seen[k] = path.Join(t.name, path.Base(sg.path))
			}
		}
		probs = badRun.problem(probs, name, ErrBadRow)
		probs = badStep.problem(probs, name, ErrBadRow)
		probs = dups.problem(probs, name, ErrDuplicateRow)
		prev = sg.step
	}
	return probs
}

// rowIssue counts the rows of a segment with one kind of fault and keeps
// the first, so a bad file gives one line per fault, not one per row.
type rowIssue struct {
	n, first int
	what     string
}

func (ri *rowIssue) add(row int, what string) {
	if ri.n == 0 {
		ri.first, ri.what = row, what
	}
	ri.n++
}

func (ri *rowIssue) problem(probs []Problem, name string, kind error) []Problem {
	switch ri.n {
	case 0:
		return probs
	case 1:
		return append(probs, Problem{name, fmt.Errorf("%w: row %d: %s", kind, ri.first, ri.what)})
	}
	return append(probs, Problem{name, fmt.Errorf("%w: %d rows, the first row %d: %s", kind, ri.n, ri.first, ri.what)})
}
