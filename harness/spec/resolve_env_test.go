package spec

import (
	"path/filepath"
	"testing"
)

// One rule for relative paths: a path that starts with a set variable is
// relative to the current folder (as the shell takes the variable); a
// default or a literal written in the spec is relative to the spec's folder.
func TestResolvePathRelativeRule(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	specFile := filepath.Join(string(filepath.Separator), "repo", "seeds", "x.yaml")
	cases := []struct {
		env, p, want string
	}{
		{"", "${MARLOW_T_DIR:-../models}/Q", filepath.Join(string(filepath.Separator), "repo", "models", "Q")},
		{"scratch/m", "${MARLOW_T_DIR:-../models}/Q", filepath.Join(cwd, "scratch", "m", "Q")},
		{"/abs/m", "${MARLOW_T_DIR:-../models}/Q", filepath.Join(string(filepath.Separator), "abs", "m", "Q")},
		{"scratch/m", "data/${MARLOW_T_DIR}", filepath.Join(string(filepath.Separator), "repo", "seeds", "data", "scratch", "m")},
	}
	for _, tc := range cases {
		t.Setenv("MARLOW_T_DIR", tc.env)
		got, err := resolvePath(specFile, tc.p)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("MARLOW_T_DIR=%q %s: %s, want %s", tc.env, tc.p, got, tc.want)
		}
	}
}
