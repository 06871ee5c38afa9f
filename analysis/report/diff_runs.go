package report

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/marlowlab/marlow/harness/runlog"
)

// BasisIdentical: the cell condition rests on the same runs on both sides,
// byte for byte (same run IDs and committed segments, by their SHA-256),
// so B − A is exactly 0: the sides are one study, not two
// independent ones, and no interval is needed.
const BasisIdentical = "identical runs"

// ConfigChange is one config key whose value differs between runs of A
// and B with the same run ID: Line reads "key: a -> b"; Runs counts the
// runs that differ so.
type ConfigChange struct {
	Line string
	Runs int
}

// DiffRunsInfo is what the runs' manifests add to a diff: the config keys
// that differ between the two sides' runs, and which runs are identical.
type DiffRunsInfo struct {
	// Known: both sides' manifests were read (otherwise config keys and
	// identical runs are not compared, and Why says why).
	Known bool
	Why   string
	// Matched counts the runs present on both sides (by run ID); OnlyA and
	// OnlyB the others.
	Matched, OnlyA, OnlyB int
	// Identical counts the matched runs that are byte-identical.
	Identical int
	Changes   []ConfigChange // sorted by key
}

// identicalRuns reports whether two manifests describe byte-identical run
// logs: the same committed segments (path and SHA-256). The configs may
// differ: a base run does not train, so its logs stay byte-identical when
// only the training recipe (grpo.lr, say) changed. Manifests without an
// inventory are never identical.
func identicalRuns(a, b runlog.Manifest) bool {
	if a.Inventory == nil || b.Inventory == nil || len(a.Inventory.Segments) == 0 ||
		len(a.Inventory.Segments) != len(b.Inventory.Segments) {
		return false
	}
	for i, s := range a.Inventory.Segments {
		t := b.Inventory.Segments[i]
		if s.Path != t.Path || s.SHA256 != t.SHA256 {
			return false
		}
	}
	return true
}

// DiffRuns is Diff with the runs' manifests of both sides (nil for a side
// without run logs, with why saying so): it compares the runs' configs by
// run ID, and judges a cell condition whose runs are byte-identical on
// both sides as unchanged (BasisIdentical) instead of comparing the sides
// as independent studies.
func DiffRuns(a, b []SummaryRow, ma, mb []runlog.Manifest, why string) DiffResult {
	d := Diff(a, b)
	if ma == nil || mb == nil {
		d.Runs = DiffRunsInfo{Why: why}
		return d
	}
	info := DiffRunsInfo{Known: true}
	byID := func(ms []runlog.Manifest) map[string]runlog.Manifest {
		out := map[string]runlog.Manifest{}
		for _, m := range ms {
			out[m.RunID] = m
		}
		return out
	}
	ia, ib := byID(ma), byID(mb)
	same := map[string]bool{}
	counts := map[string]int{}
	for _, id := range slices.Sorted(maps.Keys(ia)) {
		x := ia[id]
		y, ok := ib[id]
		if !ok {
			info.OnlyA++
			continue
		}
		info.Matched++
		if identicalRuns(x, y) {
			info.Identical++
			same[id] = true
		}
		la, errA := runlog.ConfigLeaves(x.Config)
		lb, errB := runlog.ConfigLeaves(y.Config)
		if errA != nil || errB != nil {
			counts[fmt.Sprintf("(config of run %s unreadable: %v)", id, errors.Join(errA, errB))]++
			continue
		}
		for _, line := range runlog.LeavesDiff(la, lb) {
			counts[line]++
		}
	}
	for id := range ib {
		if _, ok := ia[id]; !ok {
			info.OnlyB++
		}
	}
	for _, line := range slices.Sorted(maps.Keys(counts)) {
		info.Changes = append(info.Changes, ConfigChange{Line: line, Runs: counts[line]})
	}
	d.Runs = info
	// the run IDs of each cell condition, from the summaries' run rows
	runIDs := func(rows []SummaryRow) map[string][]string {
		out := map[string][]string{}
		for _, r := range rows {
			if r.Kind == "run" && r.RunID != "" {
				k := cellLabel(r)
				out[k] = append(out[k], r.RunID)
			}
		}
		for k := range out {
			sort.Strings(out[k])
		}
		return out
	}
	ra, rb := runIDs(a), runIDs(b)
	for i := range d.Cells {
		c := &d.Cells[i]
		k := fmt.Sprintf("%s/%s/%s %s", c.Task, c.Workflow, c.Scale, c.Condition)
		ids := ra[k]
		if len(ids) == 0 || !slices.Equal(ids, rb[k]) {
			continue
		}
		n := 0
		for _, id := range ids {
			if same[id] {
				n++
			}
		}
		c.IdenticalRuns, c.Runs = n, len(ids)
	}
	for i := range d.Rows {
		r := &d.Rows[i]
		for _, c := range d.Cells {
			if c.Task == r.Task && c.Workflow == r.Workflow && c.Scale == r.Scale && c.Condition == r.Condition && c.Identical() {
				r.Basis, r.Significant, r.DLo, r.DHi = BasisIdentical, false, 0, 0
				break
			}
		}
	}
	return d
}

