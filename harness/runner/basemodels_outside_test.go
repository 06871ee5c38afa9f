package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/pretrain"
	"github.com/marlowlab/marlow/harness/spec"
)

// A spec copied out of the repository and planned from the repository
// root finds the committed base model, as pretrain.Ensure (what `marlow
// run` calls) does, instead of announcing a pretraining.
func TestBaseModelsSpecOutsideRepo(t *testing.T) {
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
	t.Chdir(root)
	t.Setenv(pretrain.CacheEnv, t.TempDir())
	bases := planBases(t, p)
	for _, b := range bases {
		if b.Where != BaseCommitted || !strings.HasPrefix(b.Dir, filepath.Join(root, pretrain.CommittedDir)) {
			t.Errorf("scale %s: %s %s, want committed under %s", b.Scale, b.Where, b.Dir, filepath.Join(root, pretrain.CommittedDir))
		}
	}
}

// A spec outside any repository, planned from a folder outside one too,
// cannot reach the committed base models: the plan says where it looked and
// what to do, instead of only that the model will be pretrained.
func TestBaseModelsOutsideAnyRepoSaysWhereItLooked(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "seeds", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	away := t.TempDir()
	p := filepath.Join(away, "demo-copy.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	t.Setenv(pretrain.CacheEnv, cache)
	t.Chdir(away)
	bases := planBases(t, p)
	if len(bases) != 1 || bases[0].Where != BasePretrain {
		t.Fatalf("bases %+v, want one to be pretrained", bases)
	}
	text := whereText(bases[0])
	for _, want := range []string{"looked in " + filepath.Join(cache, "models") + string(filepath.Separator), "run marlow from a marlow checkout to use its committed base models"} {
		if !strings.Contains(text, want) {
			t.Errorf("plan's base model line %q lacks %q", text, want)
		}
	}
}

// --only 'voting-*' keeps the cell's SP and IP runs but not its SA-RL run,
// and says so; a glob that matches the SA-RL run too is quiet.
func TestOnlyWarnings(t *testing.T) {
	_, runs := planOf(t, filepath.Join("..", "..", "seeds", "demo.yaml"))
	cases := []struct {
		only string
		want string // "" for no warning
	}{
		{"", ""},
		{"voting-*", "sa-rl-s-synth-math-seed1"},
		{"voting-sp-*", "sa-rl-s-synth-math-seed1"},
		{"*-s-synth-math-seed1", ""},
		{"voting-base-*", ""},
		{"sa-rl-*", ""},
		{"voting-sp-s-synth-math-seed1", ""}, // one run named exactly, as marlow slurm's tasks do
	}
	for _, tc := range cases {
		got := OnlyWarnings(runs, tc.only)
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("--only %q: unexpected warning %q", tc.only, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want) || !strings.Contains(got[0], "the SA-RL run of their cell")):
			t.Errorf("--only %q: warnings %q, want one naming %s", tc.only, got, tc.want)
		}
	}
}

// planBases loads and plans the spec at path and returns its base models.
func planBases(t *testing.T, path string) []BaseModel {
	t.Helper()
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	planned, err := spec.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	bases, err := BaseModels(s, planned)
	if err != nil {
		t.Fatal(err)
	}
	return bases
}
