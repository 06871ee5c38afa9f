package pretrain

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/marlowlab/marlow/harness/model"
	"github.com/marlowlab/marlow/harness/spec"
)

// CommittedDir is the repository folder of committed checkpoints.
const CommittedDir = "seeds/models"

// CacheEnv names the environment variable of the cache root; the default
// root is ~/.cache/marlow, and checkpoints live under <root>/models/<key>.
const CacheEnv = "MARLOW_CACHE"

// Where says where a checkpoint was found.
type Where string

// Places a checkpoint can come from.
const (
	FromCommitted Where = "committed" // seeds/models in the repository
	FromCache     Where = "cache"     // $MARLOW_CACHE/models
	FromBuild     Where = "built"     // pretrained now, into the cache
)

// Locator finds and builds checkpoints.
type Locator struct {
	// RepoRoot is the repository holding seeds/models ("" skips it).
	RepoRoot string
	// OtherRoots are more repositories whose seeds/models are searched for
	// committed checkpoints after RepoRoot's (never built into).
	OtherRoots []string
	// CacheRoot is the cache root ("" means $MARLOW_CACHE, else
	// ~/.cache/marlow).
	CacheRoot string
	// NoBuild makes Ensure fail instead of pretraining a missing checkpoint.
	NoBuild bool
	// Options tune a build.
	Options Options
}

// CacheRootDir resolves the cache root.
func (l Locator) CacheRootDir() (string, error) {
	if l.CacheRoot != "" {
		return l.CacheRoot, nil
	}
	if v := os.Getenv(CacheEnv); v != "" {
		return v, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("pretrain: no cache folder: set $%s (%w)", CacheEnv, err)
	}
	return filepath.Join(home, ".cache", "marlow"), nil
}

// Paths returns the committed and cache folders of a job's checkpoint.
func (l Locator) Paths(job Job) (committed, cache string, err error) {
	key, err := job.Key()
	if err != nil {
		return "", "", err
	}
	name, err := job.DirName()
	if err != nil {
		return "", "", err
	}
	if l.RepoRoot != "" {
		committed = filepath.Join(l.RepoRoot, CommittedDir, name)
	}
	root, err := l.CacheRootDir()
	if err != nil {
		return "", "", err
	}
	return committed, filepath.Join(root, "models", key), nil
}

