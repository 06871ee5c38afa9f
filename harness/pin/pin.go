// Package pin records provenance: the git commit and dirty state of the
// repository holding a spec, the toolchain and module versions, seeds, and
// hashes of the data and checkpoint files a run reads.
package pin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
)

// Provenance is what a run manifest records about where a result came from.
type Provenance struct {
	Repo       string            `json:"repo"`        // repository root
	Commit     string            `json:"commit"`      // HEAD commit hash
	Branch     string            `json:"branch"`      // "" when HEAD is detached
	Dirty      bool              `json:"dirty"`       // uncommitted changes present
	DiffHash   string            `json:"diff_hash"`   // sha256 of the uncommitted changes, "" when clean
	AllowDirty bool              `json:"allow_dirty"` // run was started with --allow-dirty
	GoVersion  string            `json:"go_version"`
	Modules    map[string]string `json:"modules"` // module path -> version
	Files      map[string]string `json:"files"`   // path -> sha256 of referenced data and checkpoints
	// Slurm is the Slurm job that last ran the run (nil outside Slurm).
	Slurm *Slurm `json:"slurm,omitempty"`

	changed []string // changed paths, for messages
}

// ErrDirty is returned (wrapped) by Resolve when the repository holding the
// spec has uncommitted changes and dirty trees are not allowed.
var ErrDirty = errors.New("uncommitted changes")

// ErrNoRepo is returned (wrapped) by Resolve when the spec is outside any
// git repository and that is not allowed.
var ErrNoRepo = errors.New("not inside a git repository")

// Resolve pins a spec: it records the commit of the git repository that
// holds specPath (found by walking up to the nearest .git), whether the work
// tree is dirty and a hash of the changes, the Go version, the module
// versions of this binary, and SHA-256 of the spec and of every path in
// files (a folder hashes as the list of its files' hashes, see HashFile).
//
// A dirty tree or a spec outside any repository is refused with an error
// wrapping ErrDirty or ErrNoRepo, unless allowDirty is set; then it is
// recorded (Dirty and AllowDirty are true; outside a repository Commit and
// Repo are empty).
func Resolve(specPath string, allowDirty bool, files []string) (Provenance, error) {
	p, err := Inspect(specPath)
	if err != nil {
		return Provenance{}, err
	}
	p.AllowDirty = allowDirty
	p.Slurm = SlurmFromEnv(os.Getenv)
	if !allowDirty {
		if p.Repo == "" {
			return Provenance{}, fmt.Errorf("pin: spec %s is %w, so results cannot be tied to a commit; commit it to a repository or pass --allow-dirty", specPath, ErrNoRepo)
		}
		if p.Dirty {
			return Provenance{}, fmt.Errorf("pin: repository %s has %w (%s); commit them or pass --allow-dirty to record the dirty state", p.Repo, ErrDirty, p.changedSummary())
		}
	}
	p.Files = map[string]string{}
	for _, f := range append([]string{specPath}, files...) {
		h, err := HashFile(f)
		if err != nil {
			return Provenance{}, err
		}
		p.Files[p.relName(f)] = h
	}
	return p, nil
}

