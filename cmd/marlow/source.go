package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/pretrain"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/spec"
)

// Every command that reads runs (status, check, archive, analyze, report,
// diff) names them the same way: a spec file (its runs are read from
// <runs>/<experiment>), a runs folder (a runs root, an experiment folder or
// one run folder) or a .tar.zst archive written by marlow archive; --runs
// and --only mean the same everywhere.

// sourceArg is the usage word of such an argument.
const sourceArg = "SPEC|RUNS_DIR|ARCHIVE"

// addRunsFlags adds --runs and --only to a command that reads runs.
func addRunsFlags(cmd *cobra.Command, runsDir, only *string) {
	cmd.Flags().StringVar(runsDir, "runs", runner.DefaultRunsDir, "root folder of run folders, read when the source is a spec")
	cmd.Flags().StringVar(only, "only", "", "keep only the runs whose id matches this glob (path.Match syntax, e.g. 'voting-*-seed1')")
}

// isSpecFile reports whether a source argument names a spec.
func isSpecFile(arg string) bool {
	return strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml")
}

// runsSource maps a source argument to the runs it reads: a spec file
// (.yaml or .yml) names <runsDir>/<experiment>; anything else is a runs
// folder or an archive. The spec is returned when the argument is one.
func runsSource(arg, runsDir string) (string, *spec.Spec, error) {
	fi, err := os.Stat(arg)
	if err != nil {
		return "", nil, fmt.Errorf("source %s: %w", arg, err)
	}
	if fi.IsDir() || !isSpecFile(arg) {
		return arg, nil, nil
	}
	s, err := spec.Load(arg)
	if err != nil {
		return "", nil, err
	}
	dir := runner.RunDir(runsDir, s.Experiment, "")
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

// runFilter turns --only into a filter on run folders (their base name is
// the run id); nil keeps every run.
func runFilter(only string) (func(runDir string) bool, error) {
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

// loadStudy analyses the runs named by one or more source arguments as
// one study (analysis.MergeRuns: a run present in two sources with
// different bytes is an error naming it), keeping those whose id matches
// only.
func loadStudy(args []string, runsDir, only string) (*analysis.Study, error) {
	srcs := make([]string, len(args))
	for i, a := range args {
		src, _, err := runsSource(a, runsDir)
		if err != nil {
			return nil, err
		}
		srcs[i] = src
	}
	keep, err := runFilter(only)
	if err != nil {
		return nil, err
	}
	runs, err := analysis.MergeRuns(srcs...)
	if err != nil {
		return nil, err
	}
	if keep == nil {
		return analysis.Analyze(runs)
	}
	var kept []*runlog.Run
	for _, r := range runs {
		if keep(r.Manifest.RunID) {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("analysis: no run in %s matches --only %q (%d runs there)", strings.Join(srcs, ", "), only, len(runs))
	}
	return analysis.Analyze(kept)
}

// runsSourceOrPlan is runsSource for a command that also reads a spec's
// plan (status): a spec is returned loaded, whether or not its runs exist
// yet; any other argument must exist.
func runsSourceOrPlan(arg, runsDir string) (string, *spec.Spec, error) {
	if isSpecFile(arg) {
		if st, err := os.Stat(arg); err == nil && !st.IsDir() {
			s, err := spec.Load(arg)
			if err != nil {
				return "", nil, err
			}
			return runner.RunDir(runsDir, s.Experiment, ""), s, nil
		}
	}
	return runsSource(arg, runsDir)
}
