package main

import (
	"github.com/spf13/cobra"

	"github.com/marlowlab/marlow/analysis/report"
)

func newAnalyzeCmd() *cobra.Command {
	var (
		asJSON        bool
		runsDir, only string
		jobs          int
	)
	cmd := &cobra.Command{
		Use:   "analyze " + sourceArg,
		Short: "Print per-run ceiling/floor metrics and failure-mode verdicts without writing a report",
		Long: "analyze reads the runs like marlow report and prints one line per run view (an SA-RL run\n" +
			"once per workflow it was evaluated in): base, ceiling and its step, final, floor, drop, AUC,\n" +
			"the terminal-cliff verdict, roles with gradient amplification before the cliff, the role\n" +
			"dominating the shared policy's gradient, and captured roles. --json prints the rows of\n" +
			"summary.parquet instead (undefined values as null).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := loadStudy(args[:1], runsDir, only, jobs)
			if err != nil {
				return err
			}
			if asJSON {
				return report.WriteAnalysisJSON(cmd.OutOrStdout(), st)
			}
			return report.WriteAnalysisTable(cmd.OutOrStdout(), st)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary rows as JSON")
	addRunsFlags(cmd, &runsDir, &only)
	addJobsFlag(cmd, &jobs)
	return cmd
}
