package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marlowlab/marlow/analysis"
	"github.com/marlowlab/marlow/harness/runner"
	"github.com/marlowlab/marlow/harness/spec"
	"github.com/marlowlab/marlow/reports"
)

func newReportCmd() *cobra.Command {
	var out, runsDir string
	var partial bool
	cmd := &cobra.Command{
		Use:   "report SPEC|RUNS_DIR|ARCHIVE...",
		Short: "Write an experiment's report (README.md, figures/, summary.parquet) from its run logs",
		Long: "report analyses the runs of one experiment and writes a report folder: README.md (matrix\n" +
			"table, findings, figures, failure-mode evidence, definitions, parameters, provenance and the\n" +
			"command that rebuilds it), figures/ (PNG and SVG) and summary.parquet. The source is a spec\n" +
			"file (its runs are read from <runs>/<experiment>, --runs defaulting to runs), a runs folder,\n" +
			"or a .tar.zst archive written by marlow archive; several sources are merged into one study\n" +
			"(runs gathered from several clusters, or archived seed by seed), and a run present in two of\n" +
			"them with different bytes is an error naming it. The same logs give byte-identical output.\n" +
			"--out defaults to reports/<experiment>.\n\n" +
			"Every run must be done: runs that are running, crashed, interrupted or failed (and, with a\n" +
			"spec, planned runs with no folder yet) make report refuse, listing them, unless --partial;\n" +
			"then the report says it is partial and lists each such run at its top. Segments are checked\n" +
			"against the SHA-256 inventory of their manifests as they are read.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := loadStudy(runsDir, args...)
			if err != nil {
				return err
			}
			incomplete, err := incompleteRunsOf(args, runsDir, st)
			if err != nil {
				return err
			}
			if len(incomplete) > 0 && !partial {
				return fmt.Errorf("report: %d runs of experiment %s are not done (pass --partial to report anyway, listing them):\n  %s",
					len(incomplete), st.Experiment, strings.Join(incomplete, "\n  "))
			}
			dst := out
			if dst == "" {
				dst = filepath.Join("reports", st.Experiment)
			}
			files, err := reports.Write(st, dst, reports.Options{Source: strings.Join(args, " "), Out: filepath.ToSlash(dst), Incomplete: incomplete})
			if err != nil {
				return fmt.Errorf("report %s: %w", dst, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report %s: %d files from %d run views in %d cells\n", dst, len(files), len(st.Runs), len(st.Cells))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "report folder (default reports/<experiment>)")
	cmd.Flags().BoolVar(&partial, "partial", false, "report an experiment whose runs are not all done, listing the missing, running and failed runs in the report")
	cmd.Flags().StringVar(&runsDir, "runs", runner.DefaultRunsDir, "root folder of run folders, read when a source is a spec")
	return cmd
}

// loadStudy analyses the runs named by report or analyze arguments (a spec
// names <runsDir>/<experiment>), merging several sources into one study.
func loadStudy(runsDir string, args ...string) (*analysis.Study, error) {
	srcs := make([]string, len(args))
	for i, a := range args {
		src, err := runsSource(a, runsDir)
		if err != nil {
			return nil, err
		}
		srcs[i] = src
	}
	return analysis.LoadAll(srcs...)
}

// runsSource maps a report argument to the runs it reads: a spec file
// (.yaml or .yml) names <runsDir>/<experiment>; anything else is a runs
// folder or an archive.
func runsSource(arg, runsDir string) (string, error) {
	fi, err := os.Stat(arg)
	if err != nil {
		return "", fmt.Errorf("source %s: %w", arg, err)
	}
	if fi.IsDir() || !(strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml")) {
		return arg, nil
	}
	s, err := spec.Load(arg)
	if err != nil {
		return "", err
	}
	dir := runner.RunDir(runsDir, s.Experiment, "")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("spec %s: runs of experiment %q: %w", arg, s.Experiment, err)
	}
	return dir, nil
}
