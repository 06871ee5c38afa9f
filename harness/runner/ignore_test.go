package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/marlowlab/marlow/harness/pin"
)

// commitAll makes dir a repository with one commit of everything in it.
func commitAll(t *testing.T, dir string) {
	t.Helper()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddGlob("."); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}
	if _, err := wt.Commit("init", &git.CommitOptions{Author: sig, Committer: sig}); err != nil {
		t.Fatal(err)
	}
}

// A runs folder inside the repository, not named by any .gitignore of
// the repository, must not make the tree dirty: the second run of a clean
// tree is accepted without --allow-dirty, and the manifest records clean.
func TestRunsInsideRepoKeepTreeClean(t *testing.T) {
	repo := t.TempDir()
	s := writeSpecIn(t, repo, "0.5")
	commitAll(t, repo)
	for _, runs := range []string{filepath.Join(repo, "out"), filepath.Join(repo, "seeds", "my runs")} {
		opt := fakeOptions(runs)
		opt.AllowDirty = false
		opt.Only = "voting-base-*"
		for i := range 2 {
			sum, err := Run(context.Background(), s, opt)
			if err != nil {
				t.Fatalf("runs %s, run %d: %v", runs, i+1, err)
			}
			if len(sum.Failed()) > 0 {
				t.Fatalf("runs %s, run %d: %v", runs, i+1, sum.Failed()[0].Err)
			}
		}
		p, err := pin.Inspect(s.File)
		if err != nil {
			t.Fatal(err)
		}
		if p.Dirty {
			t.Errorf("runs %s: tree dirty after two runs (diff %s)", runs, p.DiffHash)
		}
		data, err := os.ReadFile(filepath.Join(runs, "fk", IgnoreFile))
		if err != nil || !strings.HasSuffix(string(data), "\n*\n") {
			t.Errorf("runs %s: experiment folder's %s = %q, %v", runs, IgnoreFile, data, err)
		}
	}
}

// An existing .gitignore in the experiment folder is the user's: it is
// left as it is.
func TestIgnoreRunsKeepsExistingFile(t *testing.T) {
	runs := t.TempDir()
	p := filepath.Join(runs, "x", IgnoreFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := IgnoreRuns(runs, "x"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "keep\n" {
		t.Fatalf("existing .gitignore rewritten: %q", b)
	}
}
