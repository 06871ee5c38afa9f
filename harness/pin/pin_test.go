package pin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// newRepo makes a repository with one commit holding spec.yaml and
// data.txt and returns its root and the commit hash.
func newRepo(t *testing.T) (string, plumbing.Hash) {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "seeds", "spec.yaml"), "experiment: x\n")
	write(t, filepath.Join(dir, "data.txt"), "abc")
	write(t, filepath.Join(dir, ".gitignore"), "runs/\n")
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddGlob("."); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}
	h, err := wt.Commit("init", &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		t.Fatal(err)
	}
	return dir, h
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	cases := []struct {
		name       string
		setup      func(t *testing.T, dir string, head plumbing.Hash)
		allowDirty bool
		wantErr    error
		wantDirty  bool
		wantBranch string
		noRepo     bool
	}{
		{name: "clean", wantBranch: "master"},
		{name: "ignored files keep the tree clean", wantBranch: "master",
			setup: func(t *testing.T, dir string, _ plumbing.Hash) {
				write(t, filepath.Join(dir, "runs", "x", "m.json"), "{}")
			}},
		{name: "dirty refused", wantErr: ErrDirty,
			setup: func(t *testing.T, dir string, _ plumbing.Hash) { write(t, filepath.Join(dir, "data.txt"), "changed") }},
		{name: "dirty accepted with flag", allowDirty: true, wantDirty: true, wantBranch: "master",
			setup: func(t *testing.T, dir string, _ plumbing.Hash) { write(t, filepath.Join(dir, "data.txt"), "changed") }},
		{name: "untracked file is dirty", wantErr: ErrDirty,
			setup: func(t *testing.T, dir string, _ plumbing.Hash) { write(t, filepath.Join(dir, "new.go"), "package x") }},
		{name: "another untracked spec keeps the tree clean", wantBranch: "master",
			setup: func(t *testing.T, dir string, _ plumbing.Hash) {
				write(t, filepath.Join(dir, "mine.yaml"), "experiment: mine\n")
			}},
		{name: "a tracked spec changed is dirty", wantErr: ErrDirty,
			setup: func(t *testing.T, dir string, _ plumbing.Hash) {
				write(t, filepath.Join(dir, "seeds", "spec.yaml"), "experiment: y\n")
			}},
		{name: "no repository refused", noRepo: true, wantErr: ErrNoRepo},
		{name: "no repository accepted with flag", noRepo: true, allowDirty: true, wantDirty: true},
		{name: "detached head", wantBranch: "",
			setup: func(t *testing.T, dir string, head plumbing.Hash) {
				repo, err := git.PlainOpen(dir)
				if err != nil {
					t.Fatal(err)
				}
				if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, head)); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var dir string
			var head plumbing.Hash
			if c.noRepo {
				dir = t.TempDir()
				write(t, filepath.Join(dir, "seeds", "spec.yaml"), "experiment: x\n")
				write(t, filepath.Join(dir, "data.txt"), "abc")
			} else {
				dir, head = newRepo(t)
			}
			if c.setup != nil {
				c.setup(t, dir, head)
			}
			spec := filepath.Join(dir, "seeds", "spec.yaml")
			p, err := Resolve(spec, c.allowDirty, []string{filepath.Join(dir, "data.txt")})
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err = %v, want %v", err, c.wantErr)
				}
				if !strings.Contains(err.Error(), "--allow-dirty") {
					t.Errorf("message does not tell how to proceed: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Dirty != c.wantDirty || p.AllowDirty != c.allowDirty || p.Branch != c.wantBranch {
				t.Errorf("dirty %v allow %v branch %q; want %v %v %q", p.Dirty, p.AllowDirty, p.Branch, c.wantDirty, c.allowDirty, c.wantBranch)
			}
			if c.noRepo {
				if p.Repo != "" || p.Commit != "" {
					t.Errorf("outside a repo: repo %q commit %q", p.Repo, p.Commit)
				}
			} else if p.Commit != head.String() {
				t.Errorf("commit %s, want %s", p.Commit, head)
			}
			if (p.DiffHash != "") != (c.wantDirty && !c.noRepo) {
				t.Errorf("diff hash %q with dirty=%v", p.DiffHash, c.wantDirty)
			}
			// sha256("abc") and the spec's hash, keyed relative to the repository.
			dataKey, specKey := "data.txt", "seeds/spec.yaml"
			if c.noRepo {
				dataKey, specKey = filepath.Join(dir, "data.txt"), spec
			}
			wantData := "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
			if c.wantDirty && !c.noRepo {
				wantData = "" // changed content, checked below
			}
			if got := p.Files[dataKey]; wantData != "" && got != wantData {
				t.Errorf("files[%s] = %q, want %s (files %v)", dataKey, got, wantData, p.Files)
			}
			if p.Files[specKey] == "" {
				t.Errorf("spec not hashed under %s: %v", specKey, p.Files)
			}
			if p.GoVersion == "" || len(p.Modules) == 0 {
				t.Errorf("go version %q modules %v", p.GoVersion, p.Modules)
			}
		})
	}
}