// ArchiveManifests reads the manifests of every run in the .tar.zst
// archives of a report folder (reports/<experiment>/*.tar.zst), in name
// order; ok is false when the folder holds no archive.
func ArchiveManifests(dir string) (ms []runlog.Manifest, ok bool, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.tar.zst"))
	if err != nil {
		return nil, false, err
	}
	sort.Strings(paths)
	for _, p := range paths {
		found, err := runlog.Manifests(p)
		if err != nil {
			return nil, false, err
		}
		got, err := foundManifests(found)
		if err != nil {
			return nil, false, err
		}
		ms = append(ms, got...)
	}
	return ms, len(paths) > 0, nil
}

// foundManifests keeps the manifests of found runs, or names the first
// one that could not be read.
func foundManifests(found []runlog.FoundRun) ([]runlog.Manifest, error) {
	out := make([]runlog.Manifest, 0, len(found))
	for _, f := range found {
		if f.Err != nil {
			return nil, fmt.Errorf("%s: %w", f.Dir, f.Err)
		}
		out = append(out, f.Manifest)
	}
	return out, nil
}

// ManifestsAt reads the manifests of the runs in the log archives of
// reports/<experiment>/ as committed at revision rev of the git
// repository at or above repoPath (each archive is copied to a temporary
// file and read there); ok is false when that folder holds no archive.
func ManifestsAt(repoPath, rev, experiment string) (ms []runlog.Manifest, ok bool, err error) {
	repo, err := git.PlainOpen(repoPath)
	if err != nil {
		repo, err = git.PlainOpenWithOptions(repoPath, &git.PlainOpenOptions{DetectDotGit: true})
	}
	if err != nil {
		return nil, false, fmt.Errorf("opening git repository at %s: %w", repoPath, err)
	}
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, false, fmt.Errorf("revision %q: %w", rev, err)
	}
	commit, err := repo.CommitObject(*h)
	if err != nil {
		return nil, false, fmt.Errorf("revision %q: %w", rev, err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, false, fmt.Errorf("revision %q: reading tree: %w", rev, err)
	}
	sub, err := tree.Tree(path.Join("reports", experiment))
	if errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("revision %q: %w", rev, err)
	}
	tmp, err := os.MkdirTemp("", "marlow-diff-")
	if err != nil {
		return nil, false, err
	}
	defer os.RemoveAll(tmp)
	var names []string
	for _, e := range sub.Entries {
		if e.Mode.IsFile() && strings.HasSuffix(e.Name, ".tar.zst") {
			names = append(names, e.Name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		f, err := sub.File(name)
		if err != nil {
			return nil, false, fmt.Errorf("revision %q: reports/%s/%s: %w", rev, experiment, name, err)
		}
		p := filepath.Join(tmp, name)
		if err := copyBlob(f, p); err != nil {
			return nil, false, fmt.Errorf("revision %q: reports/%s/%s: %w", rev, experiment, name, err)
		}
		found, err := runlog.Manifests(p)
		if err != nil {
			return nil, false, fmt.Errorf("revision %q: %w", rev, err)
		}
		got, err := foundManifests(found)
		if err != nil {
			return nil, false, fmt.Errorf("revision %q: %w", rev, err)
		}
		ms = append(ms, got...)
	}
	return ms, len(names) > 0, nil
}

func copyBlob(f *object.File, p string) error {
	rd, err := f.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	out, err := os.Create(p)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, rd); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