// Inspect gathers the provenance of specPath without any policy: it never
// refuses a dirty tree and does not hash files. A spec outside any
// repository gives Repo "" and Dirty true.
func Inspect(specPath string) (Provenance, error) {
	abs, err := filepath.Abs(specPath)
	if err != nil {
		return Provenance{}, fmt.Errorf("pin: spec %s: %w", specPath, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return Provenance{}, fmt.Errorf("pin: spec: %w", err)
	}
	p := Provenance{GoVersion: runtime.Version(), Modules: moduleVersions(), Files: map[string]string{}}
	repo, err := git.PlainOpenWithOptions(filepath.Dir(abs), &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		p.Dirty = true
		return p, nil
	}
	if err != nil {
		return Provenance{}, fmt.Errorf("pin: open repository of %s: %w", specPath, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return Provenance{}, fmt.Errorf("pin: repository of %s: %w", specPath, err)
	}
	p.Repo = wt.Filesystem.Root()
	head, err := repo.Head()
	if err != nil {
		return Provenance{}, fmt.Errorf("pin: repository %s has no commit at HEAD (commit something first): %w", p.Repo, err)
	}
	p.Commit = head.Hash().String()
	if head.Name().IsBranch() {
		p.Branch = head.Name().Short()
	}
	st, err := wt.Status()
	if err != nil {
		return Provenance{}, fmt.Errorf("pin: status of %s: %w", p.Repo, err)
	}
	self, _ := filepath.Rel(p.Repo, abs)
	changed := make([]string, 0, len(st))
	for path, fs := range st {
		if (fs.Staging != git.Unmodified || fs.Worktree != git.Unmodified) && !IsOutput(path) && !otherSpec(path, filepath.ToSlash(self), fs) {
			changed = append(changed, path)
		}
	}
	sort.Strings(changed)
	if len(changed) > 0 {
		p.Dirty = true
		h := sha256.New()
		for _, path := range changed {
			fs := st[path]
			content := "-"
			if b, err := os.ReadFile(filepath.Join(p.Repo, filepath.FromSlash(path))); err == nil {
				sum := sha256.Sum256(b)
				content = hex.EncodeToString(sum[:])
			}
			fmt.Fprintf(h, "%c%c %s %s\n", fs.Staging, fs.Worktree, content, path)
		}
		p.DiffHash = hex.EncodeToString(h.Sum(nil))
		p.changed = changed
	}
	return p, nil
}

// otherSpec reports whether an untracked path is an experiment file other
// than the spec being pinned (self, relative to the repository): a run
// reads only its own spec, so a user's untracked mine.yaml does not make
// `make demo` refuse the tree. The spec itself, and every tracked change,
// still counts.
func otherSpec(path, self string, fs *git.FileStatus) bool {
	if fs.Worktree != git.Untracked || path == self {
		return false
	}
	return strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")
}

func (p Provenance) changedSummary() string {
	const show = 5
	n := len(p.changed)
	if n == 0 {
		return "changes"
	}
	list := p.changed
	if n > show {
		list = list[:show]
	}
	s := fmt.Sprintf("%d changed path", n)
	if n != 1 {
		s += "s"
	}
	s += ": " + strings.Join(list, ", ")
	if n > show {
		s += ", ..."
	}
	return s
}

// relName names a file relative to the repository root when it lies inside
// it (slash-separated), and by its absolute path otherwise.
func (p Provenance) relName(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if p.Repo != "" {
		if rel, err := filepath.Rel(p.Repo, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return filepath.ToSlash(rel)
		}
	}
	return abs
}

func moduleVersions() map[string]string {
	out := map[string]string{}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	out[bi.Main.Path] = bi.Main.Version
	for _, d := range bi.Deps {
		v := d.Version
		if d.Replace != nil {
			v += " => " + d.Replace.Path + "@" + d.Replace.Version
		}
		out[d.Path] = v
	}
	return out
}

// HashFile returns the hex SHA-256 of a file. For a folder (such as a
// Hugging Face checkpoint) it is the SHA-256 of the lines
// "<hex sha256 of file>  <slash-separated relative path>\n" of every regular
// file below it, sorted by path; symbolic links are followed only at the top.
func HashFile(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("pin: hash: %w", err)
	}
	if !info.IsDir() {
		return hashOne(path)
	}
	var lines []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		h, err := hashOne(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(path, p)
		if err != nil {
			return err
		}
		lines = append(lines, h+"  "+filepath.ToSlash(rel)+"\n")
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("pin: hash folder %s: %w", path, err)
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		io.WriteString(h, l)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashOne(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("pin: hash: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("pin: hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// IsOutput reports whether a repository path (slash-separated, relative to
// the root) is an output of marlow rather than an input to a run: a report
// folder written by `marlow report` (reports/<experiment>/..., but not the
// Go sources at the top of reports/ nor reports/testdata). Changes there
// never make a tree dirty, so regenerating a report does not block the next
// run.
func IsOutput(path string) bool {
	rest, ok := strings.CutPrefix(path, "reports/")
	if !ok {
		return false
	}
	dir, _, nested := strings.Cut(rest, "/")
	return nested && dir != "testdata"
}
