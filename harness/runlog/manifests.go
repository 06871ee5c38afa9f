package runlog

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
)

// FoundRun is one run folder found under a source, with its manifest or
// the error reading it.
type FoundRun struct {
	// Dir is the run folder: a path on disk for a folder source, the
	// archive's path joined with the run's path inside it for an archive.
	Dir      string
	Manifest Manifest
	Err      error // nil when the manifest was read
	// InArchive is true when the run was read from a .tar.zst archive.
	InArchive bool
}

// Manifests lists every run under src (a runs tree, one run folder or a
// .tar.zst archive written by Archive), in path order, with its manifest;
// it reads manifests only. A run whose manifest cannot be read is listed
// with Err set, and so is a folder that holds run tables but no manifest
// (Err wraps ErrMissingManifest).
func Manifests(src string) ([]FoundRun, error) {
	s, err := openSourceKeeping(src, func(p string) bool { return path.Base(p) == ManifestFile })
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	dirs, orphans, err := findRuns(s)
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	st, err := os.Stat(src)
	archived := err == nil && !st.IsDir()
	out := make([]FoundRun, 0, len(dirs)+len(orphans))
	for _, d := range dirs {
		m, err := readManifestFS(s, d)
		out = append(out, FoundRun{Dir: s.name(d), Manifest: m, Err: err, InArchive: archived})
	}
	for _, o := range orphans {
		out = append(out, FoundRun{Dir: s.name(o), InArchive: archived,
			Err: fmt.Errorf("%s: %w, but it holds run tables", s.name(o), ErrMissingManifest)})
	}
	slices.SortStableFunc(out, func(a, b FoundRun) int { return strings.Compare(a.Dir, b.Dir) })
	return out, nil
}
