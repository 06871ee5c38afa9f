package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/marlowlab/marlow/reports"
)

func newDiffCmd() *cobra.Command {
	var (
		experiment, repo string
		asJSON           bool
	)
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare two experiment summaries: two git revisions, or two report or run folders",
		Long: "diff compares, per cell and condition, every summary metric of A and B: the values, the\n" +
			"delta with its 95% interval (from both sides' standard errors), whether that interval excludes\n" +
			"zero (never from a zero-width interval), and how many seeds and problems each side rests on,\n" +
			"with a warning below 3 seeds. When A and B are both folders they\n" +
			"are read as report folders (summary.parquet) or analysed as runs folders; otherwise they are\n" +
			"git revisions, and reports/<experiment>/summary.parquet is read at each with go-git, without\n" +
			"a checkout (bare repositories work). --experiment may be omitted when revision A holds one\n" +
			"report.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, b, err := loadDiffSides(repo, experiment, args[0], args[1])
			if err != nil {
				return err
			}
			d := reports.Diff(a, b)
			if asJSON {
				data, err := d.JSON(args[0], args[1])
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), d.Markdown(args[0], args[1]))
			return err
		},
	}
	cmd.Flags().StringVar(&experiment, "experiment", "", "experiment whose reports/<experiment>/summary.parquet to compare")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of markdown")
	cmd.Flags().StringVar(&repo, "repo", ".", "git repository (work tree or bare) holding the revisions")
	return cmd
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// loadDiffSides reads the two summaries: two folders, else two revisions
// of repo.
func loadDiffSides(repo, experiment, A, B string) (a, b []reports.SummaryRow, err error) {
	if isDir(A) && isDir(B) {
		if a, err = reports.LoadSummaryDir(A); err != nil {
			return nil, nil, err
		}
		b, err = reports.LoadSummaryDir(B)
		return a, b, err
	}
	a, exp, err := reports.LoadSummaryAt(repo, A, experiment)
	if err != nil {
		return nil, nil, err
	}
	b, _, err = reports.LoadSummaryAt(repo, B, exp)
	return a, b, err
}