// Valid reports whether dir holds a complete checkpoint of job: the model
// files and a pretrain.json equal to the job's KeyJSON.
func Valid(dir string, job Job) bool {
	want, err := job.KeyJSON()
	if err != nil {
		return false
	}
	got, err := os.ReadFile(filepath.Join(dir, JobFile))
	if err != nil || !bytes.Equal(got, want) {
		return false
	}
	for _, f := range []string{model.ConfigFile, model.WeightsFile, model.TokenizerFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || !st.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// Find looks the job's checkpoint up: committed first, then the cache. It
// returns "" when neither holds it.
func (l Locator) Find(job Job) (string, Where, error) {
	committed, cache, err := l.Paths(job)
	if err != nil {
		return "", "", err
	}
	if committed != "" && Valid(committed, job) {
		return committed, FromCommitted, nil
	}
	if name, err := job.DirName(); err == nil {
		for _, root := range l.OtherRoots {
			if d := filepath.Join(root, CommittedDir, name); root != "" && root != l.RepoRoot && Valid(d, job) {
				return d, FromCommitted, nil
			}
		}
	}
	if Valid(cache, job) {
		return cache, FromCache, nil
	}
	return "", "", nil
}

// Searched lists the folders Find looks in for the job's checkpoint, in its
// order: the repository's seeds/models, the other roots', the cache. A
// lookup that found nothing can say where it looked.
func (l Locator) Searched(job Job) ([]string, error) {
	committed, cache, err := l.Paths(job)
	if err != nil {
		return nil, err
	}
	var out []string
	if committed != "" {
		out = append(out, committed)
	}
	if name, err := job.DirName(); err == nil {
		for _, root := range l.OtherRoots {
			if d := filepath.Join(root, CommittedDir, name); root != "" && root != l.RepoRoot && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return append(out, cache), nil
}

// Ensure returns the folder of the job's checkpoint, pretraining it into
// the cache when neither the repository nor the cache holds it.
func (l Locator) Ensure(ctx context.Context, job Job) (string, Where, error) {
	dir, where, _, err := l.ensure(ctx, job)
	return dir, where, err
}

// ensure is Ensure that also returns the build's Result (zero unless
// Where is FromBuild).
func (l Locator) ensure(ctx context.Context, job Job) (string, Where, Result, error) {
	dir, where, err := l.Find(job)
	if err != nil || dir != "" {
		return dir, where, Result{}, err
	}
	_, cache, err := l.Paths(job)
	if err != nil {
		return "", "", Result{}, err
	}
	searched, err := l.Searched(job)
	if err != nil {
		return "", "", Result{}, err
	}
	if l.NoBuild {
		return "", "", Result{}, fmt.Errorf("pretrain: no checkpoint for scale %s (looked in %s) and building is off; run `marlow pretrain`",
			job.Scale, strings.Join(searched, ", "))
	}
	if l.Options.Progress != nil {
		fmt.Fprintf(l.Options.Progress, "pretrain: scale %s: no committed or cached checkpoint (looked in %s); pretraining it into %s\n",
			job.Scale, strings.Join(searched, ", "), cache)
	}
	if err := clearInvalid(cache); err != nil {
		return "", "", Result{}, err
	}
	r, err := Train(ctx, job, cache, l.Options)
	if err != nil {
		return "", "", r, err
	}
	return cache, FromBuild, r, nil
}

// clearInvalid removes a stale or partial folder where a checkpoint is
// about to be built (callers have checked that it is not valid).
func clearInvalid(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("pretrain: clear invalid checkpoint folder: %w", err)
	}
	return nil
}

// RepoRootOf returns the repository of a spec file: the nearest folder at
// or above the spec's folder that holds seeds/models, else the nearest one
// with a .git entry or a go.mod file, else "".
func RepoRootOf(specFile string) string {
	for _, marker := range []string{CommittedDir, ".git", "go.mod"} {
		dir := filepath.Dir(specFile)
		for {
			if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
				return dir
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return ""
}

// WorkRoot returns the repository marlow runs in: the nearest folder at or
// above the working directory that holds seeds/models, else "". A spec kept
// outside any repository (say, a copy in /tmp) still finds the committed
// checkpoints of the checkout it is run from.
func WorkRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for dir := wd; ; {
		if st, err := os.Stat(filepath.Join(dir, CommittedDir)); err == nil && st.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Ensure returns the checkpoint folder of a tiny scale of spec s: the
// committed seeds/models/<scale>-<key12> of the repository holding the spec
// or, failing that, of the repository marlow runs in (WorkRoot), else
// $MARLOW_CACHE/models/<key>, else it pretrains it there first. The
// runner calls it before the first step of a tiny-scale run.
func Ensure(ctx context.Context, s *spec.Spec, scale string, opt Options) (string, error) {
	job, err := FromSpec(s, scale, ConfigOf(s, scale))
	if err != nil {
		return "", err
	}
	l := LocatorOf(s)
	l.Options = opt
	dir, _, err := l.Ensure(ctx, job)
	return dir, err
}

// LocatorOf is the Locator that Ensure, `marlow pretrain` and `marlow plan`
// all use for spec s, so that they agree on where a checkpoint comes from:
// the repository holding the spec (RepoRootOf), then the one marlow runs in
// (WorkRoot), then the cache.
func LocatorOf(s *spec.Spec) Locator {
	return Locator{RepoRoot: RepoRootOf(s.File), OtherRoots: []string{WorkRoot()}}
}

// Scales returns the spec's matrix scales that have a tiny shape, in the
// matrix order, or only the one named when only is not "".
func Scales(s *spec.Spec, only string) ([]string, error) {
	all := tinyScales(s)
	if only != "" {
		if !slices.Contains(all, only) {
			return nil, fmt.Errorf("pretrain: spec %s has no tiny scale %q (tiny scales: %v)", s.File, only, all)
		}
		return []string{only}, nil
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("pretrain: spec %s has no tiny scales; nothing to pretrain", s.File)
	}
	return all, nil
}

func tinyScales(s *spec.Spec) []string {
	var out []string
	for _, sc := range s.Scales() {
		if m, ok := s.Models[sc]; ok && m.Tiny != nil {
			out = append(out, sc)
		}
	}
	return out
}

// Built is the outcome of one scale of Build.
type Built struct {
	Scale  string
	Dir    string
	Where  Where
	Params int64
	Result Result // zero unless Where is FromBuild
}

// Build makes sure every job's checkpoint exists. With commit set, missing
// checkpoints are pretrained into the repository's seeds/models instead of
// the cache (a checkpoint already in the cache is copied there).
func Build(ctx context.Context, l Locator, jobs []Job, commit bool) ([]Built, error) {
	var out []Built
	for _, job := range jobs {
		b := Built{Scale: job.Scale, Params: job.Model.NumParams()}
		committed, cache, err := l.Paths(job)
		if err != nil {
			return out, err
		}
		switch {
		case committed != "" && Valid(committed, job):
			b.Dir, b.Where = committed, FromCommitted
		case commit && committed == "":
			return out, fmt.Errorf("pretrain: --commit needs a repository with %s", CommittedDir)
		case commit && Valid(cache, job):
			if err := copyDir(cache, committed); err != nil {
				return out, err
			}
			b.Dir, b.Where = committed, FromCache
		case commit:
			if err := clearInvalid(committed); err != nil {
				return out, err
			}
			r, err := Train(ctx, job, committed, l.Options)
			if err != nil {
				return out, err
			}
			b.Dir, b.Where, b.Result = committed, FromBuild, r
		default:
			dir, where, r, err := l.ensure(ctx, job)
			if err != nil {
				return out, err
			}
			b.Dir, b.Where, b.Result = dir, where, r
		}
		out = append(out, b)
	}
	return out, nil
}

// copyDir copies the regular files of src into a new folder dst, through a
// temporary sibling and a rename.
func copyDir(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("pretrain: copy checkpoint: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("pretrain: copy checkpoint: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return fmt.Errorf("pretrain: copy checkpoint: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return fmt.Errorf("pretrain: copy checkpoint: %w", err)
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o644); err != nil {
			return fmt.Errorf("pretrain: copy checkpoint: %w", err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("pretrain: copy checkpoint: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("pretrain: copy checkpoint into %s: %w", dst, err)
	}
	return nil
}
