package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marlowlab/marlow/analysis/report"
)

func newReportCmd() *cobra.Command {
	var out, runsDir, only string
	var partial bool
	var jobs int
	cmd := &cobra.Command{
		Use:   "report " + sourceArg + "...",
		Short: "Write an experiment's report (README.md, figures/, summary.parquet) from its run logs",
		Long: "report analyses the runs of one experiment and writes a report folder: README.md (matrix\n" +
			"table, findings, the comparison with the paper's four claims with their rules, counts,\n" +
			"intervals and verdicts, figures, failure-mode evidence, definitions, parameters, provenance\n" +
			"and the command that rebuilds it), figures/ (PNG and SVG) and summary.parquet. The source is\n" +
			"a spec file (its runs are read from <runs>/<experiment>, --runs defaulting to runs), a runs\n" +
			"folder, or a .tar.zst archive written by marlow archive; several sources are merged into one\n" +
			"study (runs gathered from several clusters, or archived seed by seed), and a run present in\n" +
			"two of them with different bytes is an error naming it. The same logs give byte-identical\n" +
			"output. --only keeps the runs whose id matches a glob. --out defaults to\n" +
			"reports/<experiment>; a folder named like Go code (a .go file, testdata, vendor) or\n" +
			"holding Go source is refused.\n\n" +
			"Every run must be done: runs that are running, crashed, interrupted or failed (and, with a\n" +
			"spec, planned runs with no folder yet) make report refuse, listing them, unless --partial;\n" +
			"then the report says it is partial and lists each such run at its top. Segments are checked\n" +
			"against the SHA-256 inventory of their manifests as they are read.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := loadStudy(args, runsDir, only, jobs)
			if err != nil {
				return err
			}
			incomplete, err := incompleteRunsOf(args, runsDir, only, st)
			if err != nil {
				return err
			}
			if len(incomplete) > 0 && !partial {
				verb := "runs of experiment %s are not done"
				if len(incomplete) == 1 {
					verb = "run of experiment %s is not done"
				}
				return fmt.Errorf("report: %d "+verb+" (pass --partial to report anyway, listing them):\n  %s",
					len(incomplete), st.Experiment, strings.Join(incomplete, "\n  "))
			}
			dst := out
			if dst == "" {
				dst = filepath.Join("reports", st.Experiment)
			}
			files, err := report.Write(st, dst, report.Options{Source: strings.Join(args, " "), Out: filepath.ToSlash(dst), Incomplete: incomplete})
			if err != nil {
				return fmt.Errorf("report %s: %w", dst, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report %s: %d files from %d run views in %d cells\n", dst, len(files), len(st.Runs), len(st.Cells))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "report folder (default reports/<experiment>)")
	cmd.Flags().BoolVar(&partial, "partial", false, "report an experiment whose runs are not all done, listing the missing, running and failed runs in the report")
	addRunsFlags(cmd, &runsDir, &only)
	addJobsFlag(cmd, &jobs)
	return cmd
}
