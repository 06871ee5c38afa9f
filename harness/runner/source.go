package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/marlowlab/marlow/harness/pretrain"
	"github.com/marlowlab/marlow/harness/spec"
)

// Every command that reads runs (status, check, archive, analyze, report,
// diff) names them by one source argument: a spec file (its runs are read
// from <runsDir>/<experiment>), a runs folder (a runs root, an experiment
// folder or one run folder) or a .tar.zst archive written by marlow
// archive. The functions below resolve such an argument.

// IsSpec reports whether a source argument names a spec: an existing file
// (not a folder) whose name ends in .yaml or .yml.
func IsSpec(arg string) bool {
	if !strings.HasSuffix(arg, ".yaml") && !strings.HasSuffix(arg, ".yml") {
		return false
	}
	fi, err := os.Stat(arg)
	return err == nil && !fi.IsDir()
}

// Source maps a source argument to the runs it reads: a spec (IsSpec)
// names <runsDir>/<experiment>, which must exist; anything else is a runs
// folder or an archive, returned as it is once it exists. The spec is
// returned when the argument is one. When a spec's runs do not exist, the
// error says how to make them and, if the spec's report committed its
// logs (reports/<experiment>/logs.tar.zst), names that archive.
func Source(arg, runsDir string) (string, *spec.Spec, error) {
	if _, err := os.Stat(arg); err != nil {
		return "", nil, fmt.Errorf("source %s: %w", arg, err)
	}
	if !IsSpec(arg) {
		return arg, nil, nil
	}
	s, err := spec.Load(arg)
	if err != nil {
		return "", nil, err
	}
	dir := RunDir(runsDir, s.Experiment, "")
	if _, err := os.Stat(dir); err != nil {
		msg := fmt.Sprintf("spec %s: no runs of experiment %q in %s", arg, s.Experiment, dir)
		if errors.Is(err, fs.ErrNotExist) {
			msg += fmt.Sprintf(" (make them with `marlow run %s`", arg)
			if a := committedArchive(s); a != "" {
				msg += fmt.Sprintf(", or read the committed logs: `marlow report %s`", a)
			}
			msg += ")"
		}
		return "", nil, fmt.Errorf("%s: %w", msg, err)
	}
	return dir, s, nil
}

// SourceOrPlan is Source for a command that also reads a spec's plan
// (status): a spec is returned loaded with its experiment folder, whether
// or not its runs exist yet; any other argument must exist.
func SourceOrPlan(arg, runsDir string) (string, *spec.Spec, error) {
	if IsSpec(arg) {
		s, err := spec.Load(arg)
		if err != nil {
			return "", nil, err
		}
		return RunDir(runsDir, s.Experiment, ""), s, nil
	}
	return Source(arg, runsDir)
}

// committedArchive returns the archives of a spec's experiment committed
// with its report, reports/<experiment>/*.tar.zst (logs.tar.zst, or one
// per seed such as logs-seed1.tar.zst ... as `make figures` reads them),
// looked up from the working folder and from the repository holding the
// spec, joined by spaces as one `marlow report` takes them; "" when there
// is none.
func committedArchive(s *spec.Spec) string {
	rel := filepath.Join("reports", s.Experiment)
	cands := []string{rel}
	if root := pretrain.RepoRootOf(s.File); root != "" {
		cands = append(cands, filepath.Join(root, rel))
	}
	for _, c := range cands {
		found, _ := filepath.Glob(filepath.Join(c, "*.tar.zst"))
		var files []string
		for _, f := range found {
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
				files = append(files, f)
			}
		}
		if len(files) > 0 {
			return strings.Join(files, " ")
		}
	}
	return ""
}

// RunFilter turns an --only glob (path.Match syntax) into a filter on run
// folders, whose base name is the run id; nil keeps every run. A malformed
// glob is an error naming it.
func RunFilter(only string) (func(runDir string) bool, error) {
	if only == "" {
		return nil, nil
	}
	if _, err := path.Match(only, ""); err != nil {
		return nil, fmt.Errorf("--only %q: %w", only, err)
	}
	return func(runDir string) bool {
		ok, _ := path.Match(only, path.Base(filepath.ToSlash(runDir)))
		return ok
	}, nil
}
