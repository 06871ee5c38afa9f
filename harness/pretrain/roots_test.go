package pretrain

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/spec"
)

// TestCommittedFoundForSpecOutsideRepo copies seeds/smoke.yaml out of the
// repository and runs from the repository root: the committed base model
// of its scale is found (no pretraining is started; the context is
// cancelled, so a build would fail at once).
func TestCommittedFoundForSpecOutsideRepo(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "seeds", "smoke.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "smoke-copy.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	t.Setenv(CacheEnv, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir, err := Ensure(ctx, s, "s", Options{Threads: 1})
	if err != nil {
		t.Fatalf("Ensure: %v; want the committed checkpoint under %s", err, filepath.Join(root, CommittedDir))
	}
	if !strings.HasPrefix(dir, filepath.Join(root, CommittedDir)) {
		t.Errorf("Ensure = %s, want a folder under %s", dir, filepath.Join(root, CommittedDir))
	}
}
