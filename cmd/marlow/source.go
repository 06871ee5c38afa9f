package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/marlowlab/marlow/analysis"
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

// addJobsFlag adds --jobs to a command that analyses runs.
func addJobsFlag(cmd *cobra.Command, jobs *int) {
	cmd.Flags().IntVar(jobs, "jobs", 0, "runs read and reduced at once (0: one per CPU); the output does not depend on it")
}

// loadStudy analyses the runs named by one or more source arguments as
// one study (analysis.LoadWith: a run present in two sources with
// different bytes is an error naming it), keeping those whose id matches
// only, reading jobs runs at once.
func loadStudy(args []string, runsDir, only string, jobs int) (*analysis.Study, error) {
	if jobs < 0 {
		return nil, fmt.Errorf("--jobs %d: give a positive number of runs to read at once, or 0 for one per CPU", jobs)
	}
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
	return analysis.LoadWith(context.Background(), analysis.LoadOptions{Jobs: jobs, Keep: keep, Only: only}, srcs...)
}
