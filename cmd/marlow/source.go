package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/runlog"
	"github.com/marlowlab/marlow/harness/runner"
)

// Every command that reads runs (status, check, archive, analyze, report,
// diff) names them the same way, resolved by runner.Source: a spec file
// (its runs are read from <runs>/<experiment>), a runs folder (a runs root,
// an experiment folder or one run folder) or a .tar.zst archive written by
// marlow archive; --runs and --only mean the same everywhere.

// sourceArg is the usage word of such an argument.
const sourceArg = "SPEC|RUNS_DIR|ARCHIVE"

// addRunsFlags adds --runs and --only to a command that reads runs.
func addRunsFlags(cmd *cobra.Command, runsDir, only *string) {
	cmd.Flags().StringVar(runsDir, "runs", runner.DefaultRunsDir, "root folder of run folders, read when the source is a spec")
	cmd.Flags().StringVar(only, "only", "", "keep only the runs whose id matches this glob (path.Match syntax, e.g. 'voting-*-seed1')")
}

// loadStudy analyses the runs named by one or more source arguments as
// one study (analysis.MergeRuns: a run present in two sources with
// different bytes is an error naming it), keeping those whose id matches
// only.
func loadStudy(args []string, runsDir, only string) (*analysis.Study, error) {
	srcs := make([]string, len(args))
	for i, a := range args {
		src, _, err := runner.Source(a, runsDir)
		if err != nil {
			return nil, err
		}
		srcs[i] = src
	}
	keep, err := runner.RunFilter(only)
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
