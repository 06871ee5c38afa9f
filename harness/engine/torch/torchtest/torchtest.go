// Package torchtest finds the Python interpreter for tests that need the
// torch engine's packages. The interpreter is $MARLOW_PYTHON (default
// python3; `.ci/run setup` creates .venv/ and CI points MARLOW_PYTHON at
// it). When it lacks a package the test is skipped on a developer machine
// and fails under CI (CI=true), so CI can never pass by skipping.
package torchtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Python returns the interpreter after checking that it imports modules.
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	py := os.Getenv("MARLOW_PYTHON")
	if py == "" {
		py = "python3"
	}
	// find_spec, not import: importing torch and transformers takes seconds.
	code := "import importlib.util, sys; missing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]; sys.exit('missing: ' + ' '.join(missing) if missing else 0)"
	out, err := exec.Command(py, append([]string{"-c", code}, modules...)...).CombinedOutput()
	if err != nil {
		msg := "interpreter " + py + " (set MARLOW_PYTHON; `.ci/run setup` makes .venv/) lacks Python modules (" + strings.Join(modules, ", ") + "): " + err.Error() + ": " + lastLine(string(out))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return py
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