func TestDiffHashTracksChanges(t *testing.T) {
	dir, _ := newRepo(t)
	spec := filepath.Join(dir, "seeds", "spec.yaml")
	hashes := map[string]bool{}
	for _, content := range []string{"one", "two", "one"} {
		write(t, filepath.Join(dir, "data.txt"), content)
		p, err := Inspect(spec)
		if err != nil {
			t.Fatal(err)
		}
		hashes[p.DiffHash] = true
	}
	if len(hashes) != 2 {
		t.Fatalf("diff hashes of one, two, one: %d distinct, want 2", len(hashes))
	}
}

func TestHashFile(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.txt"), "abc")
	write(t, filepath.Join(dir, "ck", "config.json"), "{}")
	write(t, filepath.Join(dir, "ck", "sub", "model.safetensors"), "abc")
	cases := []struct {
		path, want string
	}{
		{filepath.Join(dir, "a.txt"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		// sha256 of "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a  config.json\n" +
		// "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  sub/model.safetensors\n"
		{filepath.Join(dir, "ck"), folderHash},
	}
	for _, c := range cases {
		got, err := HashFile(c.path)
		if err != nil || got != c.want {
			t.Errorf("HashFile(%s) = %s, %v; want %s", c.path, got, err, c.want)
		}
	}
	if _, err := HashFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("no error for a missing file")
	}
}

// folderHash was computed independently with Python's hashlib from the
// listing in TestHashFile.
const folderHash = "3d05577f868454c1d2263b3e3a0c8e1c0476b6b5cf8e183f66b875a343ba622f"

func TestIsOutput(t *testing.T) {
	cases := []struct {
		path string
		want bool
	}{
		{"reports/demo/README.md", true},
		{"reports/demo/figures/accuracy.png", true},
		{"reports/figures.go", false},
		{"reports/testdata/golden/README.md", false},
		{"runs/demo/x/manifest.json", false},
		{"harness/spec/spec.go", false},
		{"reportsx/demo/README.md", false},
	}
	for _, c := range cases {
		if got := IsOutput(c.path); got != c.want {
			t.Errorf("IsOutput(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}

func TestReportFolderKeepsTreeClean(t *testing.T) {
	dir, _ := newRepo(t)
	write(t, filepath.Join(dir, "reports", "x", "README.md"), "# report\n")
	p, err := Resolve(filepath.Join(dir, "seeds", "spec.yaml"), false, nil)
	if err != nil {
		t.Fatalf("a new report folder made the tree dirty: %v", err)
	}
	if p.Dirty {
		t.Fatal("provenance says dirty after writing only a report folder")
	}
	write(t, filepath.Join(dir, "reports", "render.go"), "package reports\n")
	if _, err := Resolve(filepath.Join(dir, "seeds", "spec.yaml"), false, nil); err == nil {
		t.Fatal("a new source file under reports/ did not make the tree dirty")
	}
}

// An untracked spec is refused when it is the spec being run (commit it or
// pass --allow-dirty), though it does not dirty the tree for other specs.
func TestUntrackedSpecItself(t *testing.T) {
	dir, _ := newRepo(t)
	mine := filepath.Join(dir, "mine.yaml")
	write(t, mine, "experiment: mine\n")
	if _, err := Resolve(mine, false, nil); !errors.Is(err, ErrDirty) || !strings.Contains(err.Error(), "mine.yaml") {
		t.Errorf("untracked spec run: err %v, want %v naming mine.yaml", err, ErrDirty)
	}
	if _, err := Resolve(filepath.Join(dir, "seeds", "spec.yaml"), false, nil); err != nil {
		t.Errorf("another spec: %v", err)
	}
}
